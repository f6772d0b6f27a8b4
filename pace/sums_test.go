package pace

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// TestDuplicateUnitCost: ContextWithCost called twice with one unit gives
// a Request two Amounts of it: a lease costs both, in the sums kept as
// leases come and go and in a walk of the leases alike (costIn read the
// first only, so a lease sent after inflightBy's cut still counted 500).
func TestDuplicateUnitCost(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s State
	var cfg Config
	d := s.Reserve(now, Request{Route: "POST /v1/chat", Cost: []Amount{{Unit: ratelimit.UnitTokens, N: 1000}, {Unit: ratelimit.UnitTokens, N: 500}}}, &cfg)
	if !d.OK {
		t.Fatalf("%+v", d)
	}
	k := &s.k
	p := &policy{bucket: d.Lease.l.bucket, unit: ratelimit.UnitTokens}
	var walk int64
	for i := range k.leases {
		walk += costIn(k.leases[i].cost, p.unit)
	}
	before := k.inflightBy(p, d.Lease.l.at-int64(time.Second))
	t.Logf("inflightAll %d, walk %d, inflightBy(before it was sent) %d", k.inflightAll(p), walk, before)
	if k.inflightAll(p) != walk || before != 0 {
		t.Fatalf("sums %d, per-lease walk %d; inflightBy a second before it was sent: %d", k.inflightAll(p), walk, before)
	}
}

// TestFlightSumsBounded: a server that names a new bucket per route
// (GitHub's X-RateLimit-Resource, or an IETF partition key) leaves the
// sums of leases in flight an entry per bucket with leases only (they kept
// one for every bucket a lease was ever in).
func TestFlightSumsBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s State
	var cfg Config
	for i := range 2000 {
		route := fmt.Sprintf("GET /r%d", i)
		h := http.Header{
			"X-Ratelimit-Limit":     {"5000"},
			"X-Ratelimit-Remaining": {"4000"},
			"X-Ratelimit-Used":      {"1000"},
			"X-Ratelimit-Resource":  {fmt.Sprintf("res%d", i)},
			"X-Ratelimit-Reset":     {strconv.FormatInt(now.Add(time.Hour).Unix(), 10)},
		}
		for range 2 {
			now = now.Add(time.Millisecond)
			d := s.Reserve(now, Request{Route: route}, &cfg)
			if !d.OK {
				continue
			}
			s.Complete(now.Add(time.Millisecond), d.Lease, Answer{Obs: ratelimit.ParseHeaders(h, 200, now)}, &cfg)
		}
	}
	t.Logf("buckets %d, derived.flight %d, leases %d", len(s.k.buckets), len(s.k.derived.flight), len(s.k.leases))
	if len(s.k.derived.flight) > 2*maxBuckets {
		t.Fatalf("derived.flight holds %d entries (k.buckets %d)", len(s.k.derived.flight), len(s.k.buckets))
	}
}

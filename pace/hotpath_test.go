package pace

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// ampleQuota is the hot path's setting: an instant, a request, and an
// answer (one IETF policy) that leaves the quota ample.
func ampleQuota() (time.Time, Request, ratelimit.Observation) {
	h := http.Header{
		"Date":             {"Wed, 26 Nov 2026 12:00:00 GMT"},
		"Ratelimit-Policy": {`"default";q=1000000000;w=60`},
		"Ratelimit":        {`"default";r=999999999;t=30`},
	}
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	return t0, Request{Route: "GET /items"}, ratelimit.ParseHeaders(h, 200, t0)
}

// BenchmarkReserveComplete: one request's work in a MemoryStore, with ample
// quota: a lease reserved and its answer (one IETF policy) completed, as
// the pacing layer does for every request. Apply is the generic path, with
// its closures; InPlaceAt the in-process store's, as the pacing layer uses
// its own store.
func BenchmarkReserveComplete(b *testing.B) {
	t0, req, obs := ampleQuota()
	var cfg Config
	b.Run("Apply", func(b *testing.B) {
		m := NewMemoryStore(func() time.Time { return t0 })
		ctx := context.Background()
		now := t0
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Microsecond)
			var d Decision
			Apply(ctx, m, "k", func(s *State) error { d = s.Reserve(now, req, &cfg); return nil })
			a := Answer{Obs: obs}
			Apply(ctx, m, "k", func(s *State) error { s.Complete(now, d.Lease, a, &cfg); return nil })
		}
	})
	b.Run("InPlaceAt", func(b *testing.B) {
		m := NewMemoryStore(func() time.Time { return t0 })
		now := t0
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Microsecond)
			d := reserveAt(m, now, req, &cfg)
			completeAt(m, now, d.Lease, Answer{Obs: obs}, &cfg)
		}
	})
}

func reserveAt(m *MemoryStore, now time.Time, req Request, cfg *Config) (d Decision) {
	m.UpdateInPlaceAt(now, "k", func(s *State) error { d = s.Reserve(now, req, cfg); return nil })
	return d
}

func completeAt(m *MemoryStore, now time.Time, l Lease, a Answer, cfg *Config) {
	m.UpdateInPlaceAt(now, "k", func(s *State) error { s.Complete(now, l, a, cfg); return nil })
}

// BenchmarkReserveCompleteInFlight: BenchmarkReserveComplete's InPlaceAt
// with n leases already in flight on the key (requests sent and not yet
// answered), as under thousands of goroutines: a per-request cost that
// grows with n is quadratic under the key's lock.
func BenchmarkReserveCompleteInFlight(b *testing.B) {
	t0, req, obs := ampleQuota()
	var cfg Config
	for _, n := range []int{0, 100, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			m := NewMemoryStore(func() time.Time { return t0 })
			now := t0
			// The key's first answer, then n requests left in flight.
			d := reserveAt(m, now, req, &cfg)
			completeAt(m, now, d.Lease, Answer{Obs: obs}, &cfg)
			for range n {
				if d := reserveAt(m, now, req, &cfg); !d.OK {
					b.Fatalf("refused with %d in flight: %+v", n, d)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				d := reserveAt(m, now, req, &cfg)
				completeAt(m, now, d.Lease, Answer{Obs: obs}, &cfg)
			}
		})
	}
}

// BenchmarkCredit: the state's share of a request sent on credit, with
// ample quota, as the pacing layer does it: the key counts its credit out
// after an answer (Credit); requests go on it without the state; when it
// runs out, those are booked in one batch (Spent) and one request is
// reserved and its answer read, which counts the credit again. Per
// request, this is what BenchmarkReserveComplete costs, amortized.
func BenchmarkCredit(b *testing.B) {
	t0, req, obs := ampleQuota()
	var cfg Config
	m := NewMemoryStore(func() time.Time { return t0 })
	now := t0
	d := reserveAt(m, now, req, &cfg)
	completeAt(m, now, d.Lease, Answer{Obs: obs}, &cfg)
	var n int64
	m.UpdateInPlaceAt(now, "k", func(s *State) error { n = s.Credit(now, req.Route); return nil })
	if n == 0 {
		b.Fatal("no credit with ample quota")
	}
	spans := make([]Span, 0, maxCredit)
	origin := now // of the spans, since the last count
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		if n > 0 {
			n--
			spans = append(spans, Span{Sent: now.Sub(origin), Recv: now.Sub(origin) + time.Microsecond})
			continue
		}
		m.UpdateInPlaceAt(now, "k", func(s *State) error {
			s.Spent(req.Route, origin, spans, &cfg)
			d = s.Reserve(now, req, &cfg)
			return nil
		})
		spans = spans[:0]
		m.UpdateInPlaceAt(now, "k", func(s *State) error {
			s.Complete(now, d.Lease, Answer{Obs: obs}, &cfg)
			n = s.Credit(now, req.Route)
			return nil
		})
		origin = now
	}
}

package bench

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/headway-go/headway"
)

// run runs bs as sub-benchmarks of b, stripping prefix from their names.
func run(b *testing.B, prefix string, bs []Benchmark) {
	for _, bm := range bs {
		b.Run(strings.TrimPrefix(bm.Name, prefix), bm.Run)
	}
}

// BenchmarkOverhead: one request through each peer over the in-memory
// transport, per shape (GET, PUT with a 1 KiB body).
func BenchmarkOverhead(b *testing.B) { run(b, "Overhead/", OverheadBenchmarks()) }

// BenchmarkParse: reading rate-limit headers of typical responses.
func BenchmarkParse(b *testing.B) { run(b, "Parse/", ParseBenchmarks()) }

// TestBenchmarksRun runs each benchmark's operation a few times, so that a
// broken benchmark fails CI, where benchmarks do not run.
func TestBenchmarksRun(t *testing.T) {
	for _, bm := range append(OverheadBenchmarks(), ParseBenchmarks()...) {
		t.Run(bm.Name, func(t *testing.T) {
			op, check := bm.Setup()
			for range 3 {
				if err := op(); err != nil {
					t.Fatal(err)
				}
			}
			if err := check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// BenchmarkBreakdown splits headway's GET overhead (not in the report):
// each layer alone, and responses without rate-limit headers, where
// ratelimit.ParseHeaders finds nothing to read. Two floors stand beside
// them: a RoundTripper that only passes the request on, and one that reads
// the clock when the request goes and when its answer comes, as pacing a
// request on credit must (credit.go).
func BenchmarkBreakdown(b *testing.B) {
	t0 := time.Now()
	var sink time.Duration
	plain := http.Header{"Date": {"Wed, 25 Nov 2026 21:32:42 GMT"}, "Content-Type": {"application/json"}}
	for _, tc := range []struct {
		name   string
		header http.Header
		rt     func(http.RoundTripper) http.RoundTripper
	}{
		{"net-http", RateLimitHeader(), nil},
		{"headway", RateLimitHeader(), func(rt http.RoundTripper) http.RoundTripper { return headway.NewTransport(rt) }},
		{"headway-retry-only", RateLimitHeader(), func(rt http.RoundTripper) http.RoundTripper {
			return headway.NewTransport(rt, headway.WithoutPacing())
		}},
		{"headway-pacing-only", RateLimitHeader(), func(rt http.RoundTripper) http.RoundTripper {
			return headway.NewTransport(rt, headway.WithoutRetries())
		}},
		{"pass-through", RateLimitHeader(), func(rt http.RoundTripper) http.RoundTripper { return passThrough{rt} }},
		{"two-clock-reads", RateLimitHeader(), func(rt http.RoundTripper) http.RoundTripper {
			return clockReads{rt, t0, &sink}
		}},
		{"net-http-no-rl-headers", plain, nil},
		{"headway-no-rl-headers", plain, func(rt http.RoundTripper) http.RoundTripper { return headway.NewTransport(rt) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var rt http.RoundTripper = NewTransport(tc.header)
			if tc.rt != nil {
				rt = tc.rt(rt)
			}
			c := doHTTP(&http.Client{Transport: rt})
			b.ReportAllocs()
			for b.Loop() {
				if status, err := c(context.Background(), http.MethodGet, nil); err != nil || status != http.StatusOK {
					b.Fatal(status, err)
				}
			}
		})
	}
}

// passThrough is the least a RoundTripper stacked on another can do.
type passThrough struct{ next http.RoundTripper }

func (p passThrough) RoundTrip(r *http.Request) (*http.Response, error) { return p.next.RoundTrip(r) }

// clockReads reads the monotonic clock before and after the transport
// below, as the pacing layer does for a request on credit.
type clockReads struct {
	next http.RoundTripper
	t0   time.Time
	sink *time.Duration
}

func (c clockReads) RoundTrip(r *http.Request) (*http.Response, error) {
	*c.sink += time.Since(c.t0)
	resp, err := c.next.RoundTrip(r)
	*c.sink += time.Since(c.t0)
	return resp, err
}

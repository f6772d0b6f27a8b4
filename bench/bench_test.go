package bench

import (
	"context"
	"net/http"
	"strings"
	"testing"

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
// ratelimit.ParseHeaders finds nothing to read.
func BenchmarkBreakdown(b *testing.B) {
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

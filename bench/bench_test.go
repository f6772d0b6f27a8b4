package bench

import (
	"strings"
	"testing"
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

// Command benchreport runs headway next to its peers, in simulations of
// rate-limited and failing APIs and in overhead and header-parsing
// benchmarks, and writes the results to docs/BENCHMARKS.md and its charts
// (docs/benchmarks.svg, docs/goodput.svg, docs/outage.svg). From the
// repository root:
//
//	cd bench && go run ./cmd/benchreport
//
// First the simulations, in virtual time (testing/synctest, each run in a
// bubble of its own): goodput against ratelimittest for every algorithm,
// dialect and peer (-simruns runs each, medians reported), then the outage
// runs (amplification, recovery). Then every benchmark of package bench
// in-process (testing.Benchmark), -count times each, interleaved (one run of
// each benchmark per round, so that a slow patch of the machine touches all
// of them alike), reported as medians with 95% confidence intervals, as
// benchstat does. That takes about four minutes. Flags:
//
//	-count N        runs per benchmark (default 10; 6 or more give intervals)
//	-benchtime D    duration of one run (default 500ms)
//	-simruns N      runs per goodput case (default 5)
//	-run REGEXP     only the benchmarks and simulations matching REGEXP
//	                (Overhead/..., Parse/..., Goodput/<algorithm>/<dialect>/<peer>,
//	                Outage/amplification/<peer>, Outage/recovery/<peer>); prints, writes nothing
//	-docs DIR       where to write BENCHMARKS.md and the charts (default: bench/../docs)
//	-raw FILE       also write the benchmark runs in go test's format, for benchstat
//
// The same benchmarks run under go test (cd bench && go test -bench .
// -benchmem ./...), which is also the way to profile one of them.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/headway-go/headway/bench"
)

func main() {
	fs := flag.NewFlagSet("benchreport", flag.ExitOnError)
	count := fs.Int("count", 10, "runs per benchmark")
	benchtime := fs.Duration("benchtime", 500*time.Millisecond, "duration of one run")
	run := fs.String("run", "", "run only the benchmarks matching this regexp, and write nothing")
	docs := fs.String("docs", filepath.Join(benchDir(), "..", "docs"), "directory to write BENCHMARKS.md and benchmarks.svg into")
	raw := fs.String("raw", "", "also write every benchmark run to this file in go test's format (for benchstat)")
	simruns := fs.Int("simruns", 5, "runs per goodput simulation")
	fs.Parse(os.Args[1:])
	if fs.NArg() > 0 || *count < 1 || *benchtime <= 0 || *simruns < 1 {
		fs.Usage()
		os.Exit(2)
	}
	var filter *regexp.Regexp
	if *run != "" {
		var err error
		if filter, err = regexp.Compile(*run); err != nil {
			fmt.Fprintln(os.Stderr, "benchreport: -run:", err)
			os.Exit(2)
		}
	}
	if err := mainErr(*count, *simruns, *benchtime, filter, *docs, *raw); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func mainErr(count, simruns int, benchtime time.Duration, filter *regexp.Regexp, docs, raw string) error {
	// testing.Benchmark reads its duration from the testing package's
	// flags, which exist once testing.Init has run.
	testing.Init()
	if err := flag.Set("test.benchtime", benchtime.String()); err != nil {
		return err
	}
	if filter == nil {
		// Fail before minutes of simulations and benchmarks, not after.
		if err := os.MkdirAll(docs, 0o755); err != nil {
			return err
		}
	}

	var bms []bench.Benchmark
	for _, bm := range append(bench.OverheadBenchmarks(), bench.ParseBenchmarks()...) {
		if filter == nil || filter.MatchString(bm.Name) {
			bms = append(bms, bm)
		}
	}

	env := readEnv()
	env.Count, env.Benchtime = count, benchtime
	sims, err := runSims(filter, simruns)
	if err != nil {
		return err
	}
	if len(bms) == 0 && !sims.Any() {
		return fmt.Errorf("no benchmark or simulation matches -run %s", filter)
	}
	env.SimElapsed = sims.Elapsed
	res := newResults(bms)
	start := time.Now()
	for round := 1; round <= count; round++ {
		for _, bm := range bms {
			var failed error
			r := testing.Benchmark(func(b *testing.B) {
				op, check := bm.Setup()
				b.ReportAllocs()
				for b.Loop() {
					if err := op(); err != nil {
						failed = err
						b.FailNow()
					}
				}
				if err := check(); err != nil {
					failed = err
					b.FailNow()
				}
			})
			if failed != nil || r.N == 0 {
				return fmt.Errorf("%s: %v", bm.Name, failed)
			}
			// B/op and allocs/op as go test -benchmem prints them
			// (rounded down); ns/op unrounded, for the parsing ones.
			s := Sample{
				NsPerOp:     float64(r.T.Nanoseconds()) / float64(r.N),
				BytesPerOp:  float64(r.AllocedBytesPerOp()),
				AllocsPerOp: float64(r.AllocsPerOp()),
			}
			res.add(bm.Name, s, r.N)
			fmt.Fprintf(os.Stderr, "%d/%d %-40s %10.1f ns/op %8.0f B/op %6.0f allocs/op\n",
				round, count, bm.Name, s.NsPerOp, s.BytesPerOp, s.AllocsPerOp)
		}
	}
	env.Elapsed = time.Since(start)

	if raw != "" {
		if err := writeFile(raw, func(w io.Writer) error { return res.writeRaw(w, env) }); err != nil {
			return err
		}
	}
	if filter != nil {
		writeSummary(os.Stdout, res, sims)
		return nil
	}
	files := []struct {
		name  string
		write func(io.Writer) error
	}{
		{"BENCHMARKS.md", func(w io.Writer) error { return writeMarkdown(w, res, sims, env) }},
		{"benchmarks.svg", func(w io.Writer) error { return writeSVG(w, res, env) }},
		{"goodput.svg", func(w io.Writer) error { return writeGoodputSVG(w, sims, env) }},
		{"outage.svg", func(w io.Writer) error { return writeOutageSVG(w, sims, env) }},
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(docs, f.name), f.write); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "wrote BENCHMARKS.md and its charts to %s in %v\n", docs, (env.SimElapsed + env.Elapsed).Round(time.Second))
	return nil
}

// writeFile writes name through write, replacing it only when write
// succeeded.
func writeFile(name string, write func(io.Writer) error) error {
	var b strings.Builder
	if err := write(&b); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return os.WriteFile(name, []byte(b.String()), 0o644)
}

// results holds every run of every benchmark, in the benchmarks' order.
type results struct {
	names   []string
	samples map[string][]Sample
	iters   map[string][]int
}

func newResults(bms []bench.Benchmark) *results {
	r := &results{samples: map[string][]Sample{}, iters: map[string][]int{}}
	for _, bm := range bms {
		r.names = append(r.names, bm.Name)
	}
	return r
}

func (r *results) add(name string, s Sample, n int) {
	r.samples[name] = append(r.samples[name], s)
	r.iters[name] = append(r.iters[name], n)
}

// get summarizes one benchmark's runs; ok is false when it did not run.
func (r *results) get(name string) (ns, bytes, allocs Summary, ok bool) {
	ss := r.samples[name]
	if len(ss) == 0 {
		return ns, bytes, allocs, false
	}
	var a, b, c []float64
	for _, s := range ss {
		a, b, c = append(a, s.NsPerOp), append(b, s.BytesPerOp), append(c, s.AllocsPerOp)
	}
	// B/op and allocs/op are whole numbers in every run; a median of an
	// even count of them is too.
	bytes, allocs = summarize(b), summarize(c)
	bytes.Median, allocs.Median = math.Floor(bytes.Median), math.Floor(allocs.Median)
	return summarize(a), bytes, allocs, true
}

// writeRaw writes every run as go test -bench -benchmem prints it.
func (r *results) writeRaw(w io.Writer, env Env) error {
	fmt.Fprintf(w, "goos: %s\ngoarch: %s\npkg: github.com/headway-go/headway/bench\ncpu: %s\n", runtime.GOOS, runtime.GOARCH, env.CPU)
	for _, name := range r.names {
		for i, s := range r.samples[name] {
			fmt.Fprintf(w, "Benchmark%s-%d\t%d\t%.2f ns/op\t%.0f B/op\t%.0f allocs/op\n",
				name, env.GOMAXPROCS, r.iters[name][i], s.NsPerOp, s.BytesPerOp, s.AllocsPerOp)
		}
	}
	return nil
}

package main

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/headway-go/headway/bench"
	rlt "github.com/headway-go/headway/ratelimittest"
)

// fakeResults returns every benchmark with count runs: overhead figures
// scaled per peer, so that the targets come out as the test expects.
func fakeResults(count int, headwayNs float64) *results {
	bms := append(bench.OverheadBenchmarks(), bench.ParseBenchmarks()...)
	res := newResults(bms)
	base := map[string]float64{"net-http": 1000, "headway": headwayNs, "go-retryablehttp": 1400, "failsafe-go": 2000, "resty": 4000}
	for i := range count {
		jitter := float64(i%3) * 10
		for _, bm := range bms {
			s := Sample{NsPerOp: 50 + jitter, BytesPerOp: 256, AllocsPerOp: 1}
			for peer, ns := range base {
				if strings.HasSuffix(bm.Name, "/"+peer) {
					s = Sample{NsPerOp: ns + jitter, BytesPerOp: ns + 500, AllocsPerOp: ns / 100}
				}
			}
			res.add(bm.Name, s, 1000)
		}
	}
	return res
}

func fakeEnv() Env {
	return Env{
		Date: time.Date(2026, 11, 26, 4, 31, 0, 0, time.UTC), GoVersion: "go1.26.0", OS: "linux", Arch: "amd64",
		CPU: `Fancy CPU <R> & "co"`, NumCPU: 2, GOMAXPROCS: 2, Headway: "abc123",
		Modules: map[string]string{"github.com/hashicorp/go-retryablehttp": "v0.7.8"},
		Count:   6, Benchtime: time.Second, Elapsed: time.Minute,
	}
}

// fakeSims returns simulation results: every goodput case with headway at
// headwaySlowdown (and 0.5% 429s) and the others worse, and the outage
// runs with headway at headwayAmp attempts per request.
func fakeSims(headwaySlowdown, headwayAmp float64) *bench.SimResults {
	s := &bench.SimResults{
		Goodput: map[string]bench.GoodputCell{}, Amplification: map[string]bench.AmplificationResult{}, Recovery: map[string]bench.RecoveryResult{},
		AmplificationRun: bench.DefaultAmplification, RecoveryRun: bench.DefaultRecovery, GoodputRuns: 5, Runs: 310,
	}
	for _, c := range bench.GoodputCases() {
		cell := bench.GoodputCell{Runs: 5, Attempts: 380, Throttled: 0.211, Failed: 3, Wall: 5500 * time.Millisecond, Ideal: 4650 * time.Millisecond, Slowdown: 1.18}
		if c.Peer.Name == "headway" {
			cell = bench.GoodputCell{Runs: 5, Attempts: 302, Throttled: 0.005, Wall: 4700 * time.Millisecond, Ideal: 4650 * time.Millisecond, Slowdown: headwaySlowdown}
		}
		s.Goodput[c.Name] = cell
	}
	for _, p := range bench.Peers() {
		attempts := 1000
		if p.Name == "headway" {
			attempts = int(200 * headwayAmp)
		}
		s.Amplification[p.Name] = bench.AmplificationResult{Requests: 200, Failed: 200, Attempts: attempts, Wall: 196 * time.Second}
		tl := make([]int, 60)
		for i := 20; i < 60; i++ {
			tl[i] = 80
		}
		s.Recovery[p.Name] = bench.RecoveryResult{OutageRequests: 16, OutageAttempts: 64, FirstSuccess: 5100 * time.Millisecond, Recovered: -1, Succeeded: 7000, Timeline: tl}
	}
	return s
}

// wellFormed checks that svg is well-formed SVG whose text holds every
// one of wants.
func wellFormed(t *testing.T, svg string, wants ...string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	var root string
	var texts []string
	depth := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				root = e.Name.Space + " " + e.Name.Local
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			texts = append(texts, string(e))
		}
	}
	if root != "http://www.w3.org/2000/svg svg" || depth != 0 {
		t.Errorf("root element %q, depth at end %d", root, depth)
	}
	all := strings.Join(texts, "\n")
	for _, want := range wants {
		if !strings.Contains(all, want) {
			t.Errorf("chart text lacks %q", want)
		}
	}
}

func TestSVGWellFormed(t *testing.T) {
	var b strings.Builder
	if err := writeSVG(&b, fakeResults(6, 1200), fakeEnv()); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, b.String(), "headway", "go-retryablehttp", `Fancy CPU <R> & "co"`, "ns/op", "allocs/op", "1210")

	b.Reset()
	if err := writeGoodputSVG(&b, fakeSims(1.02, 1.15), fakeEnv()); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, b.String(), "headway", "resty", "sliding-counter", "gcra", "1.02×", "0.5%", "1.25×", "5%")

	b.Reset()
	if err := writeOutageSVG(&b, fakeSims(1.02, 1.15), fakeEnv()); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, b.String(), "net/http", "headway", "1.15", "5.00", "first success 5.10s", "throughput back not within 20s", "30s")
}

func TestMarkdown(t *testing.T) {
	const met, missed = "met", "**missed**"
	for _, tc := range []struct {
		headwayNs          float64
		slowdown, amp      float64
		headers, none, out string   // goodput verdicts (every algorithm alike), outage's
		verdicts           []string // GET ns, PUT ns, GET allocs, PUT allocs, PUT bytes
	}{
		// added: headway +200, retryablehttp +400: GET met, PUT (≤ 200) met;
		// allocs +2 met; bytes +200 met. Goodput 1.02× and 0.5% 429s:
		// met; 1.15 attempts per request: met.
		{1200, 1.02, 1.15, met, met, met, []string{met, met, met, met, met}},
		// headway +300: GET met, PUT missed (> 200); allocs +3; bytes +300.
		// Goodput 1.10×: missed with headers (≤ 1.05×), met without
		// (≤ 1.25×); 1.3 attempts per request: missed.
		{1300, 1.10, 1.3, missed, met, missed, []string{met, missed, met, met, met}},
		// headway +1000: GET missed, PUT missed, allocs +10 missed, bytes
		// +1000 missed. Goodput 1.30×: missed both.
		{2000, 1.30, 1.15, missed, missed, met, []string{missed, missed, missed, missed, missed}},
	} {
		var want []string
		for range rlt.Algorithms() {
			want = append(want, tc.headers, tc.none)
		}
		want = append(append(want, tc.out), tc.verdicts...)
		var b strings.Builder
		if err := writeMarkdown(&b, fakeResults(6, tc.headwayNs), fakeSims(tc.slowdown, tc.amp), fakeEnv()); err != nil {
			t.Fatal(err)
		}
		md := b.String()
		for _, want := range []string{
			"cd bench && go run ./cmd/benchreport", "go1.26.0", "Fancy CPU", "commit abc123", "2026-11-26 04:31 UTC",
			"go-retryablehttp v0.7.8", "### GET", "### PUT with a 1 KiB body", "## Targets", "## Reading rate-limit headers",
			"benchmarks.svg", "| net/http (bare) | 1010 ± 1% |",
			"## Goodput against rate-limited APIs", "goodput.svg", "| gcra | none | 21.1% · 3 · 1.18× | 0.5% · 0 · ",
			"<details>", "| token-bucket/discord | 4.65s |", "## A total outage, and after it", "outage.svg",
			"| go-retryablehttp | 5.00 | 1000 | 200 | 196.0s |", "| 4.00 | 6/s | 5.10s | not within 20s | 0 |",
			"`retryablehttp.NewClient()`: its defaults",
		} {
			if !strings.Contains(md, want) {
				t.Errorf("headway %v ns: markdown lacks %q", tc.headwayNs, want)
			}
		}
		var got []string
		inTargets := false
		for _, line := range strings.Split(md, "\n") {
			switch {
			case strings.HasPrefix(line, "## "):
				inTargets = line == "## Targets"
			case inTargets && strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| target"):
				cells := strings.Split(strings.Trim(line, "| "), " | ")
				got = append(got, cells[len(cells)-1])
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("headway %v ns, %v×, %v attempts: verdicts %q, want %q", tc.headwayNs, tc.slowdown, tc.amp, got, want)
		}
	}
}

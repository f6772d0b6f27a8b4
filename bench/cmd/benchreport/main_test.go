package main

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/headway-go/headway/bench"
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

func TestSVGWellFormed(t *testing.T) {
	var b strings.Builder
	if err := writeSVG(&b, fakeResults(6, 1200), fakeEnv()); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(strings.NewReader(b.String()))
	var root string
	var texts []string
	depth := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b.String())
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
	for _, want := range []string{"headway", "go-retryablehttp", `Fancy CPU <R> & "co"`, "ns/op", "allocs/op", "1210"} {
		if !strings.Contains(all, want) {
			t.Errorf("chart text lacks %q", want)
		}
	}
}

func TestMarkdown(t *testing.T) {
	for _, tc := range []struct {
		headwayNs float64
		verdicts  []string // GET ns, PUT ns, GET allocs, PUT allocs, PUT bytes
	}{
		// added: headway +200, retryablehttp +400: GET met, PUT (≤ 200) met;
		// allocs +2 met; bytes +200 met.
		{1200, []string{"met", "met", "met", "met", "met"}},
		// headway +300: GET met, PUT missed (> 200); allocs +3; bytes +300.
		{1300, []string{"met", "**missed**", "met", "met", "met"}},
		// headway +1000: GET missed, PUT missed, allocs +10 missed, bytes +1000 missed.
		{2000, []string{"**missed**", "**missed**", "**missed**", "**missed**", "**missed**"}},
	} {
		var b strings.Builder
		if err := writeMarkdown(&b, fakeResults(6, tc.headwayNs), fakeEnv()); err != nil {
			t.Fatal(err)
		}
		md := b.String()
		for _, want := range []string{
			"cd bench && go run ./cmd/benchreport", "go1.26.0", "Fancy CPU", "commit abc123", "2026-11-26 04:31 UTC",
			"go-retryablehttp v0.7.8", "### GET", "### PUT with a 1 KiB body", "## Targets", "## Reading rate-limit headers",
			"benchmarks.svg", "| net/http (bare) | 1010 ± 1% |",
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
		if strings.Join(got, ",") != strings.Join(tc.verdicts, ",") {
			t.Errorf("headway %v ns: verdicts %q, want %q", tc.headwayNs, got, tc.verdicts)
		}
	}
}

package ratelimit

import (
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// parserHeads are responses a Parser sees in turn in the tests below: each
// twice in a row or more, so that it remembers their fields, and then
// again after others.
var parserHeads = []http.Header{
	hotHeader(),
	{"Ratelimit-Policy": {`"burst";q=100;w=1, "daily";q=1000;w=86400`}, "Ratelimit": {`"burst";r=50;t=1, "daily";r=900;t=3600`}},
	{"Ratelimit-Policy": {`100;w=60`}, "Ratelimit": {`limit=100, remaining=50, reset=5`}, "Date": {hdrDate}},
	{"Ratelimit-Policy": {`10;w=1, 50;w=60`}, "Ratelimit-Limit": {`10, 10;w=1, 50;w=60`}, "Ratelimit-Remaining": {"3"}, "Ratelimit-Reset": {"1"}},
	{"Beta-Ratelimit-Policy": {`"jira";q=100;w=60`}, "Beta-Ratelimit": {`"jira";r=10;t=5`}, "X-Ratelimit-Nearlimit": {"false"}},
	{"ratelimit-policy": {`"a";q=5;w=10`}, "RateLimit-Policy": {`"b";q=6;w=10`}, "Ratelimit": {`"a";r=1, "b";r=2`}},
	{"Ratelimit-Policy": {`"p";q=10;w=60;qu="tokens";pk=:YWJj:`}, "Ratelimit": {`"p";r=1;t=2;pk=:YWJj:`}, "Date": {"Wed, 25 Nov 2026 21:00:01 GMT"}},
	{"X-Ratelimit-Limit": {"60"}, "X-Ratelimit-Remaining": {"59"}, "X-Ratelimit-Reset": {"1795640460"}, "Date": {hdrDate}},
	{"Retry-After": {"Wed, 25 Nov 2026 21:00:30 GMT"}, "Date": {hdrDate}},
	{"Ratelimit-Policy": {`"default";q=1000;w=60`, `"extra";q=5`}, "Ratelimit": {`"default";r=1`}},
	{"Ratelimit-Policy": {strings.Repeat(`"x";q=1, `, 20) + `"y";q=2`}},
}

// TestParserMatchesParseHeaders: a Parser, which remembers the policy
// fields and dates it saw, gives what ParseHeaders gives, the first time a
// response comes and every time after.
func TestParserMatchesParseHeaders(t *testing.T) {
	var p Parser
	for round := range 3 {
		for i, h := range parserHeads {
			for rep := range 3 {
				want := ParseHeaders(h, 200, hdrNow)
				got := p.ParseHeaders(h, 200, hdrNow)
				require.Equal(t, want, got, "round %d, head %d, repeat %d", round, i, rep)
			}
		}
	}
	for _, v := range []string{hdrDate, hdrDate, "garbage", "garbage", "", "Wed, 25 Nov 2026 21:00:01 GMT"} {
		wt, wok := ParseDate(v)
		gt, gok := p.ParseDate(v)
		require.Equal(t, wok, gok, v)
		require.True(t, wt.Equal(gt), v)
		require.Equal(t, wt, gt, v)
	}
}

// TestParserConcurrent: goroutines sharing a Parser on different responses
// each get what ParseHeaders gives (run with -race).
func TestParserConcurrent(t *testing.T) {
	var p Parser
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				h := parserHeads[(g+i)%len(parserHeads)].Clone()
				if i%3 == 0 {
					h["Ratelimit-Policy"] = []string{`"g` + strconv.Itoa(g) + `";q=` + strconv.Itoa(i%7+1) + `;w=60`}
				}
				want := ParseHeaders(h, 429, hdrNow)
				if got := p.ParseHeaders(h, 429, hdrNow); !reflect.DeepEqual(want, got) {
					t.Errorf("goroutine %d, response %d: got %+v, want %+v", g, i, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestParserRemembersPolicyField: a RateLimit-Policy field that repeats is
// read once, and the response allocates no more than ParseHeaders'.
func TestParserRemembersPolicyField(t *testing.T) {
	var p Parser
	h := hotHeader()
	p.ParseHeaders(h, 200, hdrNow)
	p.ParseHeaders(h, 200, hdrNow)
	ps, ok := p.announcedBefore(h["Ratelimit-Policy"], DialectIETFDraft08)
	require.True(t, ok)
	require.Len(t, ps, 1)
	require.LessOrEqual(t, testing.AllocsPerRun(100, func() { _ = p.ParseHeaders(h, 200, hdrNow) }), 1.0)
	// Fields that change every time are never remembered, and cost no
	// allocation for it.
	fields := make([][]string, 200)
	for i := range fields {
		fields[i] = []string{fmt.Sprintf(`"default";q=%d;w=60`, 1000+i)}
	}
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		i++
		h["Ratelimit-Policy"] = fields[i]
		_ = p.ParseHeaders(h, 200, hdrNow)
	})
	require.LessOrEqual(t, allocs, 1.0) // the policies
}

// FuzzParserMatchesParseHeaders: whatever the headers, a Parser that has
// seen them (and others) before gives what ParseHeaders gives.
func FuzzParserMatchesParseHeaders(f *testing.F) {
	f.Add(uint8(0), `"burst";q=100;w=60`, uint8(1), `"burst";r=0;t=30`, uint8(2), "1795641630", hdrDate, uint8(0))
	f.Add(uint8(8), `"p";q=10;w=60`, uint8(16), `"x";r=1`, uint8(20), "10, 10;w=60", hdrDate, uint8(90))
	f.Add(uint8(10), `10, 10;w=1, 50;w=60`, uint8(11), "-3", uint8(12), "99999999999999", "", uint8(0))
	f.Add(uint8(19), `"jira";q=5`, uint8(18), `"jira";r=1`, uint8(140), "5, 5;w=9", "junk", uint8(3))
	var p Parser // shared across inputs, as a transport's is across responses
	f.Fuzz(func(t *testing.T, i1 uint8, v1 string, i2 uint8, v2 string, i3 uint8, v3, date string, repeat uint8) {
		h := http.Header{}
		if repeat > 1 && len(v1) < 64 {
			v1 = strings.Repeat(v1+", ", int(repeat)%12) + v1
		}
		for _, kv := range []struct {
			i uint8
			v string
		}{{i1, v1}, {i2, v2}, {i3, v3}} {
			name := fuzzFieldNames[int(kv.i)%len(fuzzFieldNames)]
			if kv.i >= 128 {
				name = strings.ToUpper(name)
			}
			h[name] = append(h[name], kv.v)
		}
		if date != "" {
			h["Date"] = []string{date}
		}
		want := ParseHeaders(h, 429, hdrNow)
		for range 3 { // read, seen twice (remembered), then read from memory
			if got := p.ParseHeaders(h, 429, hdrNow); !reflect.DeepEqual(want, got) {
				t.Fatalf("Parser: %+v\nParseHeaders: %+v", got, want)
			}
		}
		wt, wok := ParseDate(date)
		for range 3 {
			if gt, gok := p.ParseDate(date); gok != wok || gt != wt {
				t.Fatalf("Parser.ParseDate(%q) = %v, %v; ParseDate: %v, %v", date, gt, gok, wt, wok)
			}
		}
	})
}

// BenchmarkParserHot: the same through a Parser, which reads the repeated
// RateLimit-Policy field once.
func BenchmarkParserHot(b *testing.B) {
	b.Run("same", func(b *testing.B) {
		h := hotHeader()
		var p Parser
		b.ReportAllocs()
		for b.Loop() {
			if obs := p.ParseHeaders(h, 200, hdrNow); len(obs.Policies) != 1 {
				b.Fatal(obs)
			}
		}
	})
	b.Run("changing", func(b *testing.B) {
		hs := make([]http.Header, 1000)
		for i := range hs {
			hs[i] = hotHeader()
			r := strconv.Itoa(999 - i)
			hs[i]["Ratelimit"] = []string{`"default";r=` + r + `;t=30`}
			hs[i]["X-Ratelimit-Remaining"] = []string{r}
		}
		var p Parser
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if obs := p.ParseHeaders(hs[i%len(hs)], 200, hdrNow); len(obs.Policies) != 1 {
				b.Fatal(obs)
			}
			i++
		}
	})
}

package sim

import (
	"flag"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway"
	rlt "github.com/headway-go/headway/ratelimittest"
)

var (
	only = flag.String("sim.only", "", "run only the scenarios whose name contains this")
	rtt  = flag.Duration("sim.rtt", 20*time.Millisecond, "round-trip time of every exchange")
)

// dialectTable returns every algorithm x dialect at 50 per second, 300
// requests from 16 workers.
func dialectTable() []Scenario {
	var out []Scenario
	for _, alg := range rlt.Algorithms() {
		for _, d := range rlt.Dialects() {
			p := rlt.Quota{Algorithm: alg, Limit: 50, Window: time.Second}
			out = append(out, Scenario{Name: fmt.Sprintf("%s/%s", alg, d), Policy: p, Dialect: d, RTT: *rtt})
		}
	}
	return out
}

func runIn(t *testing.T, s Scenario) (r Result) {
	synctest.Test(t, func(t *testing.T) { r = Run(s) })
	return r
}

// TestTable prints (-v) the table of every algorithm and dialect at 50 per
// second, paced and with retries only (WithoutPacing): every dialect, where
// TestGrid takes one per header family. It asserts only that no paced
// request failed (beyond tableFailures); the targets are TestGrid's.
func TestTable(t *testing.T) {
	type row struct {
		name        string
		paced, bare Result
	}
	var rows []row
	for _, s := range dialectTable() {
		if *only != "" && !strings.Contains(s.Name, *only) {
			continue
		}
		b := s
		b.Options2 = []headway.Option{headway.WithoutPacing()}
		rows = append(rows, row{s.Name, runIn(t, s), runIn(t, b)})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	if testing.Verbose() {
		fmt.Printf("300 requests, 16 workers, limit 50/s, RTT %v\n", *rtt)
		fmt.Printf("%-32s %-48s | %s\n", "", "paced", "retries only (-no-pace)")
		fmt.Printf("%-32s %5s %5s %7s %6s %9s %9s %7s | %5s %7s %6s %7s\n", "algorithm/dialect",
			"sent", "429", "429%", "failed", "wall", "ideal", "x", "429", "429%", "failed", "x")
		for _, r := range rows {
			fmt.Printf("%-32s %s | %5d %6.1f%% %6d %6.2fx\n", r.name, r.paced, r.bare.Throttled, 100*r.bare.ThrottledShare(), r.bare.Failed, r.bare.Slowdown())
		}
	}
	for _, r := range rows {
		k, isKnown := tableFailures[r.name]
		switch {
		case r.paced.Failed > k.failed+int(math.Ceil(tolFailed*float64(k.failed))):
			t.Errorf("%s: %d paced requests failed (known: %d): %v", r.name, r.paced.Failed, k.failed, r.paced.Errors)
		case isKnown && r.paced.Failed == 0:
			t.Logf("%s: no paced request failed now: remove it from tableFailures", r.name)
		}
	}
}

// tableFailures are the rows of TestTable whose paced requests fail, at
// most how many (of 300), and why, as the grid's known; a run may fail
// tolFailed more. None fails now: the Shopify rows (used/capacity, no
// reset, no window), which failed 200 of 300 requests from 26ccd02 on,
// fail none now, at 6.0-7.9x the ideal (0f450e5 and after; when that
// changed was not traced), and since a 429's Retry-After bounds a window's
// end that nothing placed (c772e5e), 2.7-3.2x on a window or a log and
// 1.00x on a counter.
var tableFailures = map[string]struct {
	failed int
	why    string
}{}

var trace = flag.String("sim.trace", "", "print every exchange of the scenario with this name")

// TestTrace prints, for -sim.trace NAME, what the server saw in one run: a
// scenario of TestTable, TestScenarios or a cell of TestGrid.
func TestTrace(t *testing.T) {
	if *trace == "" {
		t.Skip("-sim.trace not set")
	}
	all := append(dialectTable(), scenarios()...)
	for _, c := range gridCells() {
		all = append(all, c.s)
	}
	for _, s := range all {
		if s.Name != *trace {
			continue
		}
		s.Trace = func(at time.Duration, status int, h http.Header) {
			var hs []string
			for k, v := range h {
				if k != "Content-Type" && k != "X-Content-Type-Options" {
					hs = append(hs, k+": "+strings.Join(v, ","))
				}
			}
			sort.Strings(hs)
			fmt.Printf("%8.3fs %d %s\n", at.Seconds(), status, strings.Join(hs, " | "))
		}
		s.Options2 = append(s.Options2, headway.WithOnWait(func(e headway.WaitEvent) {
			fmt.Printf("          wait %v definite=%v %s\n", e.Wait, e.Definite, e.Reason)
		}))
		r := runIn(t, s)
		fmt.Println(r)
	}
}

// scenarios are the quirks of real servers and the workloads of the issue,
// beside the grid.
func scenarios() []Scenario {
	p := func(alg rlt.Algorithm) rlt.Quota { return rlt.Quota{Algorithm: alg, Limit: 50, Window: time.Second} }
	anchored := p(rlt.FixedWindow)
	anchored.Anchor = rlt.AnchorFirstRequest
	return []Scenario{
		{Name: "quirk: Retry-After is the whole window (httprate), sliding-counter/x-ratelimit", Policy: p(rlt.SlidingCounter), Dialect: rlt.XRateLimit, Options: []rlt.Option{rlt.WithRetryAfterFullWindow()}},
		{Name: "quirk: Retry-After is the whole window, fixed-window/ietf", Policy: p(rlt.FixedWindow), Dialect: rlt.IETF, Options: []rlt.Option{rlt.WithRetryAfterFullWindow()}},
		{Name: "quirk: windows from the first request, fixed-window/ietf", Policy: anchored, Dialect: rlt.IETF},
		{Name: "quirk: windows from the first request, fixed-window/x-ratelimit", Policy: anchored, Dialect: rlt.XRateLimit},
		{Name: "quirk: coarse resets on a fast GCRA, gcra/openai", Policy: p(rlt.GCRA), Dialect: rlt.OpenAI, Options: []rlt.Option{rlt.WithCoarseResets()}},
		{Name: "quirk: coarse resets on a fast GCRA, gcra/discord", Policy: p(rlt.GCRA), Dialect: rlt.Discord, Options: []rlt.Option{rlt.WithCoarseResets()}},
		{Name: "quirk: reset always 1, fixed-window/ietf", Policy: p(rlt.FixedWindow), Dialect: rlt.IETF, Options: []rlt.Option{rlt.WithResetAlwaysOne()}},
		{Name: "quirk: reset always 1, token-bucket/x-ratelimit", Policy: p(rlt.TokenBucket), Dialect: rlt.XRateLimit, Options: []rlt.Option{rlt.WithResetAlwaysOne()}},
		{Name: "quirk: Retry-After as a date, fixed-window/github", Policy: p(rlt.FixedWindow), Dialect: rlt.GitHub, Options: []rlt.Option{rlt.WithRetryAfter(rlt.RetryAfterDate)}},
		{Name: "quirk: no headers, no Retry-After, fixed-window", Policy: p(rlt.FixedWindow), Dialect: rlt.None, Options: []rlt.Option{rlt.WithRetryAfter(rlt.RetryAfterNone)}},
		{Name: "quirk: no headers, no Retry-After, windows from the first request", Policy: anchored, Dialect: rlt.None, Options: []rlt.Option{rlt.WithRetryAfter(rlt.RetryAfterNone)}},
		{Name: "quirk: no headers, no Retry-After, token-bucket", Policy: p(rlt.TokenBucket), Dialect: rlt.None, Options: []rlt.Option{rlt.WithRetryAfter(rlt.RetryAfterNone)}},
		{Name: "quirk: no headers, no Retry-After, sliding-log", Policy: p(rlt.SlidingLog), Dialect: rlt.None, Options: []rlt.Option{rlt.WithRetryAfter(rlt.RetryAfterNone)}},
		{Name: "ample quota: 300 requests into 100000/s, ietf", Policy: rlt.Quota{Limit: 100000, Window: time.Second}, Dialect: rlt.IETF},
		{Name: "two processes, one quota, separate stores, fixed-window/ietf", Policy: p(rlt.FixedWindow), Dialect: rlt.IETF, Processes: 2, Workers: 8},
		{Name: "two processes, one quota, separate stores, token-bucket/x-ratelimit", Policy: p(rlt.TokenBucket), Dialect: rlt.XRateLimit, Processes: 2, Workers: 8},
		{Name: "two processes, one quota, shared store, fixed-window/ietf", Policy: p(rlt.FixedWindow), Dialect: rlt.IETF, Processes: 2, Workers: 8, SharedStore: true},
		{Name: "1000 goroutines, one request each, 60s timeout, fixed-window/ietf", Policy: p(rlt.FixedWindow), Dialect: rlt.IETF, Requests: 1000, Workers: 1000},
		{Name: "1000 goroutines, one request each, 60s timeout, token-bucket/x-ratelimit", Policy: p(rlt.TokenBucket), Dialect: rlt.XRateLimit, Requests: 1000, Workers: 1000},
		{Name: "1000 goroutines, one request each, 60s timeout, gcra/none", Policy: p(rlt.GCRA), Dialect: rlt.None, Requests: 1000, Workers: 1000},
	}
}

// mayFail is how many paced requests of a scenario may fail: none, but
// for two processes that share a quota without sharing what they know.
// One of them, paused by a 429's Retry-After, comes back with one request
// first, which lands among the other's, paced to the same refill or
// window start: now and then it loses that race four times in a row and
// runs out of attempts (1 request in about 270 runs with a token bucket,
// in about 750 with a fixed window; never two, in 3,000 runs of each). No
// client can be fair to another it does not hear from; a shared store
// (the scenario after them) is the cure.
func mayFail(scenario string) int {
	if strings.HasPrefix(scenario, "two processes, one quota, separate stores") {
		return 1
	}
	return 0
}

// TestScenarios prints (-v) the quirks and workloads table, paced and with
// retries only, and asserts that no paced request failed (beyond what
// mayFail allows).
func TestScenarios(t *testing.T) {
	var lines []string
	for _, s := range scenarios() {
		if *only != "" && !strings.Contains(s.Name, *only) {
			continue
		}
		s.RTT = *rtt
		paced := runIn(t, s)
		b := s
		b.Options2 = []headway.Option{headway.WithoutPacing()}
		bare := runIn(t, b)
		lines = append(lines, fmt.Sprintf("%-72s %s | %5d %6.1f%% %6d %6.2fx", s.Name, paced, bare.Throttled, 100*bare.ThrottledShare(), bare.Failed, bare.Slowdown()))
		if paced.Failed > mayFail(s.Name) {
			t.Errorf("%s: %d paced requests failed: %v", s.Name, paced.Failed, paced.Errors)
		}
	}
	if testing.Verbose() {
		fmt.Printf("%-72s %5s %5s %7s %6s %9s %9s %7s | %5s %7s %6s %7s\n", "scenario (paced | retries only)",
			"sent", "429", "429%", "failed", "wall", "ideal", "x", "429", "429%", "failed", "x")
		for _, l := range lines {
			fmt.Println(l)
		}
	}
}

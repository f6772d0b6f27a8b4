package sim

// The grid of the pacing targets (issue 17, "Done when"): every cell is a
// Scenario run in virtual time and asserted against its target, or against
// what known (known_test.go) says it reaches.

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway"
	rlt "github.com/headway-go/headway/ratelimittest"
)

var (
	gridMode  = flag.String("sim.grid", "default", "the cells TestGrid runs: default (a representative subset) or full")
	gridTable = flag.String("sim.table", "", "write the markdown table of the cells TestGrid ran to this file")
	gridSeed  = flag.Uint64("sim.seed", 0, "salt every cell's seed with this (0: each cell's own, for which known lists its figures); "+
		"with a salt TestGrid logs the targets and known figures missed instead of failing, so that two builds can be compared over several seeds")
)

// gridAlg is an algorithm of the grid: ratelimittest's six, and the fixed
// window anchored at a client's first request as a seventh.
type gridAlg struct {
	name   string
	alg    rlt.Algorithm
	anchor rlt.Anchor
}

func gridAlgs() []gridAlg {
	var out []gridAlg
	for _, a := range rlt.Algorithms() {
		out = append(out, gridAlg{name: string(a), alg: a})
		if a == rlt.FixedWindow {
			out = append(out, gridAlg{"anchored-window", a, rlt.AnchorFirstRequest})
		}
	}
	return out
}

func (a gridAlg) policy(limit int, window time.Duration) rlt.Quota {
	return rlt.Quota{Algorithm: a.alg, Anchor: a.anchor, Limit: limit, Window: window}
}

// family is what the answers say: a header dialect, and the Retry-After of a
// refusal.
type family struct {
	name       string
	dialect    rlt.Dialect
	retryAfter rlt.RetryAfterForm
	headers    bool // the answers carry rate-limit headers
}

var families = []family{
	{"ietf", rlt.IETF, rlt.RetryAfterSeconds, true},              // delays (t=)
	{"x-ratelimit", rlt.XRateLimit, rlt.RetryAfterSeconds, true}, // Unix-second resets
	{"anthropic", rlt.Anthropic, rlt.RetryAfterSeconds, true},    // RFC 3339 dates
	{"none+retry-after", rlt.None, rlt.RetryAfterSeconds, false},
	{"none", rlt.None, rlt.RetryAfterNone, false},
}

// point is an operating point: a limit per window, and requests enough that
// a run crosses several windows (or refills) and a single refusal is at most
// 1% of the attempts.
type point struct {
	name     string
	limit    int
	window   time.Duration
	requests int
}

var points = []point{
	{"5ps", 5, time.Second, 100},        // 20 windows
	{"50ps", 50, time.Second, 300},      // 6 windows
	{"1000ps", 1000, time.Second, 6000}, // 6 windows
	{"100pm", 100, time.Minute, 600},    // 6 windows
	{"5000ph", 5000, time.Hour, 15000},  // 3 windows (3 hours): CPU stays sane
}

// The grid's round trips: 20 ms unless a variation says, each drawn within
// +/-50%.
const (
	gridRTT    = 20 * time.Millisecond
	gridJitter = 0.5
)

// gridLag is the lag variation's mean one-sided delay on the way out
// (Scenario.Lag): half the round trip, as a request that opens a
// connection, or waits for a loaded client's scheduler or a shared
// store, spends before it leaves.
const gridLag = 10 * time.Millisecond

// cell is one run of the grid and its target.
type cell struct {
	name  string
	group string // the section of the table
	s     Scenario

	// Its coordinates: the names of its algorithm, header family,
	// operating point, and variation ("" for none).
	alg, family, point, variation string

	headers bool // the answers carry rate-limit headers
	shared  bool // a client headway does not see shares the quota
	subset  bool // in the default run
}

// target is what a cell must reach: at most refused of its attempts
// refused, and a wall time at most x times the ideal (0: no wall target).
type target struct{ refused, x float64 }

// The targets.
var (
	targetHeaders   = target{0.01, 1.05}
	targetNoHeaders = target{0.02, 1.15}
	targetShared    = target{0.02, 0}
)

func (c cell) target() target {
	switch {
	case c.shared:
		return targetShared
	case c.headers:
		return targetHeaders
	}
	return targetNoHeaders
}

func (t target) String() string {
	if t.x == 0 {
		return fmt.Sprintf("<=%g%%", 100*t.refused)
	}
	return fmt.Sprintf("<=%g%%, <=%.2fx", 100*t.refused, t.x)
}

// met reports whether r reaches t, with no request failed.
func (t target) met(r Result) bool {
	return r.Failed == 0 && r.ThrottledShare() <= t.refused && (t.x == 0 || r.Slowdown() <= t.x)
}

// newCell builds the cell of a on f at pt, over round trips of rtt from
// workers workers, in the variation named variation; suffix names what edit
// changes.
func newCell(group, variation string, a gridAlg, f family, pt point, rtt time.Duration, workers int, suffix string, edit func(*Scenario)) cell {
	name := fmt.Sprintf("%s/%s/%s/rtt%d±%d%%/w%d%s", a.name, f.name, pt.name, rtt.Milliseconds(), int(100*gridJitter), workers, suffix)
	s := Scenario{
		Name:     name,
		Policy:   a.policy(pt.limit, pt.window),
		Dialect:  f.dialect,
		Options:  []rlt.Option{rlt.WithRetryAfter(f.retryAfter)},
		Requests: pt.requests,
		Workers:  workers,
		RTT:      rtt,
		Jitter:   gridJitter,
		Seed:     seedOf(name),
	}
	if edit != nil {
		edit(&s)
	}
	patient(&s)
	return cell{name: name, group: group, alg: a.name, family: f.name, point: pt.name, variation: variation,
		s: s, headers: f.headers, shared: s.Foreign > 0}
}

// patient gives the requests of a scenario with windows of 30 s or more the
// time those take, as a user of such an API configures it: a request may
// wait up to a window before it is sent, and a Retry-After may ask for a
// whole window, past headway's default bounds (DefaultMaxWait, a minute).
func patient(s *Scenario) {
	w := s.Policy.Window
	for _, p := range s.Policies {
		w = max(w, p.Window)
	}
	if w >= 30*time.Second {
		s.Timeout = 4 * w
		s.Options2 = append(s.Options2, headway.WithMaxWait(2*w))
	}
}

// seedOf gives each cell its own seed, the same in every run, salted by
// -sim.seed when it is not 0.
//
// The cells without headers are chaotic: a change to how a key's window on
// requests in flight grows moved 138 of them (34 beyond known's
// tolerances) while, over five other seeds, their refusals moved by 1% and
// their walls by 1%. Such a change is judged by the grid's figures summed
// over several salts, in both builds (-sim.seed 1, 2, ... with -sim.table),
// rather than by known alone.
func seedOf(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	if *gridSeed != 0 {
		fmt.Fprintf(h, "/%d", *gridSeed)
	}
	return h.Sum64()
}

func withOptions(opts ...rlt.Option) func(*Scenario) {
	return func(s *Scenario) { s.Options = append(s.Options, opts...) }
}

// gridCells returns every cell of the grid, the default subset marked. The
// subset has at least one cell per algorithm, header family, operating
// point and variation: every algorithm x family at 5/s and 50/s (cheap),
// one cell per family at each other point, the variations, bursts and
// fast servers on a diagonal, and a few of the stacked policies and shared
// quotas.
func gridCells() []cell {
	var cells []cell
	algs := gridAlgs()
	at50 := points[1]
	for pi, pt := range points {
		for ai, a := range algs {
			for fi, f := range families {
				c := newCell("Algorithms x header families x operating points", "", a, f, pt, gridRTT, 16, "", nil)
				c.subset = pi < 2 || ai == (fi+2*pi)%len(algs) && fi == pi%len(families)
				cells = append(cells, c)
			}
		}
	}
	variations := []struct {
		name, suffix string
		rtt          time.Duration
		workers      int
		edit         func(*Scenario)
	}{
		{"rtt1", "", time.Millisecond, 16, nil},
		{"rtt200", "", 200 * time.Millisecond, 16, nil},
		{"w1", "", gridRTT, 1, nil},
		{"w256", "", gridRTT, 256, nil},
		{"skew+3s", "/skew+3s", gridRTT, 16, withOptions(rlt.WithDateSkew(3 * time.Second))},
		{"skew-3s", "/skew-3s", gridRTT, 16, withOptions(rlt.WithDateSkew(-3 * time.Second))},
		{"charge-refused", "/charge-refused", gridRTT, 16, withOptions(rlt.WithChargeRefused())},
		{"lag10ms", "/lag10ms", gridRTT, 16, func(s *Scenario) { s.Lag = gridLag }},
	}
	for vi, v := range variations {
		for ai, a := range algs {
			for fi, f := range families {
				c := newCell("Variations at 50/s", v.name, a, f, at50, v.rtt, v.workers, v.suffix, v.edit)
				c.subset = ai == vi%len(algs) && (fi == vi%len(families) || fi == (vi+2)%len(families)) ||
					v.name == "lag10ms" && a.name == "anchored-window" && f.name == "anthropic" // its window's end, from a lagged first unit
				cells = append(cells, c)
			}
		}
	}
	for _, a := range algs {
		if a.alg != rlt.TokenBucket && a.alg != rlt.GCRA {
			continue
		}
		for burst := 1; burst <= 6; burst++ {
			for fi, f := range families {
				c := newCell("Small bursts at 50/s", "burst", a, f, at50, gridRTT, 16, fmt.Sprintf("/burst%d", burst),
					func(s *Scenario) { s.Policy.Burst = burst })
				c.subset = (a.alg == rlt.TokenBucket && burst == 6 && fi == 1) || (a.alg == rlt.GCRA && burst == 2 && fi == 0)
				cells = append(cells, c)
			}
		}
	}
	// Servers of 200/s and 1000/s with a client able to outrun them (16
	// workers on round trips of a millisecond, as on loopback; at 20 ms the
	// 1000/s point is the client's own pace): a silent candidate of half
	// such a server's rate holds each request back a few milliseconds only
	// (pace's silent.disagree).
	for pi, pt := range []point{{"200ps", 200, time.Second, 1200}, points[2]} {
		for ai, a := range algs {
			for fi, f := range families {
				c := newCell("Fast servers, the client able to outrun them", "fast", a, f, pt, time.Millisecond, 16, "", nil)
				c.subset = ai == (3*fi+pi)%len(algs) && fi >= 3
				cells = append(cells, c)
			}
		}
	}
	// Windows shorter than the second that whole-second resets are
	// rounded to (go-chi/httprate's, sethvargo/go-limiter's intervals):
	// several of them end under one reset, which says only that the
	// quota returns within a second. At 5 per 100 ms the 16 workers are
	// admitted more within a second than a window of one allows; at 10
	// per 200 ms each window's quota goes in one burst, and nothing but
	// a unit held back shows the window shorter (pace's reserveShort).
	// Some round those resets down (WithFloorResets): the reset then
	// names the Date's own second.
	for pi, sub := range []point{{"5p100ms", 5, 100 * time.Millisecond, 300}, {"10p200ms", 10, 200 * time.Millisecond, 300}} {
		for ai, a := range algs {
			for fi, f := range families {
				c := newCell("Windows shorter than a second", "subsecond", a, f, sub, gridRTT, 16, "", nil)
				c.subset = pi == 0 && ai == (2*fi+1)%len(algs) && fi < 3
				cells = append(cells, c)
				if f.dialect == rlt.XRateLimit || f.dialect == rlt.Anthropic {
					c := newCell("Windows shorter than a second", "subsecond", a, f, sub, gridRTT, 16, "/floor-resets", withOptions(rlt.WithFloorResets()))
					c.subset = pi == 0 && ai == fi || pi == 1 && ai == fi-1
					cells = append(cells, c)
				}
			}
		}
	}
	// sethvargo/go-limiter's windows, as it writes them: fixed, following
	// on from a key's first request (AnchorStart), resets and a refusal's
	// Retry-After dates rounded down to the second (WithFloorResets); on
	// round trips of a millisecond (loopback) and of 20 ms. The emulator
	// gives go-limiter's own loopback figures at these points (2 per 200
	// ms: 31% refused and a request or two failed, as 24-35% and one).
	goLimiter := gridAlg{"go-limiter-window", rlt.FixedWindow, rlt.AnchorStart}
	for _, pt := range []point{
		{"1p100ms", 1, 100 * time.Millisecond, 300}, {"2p100ms", 2, 100 * time.Millisecond, 100},
		{"2p200ms", 2, 200 * time.Millisecond, 100}, {"3p300ms", 3, 300 * time.Millisecond, 100},
		{"10p200ms", 10, 200 * time.Millisecond, 300},
	} {
		for _, rtt := range []time.Duration{time.Millisecond, gridRTT} {
			c := newCell("sethvargo/go-limiter's windows", "go-limiter", goLimiter, families[1], pt, rtt, 16, "/floor-resets",
				withOptions(rlt.WithFloorResets(), rlt.WithRetryAfter(rlt.RetryAfterDate)))
			c.subset = pt.name == "2p200ms" && rtt == time.Millisecond
			cells = append(cells, c)
		}
	}
	// go-chi/httprate's sliding counter, as it writes it: windows from
	// the limiter's start (AnchorFirstRequest), the weighted count rounded
	// to the nearest unit (WithRoundedCounts), X-RateLimit resets at the
	// current window's end (WithWindowEndResets), in Unix seconds rounded
	// down (WithFloorResets), a refusal's Retry-After the whole window in
	// seconds rounded down, 0 under a second (WithRetryAfterFullWindow,
	// WithTruncatedRetryAfter); on round trips of a millisecond (loopback)
	// and of 20 ms.
	httprate := gridAlg{"httprate-counter", rlt.SlidingCounter, rlt.AnchorFirstRequest}
	for _, pt := range []point{
		{"2ps", 2, time.Second, 60}, {"5ps", 5, time.Second, 100}, {"50ps", 50, time.Second, 300},
		{"1p100ms", 1, 100 * time.Millisecond, 100}, {"3p300ms", 3, 300 * time.Millisecond, 60},
	} {
		for _, rtt := range []time.Duration{time.Millisecond, gridRTT} {
			c := newCell("go-chi/httprate's counter", "httprate", httprate, families[1], pt, rtt, 16, "/floor-resets",
				withOptions(rlt.WithFloorResets(), rlt.WithRoundedCounts(), rlt.WithWindowEndResets(),
					rlt.WithRetryAfterFullWindow(), rlt.WithTruncatedRetryAfter()))
			c.subset = pt.name == "5ps" && rtt == time.Millisecond
			cells = append(cells, c)
		}
		// The same on loopback with the run started 870 ms into a
		// second instead of 370: httprate's windows start when the
		// limiter does, so where the server's seconds fall in them
		// varies from run to run, and at some phases the pacing is
		// trapped (see whyHTTPRatePhase).
		c := newCell("go-chi/httprate's counter", "httprate", httprate, families[1], pt, time.Millisecond, 16, "/floor-resets/phase870ms",
			withOptions(rlt.WithFloorResets(), rlt.WithRoundedCounts(), rlt.WithWindowEndResets(),
				rlt.WithRetryAfterFullWindow(), rlt.WithTruncatedRetryAfter()))
		c.s.Phase = 870 * time.Millisecond
		cells = append(cells, c)
	}
	pairs := []struct {
		pt   point // names the pair; its limit and window are the tighter policy's
		more rlt.Quota
	}{
		{point{"50ps+600pm", 50, time.Second, 1800}, rlt.Quota{Limit: 600, Window: time.Minute}},
		{point{"10ps+100p10s", 10, time.Second, 600}, rlt.Quota{Limit: 100, Window: 10 * time.Second}},
	}
	for pi, pair := range pairs {
		for _, a := range algs {
			if !slices.Contains([]string{"fixed-window", "sliding-log", "token-bucket", "gcra"}, a.name) {
				continue
			}
			for fi, f := range families {
				if !f.headers {
					continue
				}
				c := newCell("Two policies, the 2xx answers describing only the looser", "misleading", a, f, pair.pt, gridRTT, 16, "/misleading",
					func(s *Scenario) {
						s.Policies = []rlt.Quota{a.policy(pair.more.Limit, pair.more.Window)}
						s.Options = append(s.Options, rlt.WithMisleadingHeaders())
					})
				// The 10/s pair only: the other takes 1,800 requests.
				c.subset = pi == 1 && ((a.name == "fixed-window" && fi == 1) || (a.name == "gcra" && fi == 0))
				cells = append(cells, c)
			}
		}
	}
	for ai, a := range algs {
		for fi, f := range families {
			c := newCell("A quota shared with an unseen client sending 30% of the limit", "foreign", a, f, at50, gridRTT, 16, "/foreign30%",
				func(s *Scenario) { s.Foreign = 0.3 })
			c.subset = ai == 3*fi%len(algs) && fi%2 == 0
			cells = append(cells, c)
		}
	}
	// Slow servers that send no rate-limit headers, as x/time/rate
	// middlewares (labstack/echo's) configured at a request or two a
	// second are: the silent model's first burst and its search among the
	// candidates cost a fixed number of refusals, which a run at such a
	// pace cannot spread thin. The emulator's figures here match echo's
	// own limiter on loopback (1/s burst 1: 16 of 46 refused, 1.6-1.7x;
	// 2/s burst 2: 13 of 73, 1.2x).
	for _, pt := range []point{{"1ps", 1, time.Second, 30}, {"2ps", 2, time.Second, 60}} {
		for _, a := range algs {
			for _, f := range families {
				if f.headers {
					continue
				}
				c := newCell("Slow servers without headers", "slow-silent", a, f, pt, gridRTT, 16, "", nil)
				c.subset = pt.name == "1ps" && a.alg == rlt.TokenBucket && f.name == "none"
				cells = append(cells, c)
			}
		}
	}
	return cells
}

// knownCell is what a cell that misses its target reaches (the worst of
// several runs of the full grid), and why.
type knownCell struct {
	refused float64 // share of attempts refused
	x       float64 // wall over ideal
	failed  int
	why     string
}

// The tolerances of known: a run may be this much worse than the figures
// listed and still pass. Runs can vary: goroutines that wake at the same
// virtual instant run in the scheduler's order, and the round trips' jitter
// is drawn in that order. In practice they are nearly repeatable: of five
// runs of the full grid (GOMAXPROCS 1, 2, 2, 2, 4) one cell differed, by
// 0.04 points of refusals and one failed request of four, and another five
// agreed on every figure; the figures listed are the worst of such runs.
// The margins are several times that spread, and well below what a real
// regression moves (a refusal per window, a tenth of the ideal).
const (
	tolRefused = 0.005 // half a percentage point of the attempts, plus one attempt
	tolX       = 0.03  // 3% of the figure listed
	tolFailed  = 0.10  // a tenth of the failures listed, rounded up (none when none are)
)

// worse reports whether r is worse than k beyond the tolerances, for a cell
// whose target is tg.
func (k knownCell) worse(r Result, tg target) bool {
	refused := max(k.refused, tg.refused) + tolRefused
	if r.Attempts > 0 {
		refused += 1 / float64(r.Attempts)
	}
	failed := k.failed + int(math.Ceil(tolFailed*float64(k.failed)))
	return r.ThrottledShare() > refused ||
		(tg.x > 0 && r.Slowdown() > max(k.x, tg.x)*(1+tolX)) ||
		r.Failed > failed
}

// The default subset has a cell of every algorithm, header family,
// operating point and variation (the pairs of policies are a variation, not
// operating points), and the grid its size.
func TestGridSubset(t *testing.T) {
	all := gridCells()
	want := map[string]map[string]bool{"alg": {}, "family": {}, "point": {}, "variation": {}}
	got := map[string]map[string]bool{"alg": {}, "family": {}, "point": {}, "variation": {}}
	subset := 0
	for _, pt := range points {
		want["point"][pt.name] = true
	}
	for _, c := range all {
		for axis, v := range map[string]string{"alg": c.alg, "family": c.family, "point": c.point, "variation": c.variation} {
			if axis != "point" {
				want[axis][v] = true
			}
			if c.subset && (axis != "point" || want["point"][v]) {
				got[axis][v] = true
			}
		}
		if c.subset {
			subset++
		}
	}
	require.Equal(t, want, got)
	require.Len(t, want["alg"], 9, "the 7 algorithms, go-limiter's windows and httprate's counter")
	require.Len(t, want["family"], 5)
	require.Len(t, want["variation"], 17, "none, rtt1, rtt200, w1, w256, skew+3s, skew-3s, charge-refused, lag10ms, burst, fast, subsecond, go-limiter, httprate, misleading, foreign, slow-silent")
	require.Len(t, all, 7*5*5+8*7*5+2*6*5+2*7*5+2*7*7+5*2+5*3+2*4*3+7*5+2*7*2)
	t.Logf("%d cells, %d in the default subset", len(all), subset)
}

// TestSeedOf: a cell's seed is its own, the same in every run, and
// -sim.seed salts every one of them.
func TestSeedOf(t *testing.T) {
	defer func(salt uint64) { *gridSeed = salt }(*gridSeed)
	*gridSeed = 0
	a, b := seedOf("token-bucket/ietf/50ps/rtt20±50%/w16"), seedOf("gcra/ietf/50ps/rtt20±50%/w16")
	require.NotEqual(t, a, b)
	require.Equal(t, a, seedOf("token-bucket/ietf/50ps/rtt20±50%/w16"))
	*gridSeed = 1
	a1 := seedOf("token-bucket/ietf/50ps/rtt20±50%/w16")
	require.NotEqual(t, a, a1)
	*gridSeed = 2
	require.NotEqual(t, a1, seedOf("token-bucket/ietf/50ps/rtt20±50%/w16"))
}

// TestGrid runs the grid (the default subset, or every cell with
// -sim.grid=full) and asserts each cell's target: with headers at most 1%
// of the attempts refused and a wall time at most 1.05x the ideal, without
// headers 2% and 1.15x, on a quota shared with a client headway does not see
// 2% (no wall target), and no request failed anywhere. A cell listed in
// known must not do worse than listed (beyond tolRefused, tolX and
// tolFailed); one that now meets its target is reported, so that its entry
// can go.
// -sim.table FILE writes the table of the cells run; -sim.only NAME runs the
// cells whose name contains NAME; -sim.seed N runs every cell on another
// seed (see seedOf), and only reports what it misses.
func TestGrid(t *testing.T) {
	if raceEnabled {
		t.Skip("the grid costs many times its CPU under the race detector; .ci/run runs it without -race")
	}
	if *gridMode != "default" && *gridMode != "full" {
		t.Fatalf("-sim.grid=%s: want default or full", *gridMode)
	}
	all := gridCells()
	names := map[string]bool{}
	for _, c := range all {
		if names[c.name] {
			t.Fatalf("two cells named %s", c.name)
		}
		names[c.name] = true
	}
	for name := range known {
		if !names[name] {
			t.Errorf("known lists %s, which is no cell of the grid", name)
		}
	}
	var (
		mu      sync.Mutex
		results = map[string]Result{}
		ran     []cell
	)
	t.Run("cells", func(t *testing.T) {
		for _, c := range all {
			if (*gridMode != "full" && !c.subset) || (*only != "" && !strings.Contains(c.name, *only)) {
				continue
			}
			ran = append(ran, c)
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				r := runIn(t, c.s)
				mu.Lock()
				results[c.name] = r
				mu.Unlock()
				checkCell(t, c, r)
			})
		}
	})
	if *gridTable != "" {
		if err := os.WriteFile(*gridTable, []byte(gridMarkdown(ran, results)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkCell asserts c's target on r, or that r is no worse than known says.
func checkCell(t *testing.T, c cell, r Result) {
	t.Helper()
	tg := c.target()
	share, x := r.ThrottledShare(), r.Slowdown()
	t.Logf("%s (target %s; foreign %d, %d refused)", r, tg, r.ForeignAttempts, r.ForeignThrottled)
	k, isKnown := known[c.name]
	fail := t.Errorf
	if *gridSeed != 0 {
		fail = t.Logf // known's figures are for the cells' own seeds
	}
	switch {
	case tg.met(r) && isKnown:
		t.Logf("%s meets its target now (%.1f%% refused, %.2fx): remove it from known", c.name, 100*share, x)
	case tg.met(r):
	case !isKnown:
		fail("%s misses its target %s: %.1f%% refused, %.2fx, %d failed%s", c.name, tg, 100*share, x, r.Failed, firstError(r))
	case k.worse(r, tg):
		fail("%s is worse than known (%.1f%% refused, %.2fx, %d failed; %s): %.1f%% refused, %.2fx, %d failed%s",
			c.name, 100*k.refused, k.x, k.failed, k.why, 100*share, x, r.Failed, firstError(r))
	}
}

// firstError is one of r's failures, to say what they look like.
func firstError(r Result) string {
	if len(r.Errors) == 0 {
		return ""
	}
	msgs := make([]string, 0, len(r.Errors))
	for m := range r.Errors {
		msgs = append(msgs, m)
	}
	slices.Sort(msgs)
	return fmt.Sprintf(" (%d kinds, such as %q)", len(msgs), msgs[0])
}

// gridMarkdown is the table of the cells run, by section.
func gridMarkdown(cells []cell, results map[string]Result) string {
	var b strings.Builder
	b.WriteString(`# The pacing grid (internal/testkit/sim)

Generated by

    go test ./internal/testkit/sim -run TestGrid -sim.grid=full -sim.table=../../../docs/SIMULATION.md

Every cell is one run of headway against a ratelimittest server in virtual time (testing/synctest): the
algorithm, the header family (IETF ` + "`t=`" + ` delays; X-RateLimit's Unix-second resets; Anthropic's RFC 3339 dates;
no headers with Retry-After; no headers and no Retry-After), the operating point (5/s, 50/s, 1000/s, 100 per
minute, 5000 per hour; 200/s among the fast servers; 5 per 100 ms and 10 per 200 ms among the windows shorter than a second, whose
resets, rounded to the second, are rounded down in the floor-resets cells), round trips of 1, 20 or 200 ms each drawn within +/-50%, and 16 workers unless the cell
says; the lag10ms cells hold each request on its way out for a further delay drawn from an exponential
distribution of mean 10 ms (one-sided, as a new connection or a loaded client delays it; the oracle has none).
The run starts 370 ms into a second, so that windows are not aligned with it. Cells with windows of 30 s
or more give each request 4 windows and ` + "`WithMaxWait`" + ` 2 windows, as a user of such an API would.

**The oracle (ideal).** As many ideal workers as the run has, each sending its next request when the answer to
its previous one is back over the mean round trip; each request reaches the server at the first nanosecond the
server would admit it (asked with ` + "`ratelimittest.Handler.Fits`" + `, which spends nothing, so the oracle is never
refused, even by a server that charges refusals), and the server sees the same foreign client as the run. A
request admitted at instant a was sent at a - RTT/2; the worker's next one reaches the server at a + RTT at the
soonest. Ideal = the last admission + RTT/2.

**Targets** (issue 17): with headers <= 1% of the attempts refused and wall <= 1.05x the ideal; without headers
<= 2% and <= 1.15x; a quota shared with a client headway does not see (30% of the limit) <= 2% refused, no wall
target; no request failed anywhere. A cell that misses its target is listed in ` + "`known`" + ` (internal/testkit/sim/known_test.go)
with what it reaches and why; TestGrid fails when a cell does worse than listed.

`)
	refused := func(r Result) string {
		return fmt.Sprintf("%d (%.1f%%)", r.Throttled, 100*r.ThrottledShare())
	}
	var groups []string
	for _, c := range cells {
		if !slices.Contains(groups, c.group) {
			groups = append(groups, c.group)
		}
	}
	met, total := 0, 0
	for _, g := range groups {
		fmt.Fprintf(&b, "## %s\n\n", g)
		b.WriteString("| cell | attempts | refused | failed | wall | ideal | x | target | met |")
		shared := strings.Contains(g, "shared")
		if shared {
			b.WriteString(" foreign attempts (refused) |")
		}
		b.WriteString("\n|---|--:|--:|--:|--:|--:|--:|---|---|")
		if shared {
			b.WriteString("--:|")
		}
		b.WriteString("\n")
		for _, c := range cells {
			r, ok := results[c.name]
			if c.group != g || !ok {
				continue
			}
			total++
			tg := c.target()
			verdict := "no"
			if tg.met(r) {
				verdict = "yes"
				met++
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %d | %.2fs | %.2fs | %.2fx | %s | %s |", c.name, r.Attempts, refused(r), r.Failed,
				r.Wall.Seconds(), r.Ideal.Seconds(), r.Slowdown(), tg, verdict)
			if shared {
				fmt.Fprintf(&b, " %d (%d) |", r.ForeignAttempts, r.ForeignThrottled)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%d of %d cells meet their target.\n", met, total)
	return b.String()
}

package ratelimittest

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clone deep-copies a meter, so a test can ask "what if" without touching it.
func clone(m meter) meter {
	switch m := m.(type) {
	case *fixedWindow:
		c := *m
		return &c
	case *anchoredWindow:
		c := *m
		return &c
	case *slidingLog:
		c := *m
		c.buf = append([]int64(nil), m.buf...)
		return &c
	case *slidingCounter:
		c := *m
		return &c
	case *tokenBucket:
		c := *m
		return &c
	case *leakyBucket:
		c := *m
		return &c
	case *gcra:
		c := *m
		return &c
	}
	panic("unknown meter")
}

func mustRule(t testing.TB, p Quota) *rule {
	t.Helper()
	r, err := compile(p)
	require.NoError(t, err)
	return r
}

// step is one request: dt after the previous one, costing cost.
type step struct{ dt, cost int64 }

// checkMeter runs steps through a fresh meter and checks the invariants every
// algorithm keeps: remaining is the largest cost admitted now, a rejection's
// wait is exact (admitted after wait, not one nanosecond sooner), and the
// state stays in range. It returns the admission times (one per unit).
func checkMeter(t testing.TB, r *rule, start int64, steps []step) []int64 {
	t.Helper()
	return checkMeterCharging(t, r, start, steps, false)
}

// checkMeterCharging is checkMeter, with every refusal charged when charge is
// set (WithChargeRefused): the wait after the charge is exact too, and never
// shorter than before it. In debt, remaining is 0 and even a cost of 0 may
// wait.
func checkMeterCharging(t testing.TB, r *rule, start int64, steps []step, charge bool) []int64 {
	t.Helper()
	now := start
	m := r.newMeter(now)
	var admitted []int64
	for i, s := range steps {
		now += s.dt
		m.advance(now)
		if a, ok := m.(arriver); ok {
			a.arrive() // as the limiter does for every request
		}
		rem, reset := m.status()
		require.GreaterOrEqual(t, rem, int64(0), "step %d", i)
		require.LessOrEqual(t, rem, r.capacity(), "step %d", i)
		require.GreaterOrEqual(t, reset, int64(0), "step %d", i)
		if reset == 0 {
			require.Equal(t, r.capacity(), rem, "step %d: a key with nothing to restore has its whole quota", i)
		}
		// remaining is exactly the largest cost that fits now.
		if ok, _ := clone(m).fits(rem); !ok && !(charge && rem == 0) {
			t.Fatalf("step %d: %s: cost %d = remaining rejected", i, r, rem)
		}
		if rem < r.capacity() {
			ok, wait := clone(m).fits(rem + 1)
			require.False(t, ok, "step %d: %s: cost remaining+1 = %d admitted", i, r, rem+1)
			require.Greater(t, wait, int64(0), "step %d", i)
		}
		if ok, wait := clone(m).fits(r.capacity() + 1); ok || wait != never {
			t.Fatalf("step %d: cost above capacity: ok %v wait %d, want never", i, ok, wait)
		}

		ok, wait := m.fits(s.cost)
		if !ok {
			require.Greater(t, wait, int64(0), "step %d: a rejection waits", i)
			require.NotEqual(t, int64(never), wait, "step %d: cost %d <= capacity", i, s.cost)
			late := clone(m)
			late.advance(now + wait)
			lok, _ := late.fits(s.cost)
			require.True(t, lok, "step %d: %s: cost %d still rejected after its wait %d", i, r, s.cost, wait)
			early := clone(m)
			early.advance(now + wait - 1)
			eok, _ := early.fits(s.cost)
			require.False(t, eok, "step %d: %s: cost %d admitted 1ns before its wait %d", i, r, s.cost, wait)
			if charge {
				m.charge(s.cost)
				ok, after := clone(m).fits(s.cost)
				require.False(t, ok, "step %d: %s: a charged refusal fits", i, r)
				require.GreaterOrEqual(t, after, wait, "step %d: %s: charging shortened the wait", i, r)
				late := clone(m)
				late.advance(now + after)
				lok, _ := late.fits(s.cost)
				require.True(t, lok, "step %d: %s: cost %d still rejected after its charged wait %d", i, r, s.cost, after)
				early := clone(m)
				early.advance(now + after - 1)
				eok, _ := early.fits(s.cost)
				require.False(t, eok, "step %d: %s: cost %d admitted 1ns before its charged wait %d", i, r, s.cost, after)
			}
			continue
		}
		m.take(s.cost)
		for range s.cost {
			admitted = append(admitted, now)
		}
	}
	return admitted
}

// maxInWindow is the most admissions in any half-open span [t, t+w).
func maxInWindow(times []int64, w int64) int {
	best, j := 0, 0
	for i := range times {
		for times[i]-times[j] >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func randomSteps(rng *rand.Rand, n int, window, maxCost int64) []step {
	steps := make([]step, n)
	for i := range steps {
		var dt int64
		switch rng.IntN(4) {
		case 0: // a burst
		case 1:
			dt = rng.Int64N(window / 50)
		case 2:
			dt = rng.Int64N(window)
		default:
			dt = rng.Int64N(3 * window)
		}
		steps[i] = step{dt: dt, cost: 1 + rng.Int64N(maxCost)}
	}
	return steps
}

// Every algorithm keeps the shared invariants on random traffic, odd rates
// (3 per second, 7 per 1.1s) included.
func TestMetersInvariants(t *testing.T) {
	shapes := []struct {
		limit, burst int
		window       time.Duration
	}{
		{10, 0, time.Second}, {3, 0, time.Second}, {7, 2, 1100 * time.Millisecond},
		{1, 0, time.Minute}, {50, 120, 90 * time.Second}, {1000, 10, time.Millisecond},
	}
	policies := []Quota{{Algorithm: FixedWindow, Anchor: AnchorFirstRequest}}
	for _, alg := range Algorithms() {
		policies = append(policies, Quota{Algorithm: alg})
	}
	for _, p := range policies {
		for _, sh := range shapes {
			p.Limit, p.Window, p.Burst = sh.limit, sh.window, sh.burst
			r := mustRule(t, p)
			t.Run(r.String(), func(t *testing.T) {
				for seed := range uint64(8) {
					rng := rand.New(rand.NewPCG(seed, 7))
					start := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC).UnixNano() + rng.Int64N(int64(time.Hour))
					maxCost := min(int64(3), r.capacity())
					steps := randomSteps(rng, 300, r.window, maxCost)
					checkMeter(t, r, start, steps)
					checkMeterCharging(t, r, start, steps, true)
				}
			})
		}
	}
}

// dense is a steady overload: a request every gap for span.
func dense(gap, span time.Duration) []step {
	steps := []step{{0, 1}}
	for t := gap; t < span; t += gap {
		steps = append(steps, step{int64(gap), 1})
	}
	return steps
}

// base is an aligned instant, so window boundaries fall on whole seconds.
var base = time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC).UnixNano()

// A fixed window admits its limit per aligned window, and so up to twice
// the limit across a boundary.
func TestFixedWindowTwiceTheLimitAcrossABoundary(t *testing.T) {
	r := mustRule(t, Quota{Algorithm: FixedWindow, Limit: 10, Window: time.Second})
	// Dense traffic from 0.9s to 1.1s: 10 at the end of the first window
	// and 10 at the start of the second, 200ms apart at most.
	steps := append([]step{{int64(900 * time.Millisecond), 1}}, dense(time.Millisecond, 200*time.Millisecond)[1:]...)
	got := checkMeter(t, r, base, steps)
	require.Len(t, got, 20)
	require.Less(t, got[19]-got[0], int64(200*time.Millisecond))
	require.Equal(t, 20, maxInWindow(got, int64(time.Second)), "2x the limit inside one window-long span")

	// Never more than the limit inside one aligned window.
	rng := rand.New(rand.NewPCG(1, 2))
	got = checkMeter(t, r, base, randomSteps(rng, 5000, r.window, 2))
	perWindow := map[int64]int{}
	for _, a := range got {
		perWindow[floorDiv(a, r.window)]++
	}
	for w, n := range perWindow {
		require.LessOrEqual(t, n, 10, "window %d", w)
	}
}

// A sliding log never admits more than the limit in any window-long span,
// admits exactly the limit per window under overload, and logs nothing for a
// rejection.
func TestSlidingLogNeverExceedsTheLimitInAnyWindow(t *testing.T) {
	r := mustRule(t, Quota{Algorithm: SlidingLog, Limit: 10, Window: time.Second})
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 3))
		got := checkMeter(t, r, base+rng.Int64N(int64(time.Second)), randomSteps(rng, 2000, r.window, 3))
		require.LessOrEqual(t, maxInWindow(got, r.window), 10, "seed %d", seed)
	}
	// Steady overload for 10 windows: exactly 10 per window.
	got := checkMeter(t, r, base, dense(time.Millisecond, 10*time.Second))
	require.Len(t, got, 100)
	require.Equal(t, 10, maxInWindow(got, r.window))

	// Memory stays bounded under attack: a million rejected requests.
	m := r.newMeter(base).(*slidingLog)
	for i := range int64(1_000_000) {
		m.advance(base + i)
		if ok, _ := m.fits(1); ok {
			m.take(1)
		}
	}
	require.LessOrEqual(t, len(m.buf), 10)
	require.Equal(t, 10, m.n)
}

// The sliding counter's estimate can undercount the true last-window count,
// but only by the previous window's share it assumed gone: at an admission
// at e into a window, the true count is at most limit + prev*e/window, so
// always below twice the limit; under steady overload it is the limit, give
// or take one.
func TestSlidingCounterApproximationErrorIsBounded(t *testing.T) {
	r := mustRule(t, Quota{Algorithm: SlidingCounter, Limit: 20, Window: time.Second})
	w := r.window
	worst := 0
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 5))
		got := checkMeter(t, r, base, randomSteps(rng, 2000, w, 2))
		// Per aligned window the counter is exact.
		per := map[int64]int64{}
		for _, a := range got {
			per[floorDiv(a, w)]++
		}
		for i, a := range got {
			win := floorDiv(a, w)
			e := a - win*w
			prev := per[win-1]
			n := 0 // true count in (a-w, a]
			for j := i; j >= 0 && got[j] > a-w; j-- {
				n++
			}
			bound := r.limit + mulDivCeil(prev, e, w)
			require.LessOrEqual(t, int64(n), bound, "seed %d admission %d", seed, i)
			require.Less(t, n, 2*int(r.limit))
			worst = max(worst, n)
		}
		for k, n := range per {
			require.LessOrEqual(t, n, r.limit, "aligned window %d", k)
		}
	}
	require.Greater(t, worst, int(r.limit), "random bursts do find the approximation's slack")

	// Steady overload: the estimate spreads admissions evenly.
	got := checkMeter(t, r, base, dense(time.Millisecond, 20*time.Second))
	require.LessOrEqual(t, maxInWindow(got, w), int(r.limit)+1)
	require.InDelta(t, 20*20, len(got), 20)
}

// A token bucket admits its burst at once, then its rate.
func TestTokenBucketBurstThenRate(t *testing.T) {
	r := mustRule(t, Quota{Algorithm: TokenBucket, Limit: 4, Window: time.Second, Burst: 10})
	got := checkMeter(t, r, base, dense(time.Millisecond, 5*time.Second))
	require.Len(t, got, 10+4*5-1, "burst, then 4 per second (the 20th token arrives at 5s)")
	for i := range 10 {
		require.Equal(t, base+int64(i)*int64(time.Millisecond), got[i], "the burst passes back to back")
	}
	require.Equal(t, base+int64(250*time.Millisecond), got[10], "the first refilled token")
	for i := 11; i < len(got); i++ {
		require.Equal(t, int64(250*time.Millisecond), got[i]-got[i-1], "then one per 250ms")
	}
}

// A leaky bucket meter lets its bucket fill, then spaces admissions by the
// drain interval exactly, even when it is not a whole number of nanoseconds.
func TestLeakyBucketSpacing(t *testing.T) {
	r := mustRule(t, Quota{Algorithm: LeakyBucket, Limit: 3, Window: time.Second, Burst: 5})
	got := checkMeter(t, r, base, dense(time.Millisecond, 30*time.Second))
	require.Len(t, got, 5+89, "5 fill the bucket, then 3 per second: 89 more by 29.999s")
	for i := 5; i < len(got); i++ {
		if i == 5 {
			continue // the bucket drained while it filled
		}
		gap := got[i] - got[i-1]
		// 1s/3 rounded to the request grid (1ms): 333ms or 334ms.
		require.InDelta(t, float64(time.Second)/3, float64(gap), float64(time.Millisecond))
		// And the drift never accumulates: admission k is at k/3 s.
		require.LessOrEqual(t, got[i]-base, int64(i-4)*int64(time.Second)/3+int64(time.Millisecond))
		require.GreaterOrEqual(t, got[i]-base, int64(i-4)*int64(time.Second)/3)
	}
}

// GCRA spaces conforming requests by the emission interval, allowing a burst
// of (tolerance/T)+1.
func TestGCRAEmissionInterval(t *testing.T) {
	// Tolerance 0: exactly one per T = 100ms.
	r := mustRule(t, Quota{Algorithm: GCRA, Limit: 10, Window: time.Second, Burst: 1})
	got := checkMeter(t, r, base, dense(time.Millisecond, 2*time.Second))
	require.Len(t, got, 20)
	for i := 1; i < len(got); i++ {
		require.Equal(t, int64(100*time.Millisecond), got[i]-got[i-1])
	}
	// Tolerance 4T: a burst of 5, then T apart.
	r = mustRule(t, Quota{Algorithm: GCRA, Limit: 10, Window: time.Second, Burst: 5})
	m := r.newMeter(base)
	for range 5 {
		ok, _ := m.fits(1)
		require.True(t, ok)
		m.take(1)
	}
	ok, wait := m.fits(1)
	require.False(t, ok)
	require.Equal(t, int64(100*time.Millisecond), wait, "the 6th conforms one T later")
	// An interval that is not whole nanoseconds (1s/3) stays exact.
	r = mustRule(t, Quota{Algorithm: GCRA, Limit: 3, Window: time.Second, Burst: 1})
	// With no tolerance, a unit that arrives late (here by the clock's
	// rounding to whole nanoseconds) moves the schedule: each follows the
	// previous one by T rounded up.
	got = greedy(t, r, 300)
	for k := 1; k < len(got); k++ {
		require.Equal(t, int64(333_333_334), got[k]-got[k-1], "unit %d", k)
	}
	// With a tolerance of one T, lateness under T is forgiven and the
	// schedule holds exactly: unit k conforms at (k-1)*T, rounded up.
	r = mustRule(t, Quota{Algorithm: GCRA, Limit: 3, Window: time.Second, Burst: 2})
	got = greedy(t, r, 300)
	require.Equal(t, base, got[1])
	for k := 1; k < len(got); k++ {
		require.Equal(t, ceilDiv(int64(k-1)*int64(time.Second), 3), got[k]-base, "unit %d", k)
	}
}

// Every algorithm admits its limit per window on the long run, not one more:
// the reduced-fraction rates do not drift.
func TestLongRunRates(t *testing.T) {
	for _, alg := range Algorithms() {
		r := mustRule(t, Quota{Algorithm: alg, Limit: 7, Window: 3 * time.Second})
		got := checkMeter(t, r, base, dense(30*time.Millisecond, 300*time.Second))
		// 100 windows of 7; the buckets and GCRA add their initial burst
		// of 7 (minus the last partial interval), the window algorithms
		// may run a little behind.
		require.InDelta(t, 700, len(got), 8, alg)
	}
}

// greedy admits n units, each at the first nanosecond the meter allows it
// (following the wait it reports), and returns their times.
func greedy(t testing.TB, r *rule, n int) []int64 {
	t.Helper()
	now := base
	m := r.newMeter(now)
	var got []int64
	for len(got) < n {
		ok, wait := m.fits(1)
		if !ok {
			require.Greater(t, wait, int64(0))
			now += wait
			m.advance(now)
			ok, _ = m.fits(1)
			require.True(t, ok, "admitted after the wait it reported")
		}
		m.take(1)
		got = append(got, now)
	}
	return got
}

// An anchored window admits its limit from a key's first request, then
// nothing until the window ends, and the first request after that opens the
// next; an aligned window restarts on the clock instead.
func TestAnchoredWindowTimes(t *testing.T) {
	ms := int64(time.Millisecond)
	// A request every ms from 250ms after an aligned instant.
	steps := append([]step{{250 * ms, 1}}, dense(time.Millisecond, 2500*time.Millisecond)[1:]...)
	anchored := checkMeter(t, mustRule(t, Quota{Limit: 3, Window: time.Second, Anchor: AnchorFirstRequest}), base, steps)
	aligned := checkMeter(t, mustRule(t, Quota{Limit: 3, Window: time.Second}), base, steps)
	at := func(got []int64) []int64 {
		out := make([]int64, len(got))
		for i, a := range got {
			out[i] = (a - base) / ms
		}
		return out
	}
	require.Equal(t, []int64{250, 251, 252, 1250, 1251, 1252, 2250, 2251, 2252}, at(anchored))
	require.Equal(t, []int64{250, 251, 252, 1000, 1001, 1002, 2000, 2001, 2002}, at(aligned))

	// A gap longer than a window: the next window starts at the next
	// request, wherever it falls.
	r := mustRule(t, Quota{Limit: 2, Window: time.Second, Anchor: AnchorFirstRequest})
	got := checkMeter(t, r, base, []step{{0, 1}, {0, 1}, {0, 1}, {2700 * ms, 1}, {999 * ms, 1}, {0, 1}, {ms - 1, 1}, {1, 1}})
	require.Equal(t, []int64{0, 0, 2700 * ms, 3699 * ms, 3700 * ms}, func() []int64 {
		for i := range got {
			got[i] -= base
		}
		return got
	}())
}

package ratelimittest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Keys whose quota is fully restored are dropped, so a server partitioned
// by client address does not grow without bound; keys still limited stay.
func TestSweepDropsOnlyRestoredKeys(t *testing.T) {
	r := mustRule(t, Quota{Algorithm: SlidingLog, Limit: 2, Window: time.Second})
	l := newLimiter([]*rule{r})
	out := make([]policyStatus, 1)
	now := base
	l.decide("busy", now, []int64{1}, out)
	l.decide("busy", now, []int64{1}, out)
	for i := range sweepEvery - 2 {
		l.decide(fmt.Sprint(i), now, []int64{1}, out)
	}
	require.Equal(t, sweepEvery-1, l.keyCount())
	now += int64(2 * time.Second)
	l.decide("busy", now, []int64{1}, out) // busy again: the log holds it
	l.decide("new", now, []int64{1}, out)  // the 4096th new key sweeps
	require.Equal(t, 2, l.keyCount(), "the idle keys are gone")
	d := l.decide("busy", now, []int64{1}, out)
	require.True(t, d.admitted)
	d = l.decide("busy", now, []int64{1}, out)
	require.False(t, d.admitted, "busy kept its state through the sweep")
}

// FuzzMeters runs random traffic through every algorithm and checks the
// invariants of checkMeter, plus each algorithm's defining bound, with
// refusals charged (WithChargeRefused) when the burst's high bit is set.
func FuzzMeters(f *testing.F) {
	f.Add(uint8(0), uint16(10), uint32(1000), uint16(0), []byte{0, 0, 0, 1, 5, 200, 7, 3})
	f.Add(uint8(2), uint16(3), uint32(1100), uint16(2), []byte{9, 9, 9, 9, 255, 1, 128})
	f.Add(uint8(5), uint16(7), uint32(1), uint16(50), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(uint8(3), uint16(4), uint32(1000), uint16(1<<15|4), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 30, 0, 40, 1, 0, 2})            // refusals charged
	f.Add(uint8(3), uint16(5), uint32(1000), uint16(1<<14), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 30, 0, 40, 1, 0, 2, 9, 0, 50, 0}) // rounded
	f.Fuzz(func(t *testing.T, alg uint8, limit uint16, windowMs uint32, burst uint16, ops []byte) {
		algs := Algorithms()
		p := Quota{
			Limit:  1 + int(limit%2000),
			Window: time.Duration(1+uint64(windowMs)%(100*86_400_000)) * time.Millisecond,
			Burst:  int(burst % 4000),
		}
		// One more than the algorithms: the anchored fixed window.
		if i := int(alg) % (len(algs) + 1); i < len(algs) {
			p.Algorithm = algs[i]
		} else {
			p.Algorithm, p.Anchor = FixedWindow, AnchorFirstRequest
		}
		r, err := compile(p)
		if err != nil {
			t.Skip(err)
		}
		// The burst's next bit rounds a sliding counter's count and
		// writes its resets at its window's end (go-chi/httprate's).
		r.rounded, r.endResets = burst&(1<<14) != 0, burst&(1<<14) != 0
		var steps []step
		for i := 0; i+1 < len(ops) && len(steps) < 300; i += 2 {
			// dt spans bursts (0), fractions of the window and long gaps.
			dt := int64(ops[i]) * int64(ops[i]) * r.window / 4096
			steps = append(steps, step{dt: dt, cost: 1 + int64(ops[i+1])%min(4, r.capacity())})
		}
		// The burst's high bit, unused above, charges refusals.
		got := checkMeterCharging(t, r, base+int64(limit)*7919, steps, burst >= 1<<15)
		switch r.alg {
		case SlidingLog:
			require.LessOrEqual(t, int64(maxInWindow(got, r.window)), r.limit)
		case FixedWindow, SlidingCounter:
			if r.anchored {
				break // its windows are not aligned; see TestAnchoredWindowTimes
			}
			per := map[int64]int64{}
			for _, a := range got {
				per[floorDiv(a, r.window)]++
			}
			for _, n := range per {
				require.LessOrEqual(t, n, r.limit)
			}
		}
	})
}

// An anchored window opened by a refused request holds nothing, yet a fresh
// state would open a later window: the sweep keeps it, and drops the key
// once its window has ended.
func TestSweepKeepsOpenAnchoredWindows(t *testing.T) {
	anchored := mustRule(t, Quota{Limit: 5, Window: 10 * time.Second, Anchor: AnchorFirstRequest})
	minute := mustRule(t, Quota{Limit: 1, Window: time.Minute})
	l := newLimiter([]*rule{anchored, minute})
	out := make([]policyStatus, 2)
	now := base
	require.True(t, l.decide("k", now, []int64{1, 1}, out).admitted)
	now += int64(10 * time.Second) // the anchored window ends; the minute is spent
	d := l.decide("k", now, []int64{1, 1}, out)
	require.False(t, d.admitted)
	require.Equal(t, int64(5), d.status[0].remaining)
	require.Equal(t, int64(10*time.Second), d.status[0].reset, "a window opened by the refusal")
	l.sweep(now + int64(time.Minute))
	require.Equal(t, 0, l.keyCount(), "both windows over: nothing to keep")

	require.False(t, l.decide("k", now+int64(time.Minute), []int64{1, 2}, out).admitted) // cost 2: never fits the minute
	l.sweep(now + int64(time.Minute) + 1)
	require.Equal(t, 1, l.keyCount(), "an open anchored window is state")
	d = l.decide("k", now+int64(time.Minute)+int64(4*time.Second), []int64{1, 1}, out)
	require.True(t, d.admitted)
	require.Equal(t, int64(6*time.Second), d.status[0].reset, "the window from the refusal, kept through the sweep")
}

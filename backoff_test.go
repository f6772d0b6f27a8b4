package headway

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/headway-go/headway/ratelimit"
	"github.com/stretchr/testify/require"
)

// fracSource is a rand.Source that yields the given fractions of [0, 1) in
// turn, so tests can assert exact jittered delays.
type fracSource struct {
	fracs []float64
	i     int
}

func (s *fracSource) Uint64() uint64 {
	f := s.fracs[s.i%len(s.fracs)]
	s.i++
	return uint64(f*(1<<53)) << 11
}

func TestBackoffExactDelays(t *testing.T) {
	base, cap := 100*time.Millisecond, 1*time.Second
	tests := []struct {
		jitter Jitter
		frac   float64
		retry  int
		prev   time.Duration
		want   time.Duration
	}{
		{JitterNone, 0.5, 1, 0, 100 * time.Millisecond},
		{JitterNone, 0.5, 2, 0, 200 * time.Millisecond},
		{JitterNone, 0.5, 4, 0, 800 * time.Millisecond},
		{JitterNone, 0.5, 5, 0, time.Second}, // capped
		{JitterFull, 0.5, 1, 0, 50 * time.Millisecond},
		{JitterFull, 0.25, 3, 0, 100 * time.Millisecond},
		{JitterFull, 0, 3, 0, 0},
		{JitterFull, 0.5, 10, 0, 500 * time.Millisecond},
		{JitterEqual, 0, 3, 0, 200 * time.Millisecond},
		{JitterEqual, 0.5, 3, 0, 300 * time.Millisecond},
		{JitterEqual, 0.5, 10, 0, 750 * time.Millisecond},
		// decorrelated: uniform in [max(base, hi/3), hi], hi = min(cap, 3*max(prev, base))
		{JitterDecorrelated, 0, 1, 0, 100 * time.Millisecond},
		{JitterDecorrelated, 0.5, 1, 0, 200 * time.Millisecond},
		{JitterDecorrelated, 0.5, 2, 200 * time.Millisecond, 400 * time.Millisecond},
		{JitterDecorrelated, 0, 2, 200 * time.Millisecond, 200 * time.Millisecond},
		{JitterDecorrelated, 0.5, 9, 900 * time.Millisecond, 666666666},
		{JitterDecorrelated, 0, 9, 900 * time.Millisecond, 333333333},
	}
	for _, tc := range tests {
		b := NewBackoff(base, cap, tc.jitter, &fracSource{fracs: []float64{tc.frac}})
		require.Equal(t, tc.want, b.Delay(tc.retry, tc.prev), "%v frac=%v retry=%d prev=%v", tc.jitter, tc.frac, tc.retry, tc.prev)
	}
}

func TestBackoffEdgeInputs(t *testing.T) {
	src := rand.NewPCG(1, 2)
	for _, j := range []Jitter{JitterFull, JitterEqual, JitterDecorrelated, JitterNone, Jitter(42)} {
		for _, bc := range [][2]time.Duration{
			{0, 0}, {0, time.Second}, {time.Second, 0}, {time.Second, time.Millisecond},
			{-time.Second, -time.Second}, {time.Duration(1 << 62), time.Duration(1 << 62)},
		} {
			b := NewBackoff(bc[0], bc[1], j, src)
			for _, retry := range []int{-5, 0, 1, 2, 62, 63, 64, 1000, 1 << 30} {
				for _, prev := range []time.Duration{-1, 0, time.Second, 1 << 62} {
					d := b.Delay(retry, prev)
					require.GreaterOrEqual(t, d, time.Duration(0), "%v base=%v cap=%v retry=%d", j, bc[0], bc[1], retry)
					require.LessOrEqual(t, d, ratelimit.MaxDuration)
					if bc[1] > 0 {
						require.LessOrEqual(t, d, max(bc[1], 0), "%v exceeds cap", d)
					}
				}
			}
		}
	}
	// A cap below the base wins: the base shrinks to it.
	b := NewBackoff(time.Second, 10*time.Millisecond, JitterNone, nil)
	require.Equal(t, 10*time.Millisecond, b.Delay(1, 0))
	// Zero base gives zero backoff, not a panic.
	require.Equal(t, time.Duration(0), NewBackoff(0, time.Second, JitterNone, nil).Delay(1000, 0))
}

// The classic decorrelated jitter, min(cap, rand(base, 3*prev)), returns
// exactly the cap for most retries once 3*prev exceeds it. headway's must
// keep growing below the cap and stay spread over [cap/3, cap] at it.
func TestDecorrelatedJitterDoesNotBunchAtCap(t *testing.T) {
	base, cap := 100*time.Millisecond, 10*time.Second
	b := NewBackoff(base, cap, JitterDecorrelated, rand.NewPCG(7, 9))
	const clients, retries = 2000, 30
	atCap, late := 0, 0
	var buckets [6]int
	for c := 0; c < clients; c++ {
		prev := time.Duration(0)
		for r := 1; r <= retries; r++ {
			d := b.Delay(r, prev)
			// Within [base, cap], and never less than before until the
			// cap's range.
			if d < base || d > cap || d < min(prev, cap/3) {
				t.Fatalf("retry %d after %v: delay %v out of range", r, prev, d)
			}
			prev = d
			if r > 20 { // long past the point where 3*prev > cap
				late++
				if d >= cap-cap/100 {
					atCap++
				}
				lo := cap / 3
				if d < lo {
					t.Fatalf("late delay %v below cap/3", d)
				}
				buckets[min(int(float64(d-lo)/float64(cap-lo)*6), 5)]++
			}
		}
	}
	frac := float64(atCap) / float64(late)
	require.Less(t, frac, 0.03, "%.1f%% of late delays within 1%% of the cap", 100*frac)
	// Uniform over [cap/3, cap]: every sixth of it holds about 1/6 of the delays.
	for i, n := range buckets {
		share := float64(n) / float64(late)
		require.InDelta(t, 1.0/6, share, 0.03, "bucket %d holds %.1f%%", i, 100*share)
	}
}

func TestFullJitterDistribution(t *testing.T) {
	b := NewBackoff(time.Second, time.Minute, JitterFull, rand.NewPCG(3, 4))
	const n = 20000
	var sum time.Duration
	for i := 0; i < n; i++ {
		d := b.Delay(3, 0) // t = 4s
		require.LessOrEqual(t, d, 4*time.Second)
		sum += d
	}
	require.InDelta(t, 2.0, (sum / n).Seconds(), 0.05)
}

func TestParseJitter(t *testing.T) {
	for _, j := range []Jitter{JitterFull, JitterEqual, JitterDecorrelated, JitterNone} {
		got, err := ParseJitter(j.String())
		require.NoError(t, err)
		require.Equal(t, j, got)
	}
	got, err := ParseJitter("EQUAL")
	require.NoError(t, err)
	require.Equal(t, JitterEqual, got)
	_, err = ParseJitter("random")
	require.ErrorContains(t, err, `unknown jitter "random"`)
	require.Equal(t, "Jitter(9)", Jitter(9).String())
}

func TestBackoffFunc(t *testing.T) {
	var f Backoff = BackoffFunc(func(retry int, prev time.Duration) time.Duration {
		return time.Duration(retry)*time.Second + prev
	})
	require.Equal(t, 3*time.Second, f.Delay(2, time.Second))
}

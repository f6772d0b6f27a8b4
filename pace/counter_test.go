package pace

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/ratelimit"
)

// TestCounterRange checks the counter's extremes over a span of phases
// (counterRange) against the count taken at every millisecond of the
// span: none is beyond them, and both are reached, within the count's fall
// over a millisecond. Taking the count at the span's two ends only, as the
// counter once did, misses a unit that crosses a boundary within it: a
// burst at the start of a window, with its phase open, was counted as the
// window before's and let through (the grid's sliding counter with 256
// workers: 20.6% refused).
func TestCounterRange(t *testing.T) {
	const w = int64(1e9)
	rnd := rand.New(rand.NewPCG(7, 11))
	for i := range 300 {
		var p policy
		t0 := int64(100e9)
		for range rnd.IntN(40) {
			at := t0 - rnd.Int64N(3*w)
			if rnd.IntN(3) == 0 {
				p.ctrF.add(at, 1+rnd.Int64N(5), 1)
			} else {
				p.own.add(at, 1+rnd.Int64N(5), 1)
			}
		}
		now := t0 - rnd.Int64N(w/10)
		sLo, sLen := rnd.Int64N(w), rnd.Int64N(w+w/4)
		least, most := p.counterRange(now, w, sLo, sLen)
		at := func(s int64) float64 {
			ws := now - s
			cur := p.own.sum(ws-1, now) + p.ctrF.sum(ws-1, now)
			prev := p.own.sum(ws-w-1, ws-1) + p.ctrF.sum(ws-w-1, ws-1)
			return float64(cur) + float64(prev)*(1-float64(s)/float64(w))
		}
		lo, hi := 1e18, -1e18
		for d := int64(0); d <= min(sLen, w-1); d += 1e6 {
			v := at(floorMod(sLo+d, w))
			lo, hi = min(lo, v), max(hi, v)
		}
		slack := float64(p.own.total()+p.ctrF.total()) * 1e6 / float64(w)
		require.GreaterOrEqualf(t, lo, least-1e-9, "case %d: a count below the least", i)
		require.LessOrEqualf(t, hi, most+1e-9, "case %d: a count above the most", i)
		require.LessOrEqualf(t, lo, least+slack+1e-9, "case %d: the least %.3f not reached (%.3f)", i, least, lo)
		require.GreaterOrEqualf(t, hi, most-slack-1e-9, "case %d: the most %.3f not reached (%.3f)", i, most, hi)
	}
}

// TestResetInTheDatesSecond: go-chi/httprate's reset is the Unix second of
// its window's end, truncated, and its windows start when the limiter
// does, off the second: for part of each window the reset is the Date's own
// second. A first burst whose answers all said so left the window's length
// unknown, and the key waited for its probe trickle, 8 s (loopback: 18-27 s
// for 300 requests at 50/s, in one run of ten at an unlucky phase). Such a
// reset says the window ends within that second, as any other bounds it.
func TestResetInTheDatesSecond(t *testing.T) {
	var st State
	cfg := &Config{}
	now := t0.Add(ms(100)) // 12:00:00.100; the window ends at 00.700
	for i := range 3 {
		d := st.Reserve(now, Request{}, cfg)
		require.True(t, d.OK)
		h := http.Header{}
		h.Set("Date", now.UTC().Format(http.TimeFormat))
		h.Set("X-RateLimit-Limit", "50")
		h.Set("X-RateLimit-Remaining", strconv.Itoa(49-i))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(t0.Unix(), 10))
		now = now.Add(ms(10))
		date, ok := ratelimit.ParseDate(h.Get("Date"))
		require.True(t, ok)
		st.Complete(now, d.Lease, Answer{Obs: ratelimit.ParseHeaders(h, http.StatusOK, now), Date: date}, cfg)
	}
	require.Len(t, st.k.policies, 1)
	p := st.k.policies[0]
	require.True(t, p.period.known(), "the window's length is bounded")
	require.Equal(t, int64(time.Second), p.period.hi, "a second at most, as whole-second resets say")
}

package ratelimittest_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	rlt "github.com/headway-go/headway/ratelimittest"
)

// Anchored fixed windows start at each key's first request, not on the
// clock, and the headers count to the end of the key's own window.
func TestAnchoredWindows(t *testing.T) {
	epoch := start.Unix()
	t.Run("per key", func(t *testing.T) {
		h, clock := newHandler(t, rlt.WithPartition(rlt.ByHeader("K")), rlt.WithDialect(rlt.IETFDraft07, rlt.OpenAI, rlt.XRateLimit),
			rlt.WithQuota(rlt.Quota{Limit: 3, Window: time.Second, Anchor: rlt.AnchorFirstRequest}))
		alice := func() *http.Response { return call(h, "K", "alice") }
		res := alice() // 12:00:00.25: alice's window is [00.25, 01.25)
		require.Equal(t, 200, res.StatusCode)
		require.Equal(t, "limit=3, remaining=2, reset=1", res.Header.Get("RateLimit"))
		require.Equal(t, "1s", res.Header.Get("X-Ratelimit-Reset-Requests"), "a whole window, not the 750ms to the next second")
		require.Equal(t, strconv.FormatInt(epoch+2, 10), res.Header.Get("X-RateLimit-Reset"), "12:00:01.25, rounded up")

		clock.Advance(900 * time.Millisecond) // 12:00:01.15: a clock-aligned window would be new
		require.Equal(t, []int{200, 200}, statuses(h, 2, "K", "alice"))
		res = alice()
		require.Equal(t, 429, res.StatusCode)
		require.Equal(t, "1", res.Header.Get("Retry-After"))
		require.Equal(t, "100ms", res.Header.Get("X-Ratelimit-Reset-Requests"))
		require.Equal(t, "limit=3, remaining=0, reset=1", res.Header.Get("RateLimit"))
		require.Equal(t, strconv.FormatInt(epoch+2, 10), res.Header.Get("X-RateLimit-Reset"))

		res = call(h, "K", "bob") // bob's window is [01.15, 02.15)
		require.Equal(t, 200, res.StatusCode)
		require.Equal(t, "1s", res.Header.Get("X-Ratelimit-Reset-Requests"))
		require.Equal(t, strconv.FormatInt(epoch+3, 10), res.Header.Get("X-RateLimit-Reset"))

		clock.Advance(99 * time.Millisecond)
		res = alice()
		require.Equal(t, 429, res.StatusCode)
		require.Equal(t, "1ms", res.Header.Get("X-Ratelimit-Reset-Requests"))
		clock.Advance(time.Millisecond) // 12:00:01.25: alice's window ends; this request opens the next
		res = alice()
		require.Equal(t, 200, res.StatusCode)
		require.Equal(t, "1s", res.Header.Get("X-Ratelimit-Reset-Requests"))
		require.Equal(t, "limit=3, remaining=2, reset=1", res.Header.Get("RateLimit"))

		var got []time.Duration
		for _, a := range h.Admissions() {
			got = append(got, a.Time.Sub(start))
		}
		ms := time.Millisecond
		require.Equal(t, []time.Duration{0, 900 * ms, 900 * ms, 900 * ms, 1000 * ms}, got)
	})
	t.Run("a request that cannot fit opens the window", func(t *testing.T) {
		h, clock := newHandler(t, rlt.WithQuota(rlt.Quota{Name: "a", Limit: 3, Window: 10 * time.Second,
			Anchor: rlt.AnchorFirstRequest, Cost: rlt.CostFromHeader("X-Cost", 1)}))
		res := call(h, "X-Cost", "4")
		require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
		require.Equal(t, `"a";r=3;t=10`, res.Header.Get("RateLimit"), "the window is open, nothing charged")
		clock.Advance(4 * time.Second)
		require.Equal(t, `"a";r=2;t=6`, call(h).Header.Get("RateLimit"), "the window opened by the 413")
	})
	t.Run("a request another policy refuses opens the window", func(t *testing.T) {
		h, clock := newHandler(t,
			rlt.WithQuota(rlt.Quota{Name: "a", Limit: 3, Window: 10 * time.Second, Anchor: rlt.AnchorFirstRequest}),
			rlt.WithQuota(rlt.Quota{Name: "b", Limit: 1, Window: time.Minute}))
		res := call(h)
		require.Equal(t, 200, res.StatusCode)
		require.Equal(t, `"a";r=2;t=10, "b";r=0;t=60`, res.Header.Get("RateLimit"))
		clock.Advance(10 * time.Second) // 12:00:10.25: a's window has ended, b's minute has not
		res = call(h)
		require.Equal(t, 429, res.StatusCode)
		require.Equal(t, "50", res.Header.Get("Retry-After"))
		require.Equal(t, `"a";r=3;t=10, "b";r=0;t=50`, res.Header.Get("RateLimit"))
		clock.Advance(4 * time.Second)
		require.Equal(t, `"a";r=3;t=6, "b";r=0;t=46`, call(h).Header.Get("RateLimit"))
	})
	t.Run("a sliding counter's windows follow on from the first request", func(t *testing.T) {
		// go-chi/httprate's: they start when the limiter does, off the
		// clock's seconds, and do not wait for a request after an idle
		// spell, as an anchored fixed window's does.
		h, clock := newHandler(t, rlt.WithQuota(rlt.Quota{Algorithm: rlt.SlidingCounter, Limit: 4, Window: time.Second, Anchor: rlt.AnchorFirstRequest}))
		require.Equal(t, []int{200, 200, 200, 200, 429}, statuses(h, 5)) // 12:00:00.25: the window is [00.25, 01.25)
		clock.Advance(900 * time.Millisecond)                            // 01.15: on the clock, a new window would weigh the first 0.85 and admit one
		require.Equal(t, 429, call(h).StatusCode, "still the first window")
		clock.Advance(350 * time.Millisecond) // 01.50: a quarter into the second window, the first weighs 3/4 of 4
		require.Equal(t, []int{200, 429}, statuses(h, 2))
		clock.Advance(3 * time.Second) // 04.50: idle; the windows went on, [04.25, 05.25) now, the one before empty
		require.Equal(t, []int{200, 200, 200, 200, 429}, statuses(h, 5))
	})
	t.Run("every algorithm but fixed-window and sliding-counter refuses it", func(t *testing.T) {
		for _, alg := range rlt.Algorithms() {
			_, err := rlt.NewHandler(nil, rlt.WithQuota(rlt.Quota{Algorithm: alg, Limit: 1, Window: time.Second, Anchor: rlt.AnchorFirstRequest}))
			if alg == rlt.FixedWindow || alg == rlt.SlidingCounter {
				require.NoError(t, err)
				continue
			}
			require.EqualError(t, err, "ratelimittest: policy 1: anchor first-request: only fixed-window and sliding-counter have windows to start at a key's first request, not "+string(alg))
		}
		_, err := rlt.NewHandler(nil, rlt.WithQuota(rlt.Quota{Limit: 1, Window: time.Second, Anchor: "midnight"}))
		require.EqualError(t, err, `ratelimittest: policy 1: unknown anchor "midnight" (want one of clock, first-request, start)`)
	})
	t.Run("the clock anchor is the default", func(t *testing.T) {
		for _, a := range []rlt.Anchor{"", rlt.AnchorClock} {
			h, _ := newHandler(t, rlt.WithDialect(rlt.OpenAI), rlt.WithQuota(rlt.Quota{Limit: 3, Window: time.Second, Anchor: a}))
			require.Equal(t, "750ms", call(h).Header.Get("X-Ratelimit-Reset-Requests"))
		}
	})
}

// TestStartedWindows: AnchorStart's fixed windows follow one another from a
// key's first request, busy or idle, as sethvargo/go-limiter's ticks do:
// off the clock's multiples of the window, and not reopened by the first
// request after an idle spell (AnchorFirstRequest).
func TestStartedWindows(t *testing.T) {
	q := rlt.Quota{Limit: 2, Window: 200 * time.Millisecond, Anchor: rlt.AnchorStart}
	h, clock := newHandler(t, rlt.WithDialect(rlt.OpenAI), rlt.WithQuota(q))
	require.Equal(t, []int{200, 200, 429}, statuses(h, 3)) // 12:00:00.25: the window is [00.25, 00.45)
	clock.Advance(199 * time.Millisecond)
	res := call(h)
	require.Equal(t, 429, res.StatusCode)
	require.Equal(t, "1ms", res.Header.Get("X-Ratelimit-Reset-Requests"))
	clock.Advance(time.Millisecond) // 00.45: the next window, on from the first
	require.Equal(t, []int{200, 200, 429}, statuses(h, 3))
	clock.Advance(1030 * time.Millisecond) // 01.48, idle since: the window is [01.45, 01.65)
	res = call(h)
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "170ms", res.Header.Get("X-Ratelimit-Reset-Requests"), "not [01.4, 01.6) on the clock, nor [01.48, 01.68) from this request")
	require.Contains(t, h.String(), "(windows on from each key's first request)")

	for _, alg := range rlt.Algorithms() {
		_, err := rlt.NewHandler(nil, rlt.WithQuota(rlt.Quota{Algorithm: alg, Limit: 1, Window: time.Second, Anchor: rlt.AnchorStart}))
		if alg == rlt.FixedWindow {
			require.NoError(t, err)
			continue
		}
		require.EqualError(t, err, "ratelimittest: policy 1: anchor start: only fixed-window has windows to start at a key's first request and follow on from there, not "+string(alg))
	}
}

func TestParseAnchor(t *testing.T) {
	for in, want := range map[string]rlt.Anchor{
		"clock": rlt.AnchorClock, " First_Request ": rlt.AnchorFirstRequest, "first": rlt.AnchorFirstRequest,
		"aligned": rlt.AnchorClock, "": rlt.AnchorClock, "Start": rlt.AnchorStart,
	} {
		got, err := rlt.ParseAnchor(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := rlt.ParseAnchor("midnight")
	require.EqualError(t, err, `ratelimittest: unknown anchor "midnight" (want one of clock, first-request, start)`)
}

// Concurrent first requests of many keys: each key gets exactly its quota
// in its own window, whatever the interleaving.
func TestAnchoredWindowsUnderConcurrency(t *testing.T) {
	h, clock := newHandler(t, rlt.WithPartition(rlt.ByHeader("K")), rlt.WithDialect(rlt.XRateLimit, rlt.OpenAI),
		rlt.WithQuota(rlt.Quota{Limit: 7, Window: time.Minute, Anchor: rlt.AnchorFirstRequest}),
		rlt.WithRetryAfterFullWindow(), rlt.WithCoarseResets(), rlt.WithResetAlwaysOne())
	keys := []string{"a", "b", "c", "d"}
	for round := range 2 {
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := range 10 {
					res := call(h, "K", keys[(g+i)%len(keys)])
					if res.StatusCode == 429 {
						require.Equal(t, "60", res.Header.Get("Retry-After"))
					}
					require.Equal(t, "1s", res.Header.Get("X-Ratelimit-Reset-Requests"))
				}
			})
		}
		wg.Wait()
		st := h.Stats()
		for _, k := range keys {
			require.Equal(t, rlt.KeyStats{Served: int64(7 * (round + 1)), Rejected: int64(33 * (round + 1))}, st.Keys[k], "round %d, key %s", round, k)
		}
		clock.Advance(time.Minute)
	}
}

package ratelimittest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	rlt "github.com/headway-go/headway/ratelimittest"
)

// aligned is on a whole second, so that clock-aligned windows start there.
var aligned = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func get() *http.Request { return httptest.NewRequest(http.MethodGet, "http://api.test/v1/items", nil) }

// WithChargeRefused, per algorithm: 4 per second (burst 4); 4 requests at
// 0, then 6 at 0.5s. The windows refuse all six (the buckets and GCRA have
// refilled two units and refuse four). Without the option the next request
// fits as soon as the quota comes back; with it, the refused requests were
// charged and the wait is longer, except in a fixed window, which forgets
// its count at its end either way. The wait is exact: Fits says no a
// nanosecond before it, yes at it, and the last refusal's reset (OpenAI's,
// in milliseconds rounded up) says the same.
func TestChargeRefused(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		policy   rlt.Quota
		admitted int
		// The wait after the hammer at 0.5s, and the last refusal's reset.
		free, charged           time.Duration
		freeReset, chargedReset string
		why                     string
	}{
		{"fixed window", rlt.Quota{Algorithm: rlt.FixedWindow}, 4, 500 * ms, 500 * ms, "500ms", "500ms",
			"the count passes the limit and is forgotten at the window's end"},
		{"anchored window", rlt.Quota{Algorithm: rlt.FixedWindow, Anchor: rlt.AnchorFirstRequest}, 4, 500 * ms, 500 * ms, "500ms", "500ms",
			"as the fixed window: the window opened at 0 ends at 1s"},
		{"sliding log", rlt.Quota{Algorithm: rlt.SlidingLog}, 4, 500 * ms, time.Second, "500ms", "1s",
			"the six refusals at 0.5s push the four admissions at 0 out of the log: the next unit frees at 1.5s"},
		{"sliding counter", rlt.Quota{Algorithm: rlt.SlidingCounter}, 4, 500*ms + 1, 1100*ms + 1, "501ms", "1.101s",
			"the window holds 10, not 4: in the next one 10*(1-e)+1 < 5 needs e > 0.6s"},
		{"token bucket", rlt.Quota{Algorithm: rlt.TokenBucket}, 6, 250 * ms, 1250 * ms, "250ms", "1.25s",
			"four refusals take four tokens the bucket does not have: level -4, five tokens to a request"},
		{"leaky bucket", rlt.Quota{Algorithm: rlt.LeakyBucket}, 6, 250 * ms, 1250 * ms, "250ms", "1.25s",
			"the bucket holds 8 of 4: five units must leak"},
		{"gcra", rlt.Quota{Algorithm: rlt.GCRA}, 6, 250 * ms, 1250 * ms, "250ms", "1.25s",
			"TAT moves from 1.5s to 2.5s (the cap, 2s ahead); conforming at TAT-0.75s"},
	} {
		for _, charge := range []bool{false, true} {
			name := tc.name + "/free"
			if charge {
				name = tc.name + "/charged"
			}
			t.Run(name, func(t *testing.T) {
				p := tc.policy
				p.Limit, p.Window = 4, time.Second
				clock := rlt.NewManualClock(aligned)
				opts := []rlt.Option{rlt.WithClock(clock), rlt.WithQuota(p), rlt.WithDialect(rlt.OpenAI)}
				if charge {
					opts = append(opts, rlt.WithChargeRefused())
				}
				h, err := rlt.NewHandler(nil, opts...)
				require.NoError(t, err)
				require.Equal(t, repeat(200, 4), statuses(h, 4))
				clock.Advance(500 * ms)
				var got []int
				var last *http.Response
				for range 6 {
					last = call(h)
					got = append(got, last.StatusCode)
				}
				require.Equal(t, append(repeat(200, tc.admitted-4), repeat(429, 10-tc.admitted)...), got)
				st := h.Stats()
				require.Equal(t, int64(tc.admitted), st.Served, "a charged refusal is not served")
				require.Equal(t, int64(10-tc.admitted), st.Rejected)
				require.Len(t, h.Admissions(), tc.admitted, "nor logged")

				want, reset := tc.free, tc.freeReset
				if charge {
					want, reset = tc.charged, tc.chargedReset
				}
				require.Equal(t, reset, last.Header.Get("X-Ratelimit-Reset-Requests"), "the last refusal's reset: %s", tc.why)
				ok, wait := h.Fits(get())
				require.False(t, ok)
				require.Equal(t, want, wait, tc.why)
				for range 3 { // asking is free
					ok, again := h.Fits(get())
					require.False(t, ok)
					require.Equal(t, wait, again)
				}
				clock.Advance(wait - 1)
				ok, _ = h.Fits(get())
				require.False(t, ok, "a nanosecond early")
				clock.Advance(1)
				ok, wait = h.Fits(get())
				require.True(t, ok)
				require.Zero(t, wait)
				require.Equal(t, 200, call(h).StatusCode)
			})
		}
	}
}

// A refusal by one policy is charged to the others too: 2 per second and 5
// per 10 seconds; two refusals at 0 spend the 10-second quota, so at 1s only
// one request fits it instead of two.
func TestChargeRefusedSpendsEveryPolicy(t *testing.T) {
	for _, charge := range []bool{false, true} {
		clock := rlt.NewManualClock(aligned)
		opts := []rlt.Option{rlt.WithClock(clock),
			rlt.WithQuota(rlt.Quota{Limit: 2, Window: time.Second}),
			rlt.WithQuota(rlt.Quota{Limit: 5, Window: 10 * time.Second})}
		if charge {
			opts = append(opts, rlt.WithChargeRefused())
		}
		h, err := rlt.NewHandler(nil, opts...)
		require.NoError(t, err)
		require.Equal(t, []int{200, 200, 429, 429}, statuses(h, 4))
		clock.Advance(time.Second)
		if charge {
			require.Equal(t, []int{200, 429}, statuses(h, 2), "the 10s window counts 5: four at 0 and this one")
			ok, wait := h.Fits(get())
			require.False(t, ok)
			require.Equal(t, 9*time.Second, wait, "the 10-second window's end; the refusal at 1s moved nothing")
		} else {
			require.Equal(t, []int{200, 200}, statuses(h, 2))
		}
	}
}

// Fits charges nothing, opens no anchored window and keeps no state for a
// key it has not seen; a request costing more than the quota can ever admit
// is neither admitted by it nor charged by a refusal.
func TestFits(t *testing.T) {
	t.Run("anchored window", func(t *testing.T) {
		clock := rlt.NewManualClock(aligned)
		h, err := rlt.NewHandler(nil, rlt.WithClock(clock), rlt.WithChargeRefused(),
			rlt.WithQuota(rlt.Quota{Limit: 1, Window: time.Second, Anchor: rlt.AnchorFirstRequest}))
		require.NoError(t, err)
		for range 3 {
			ok, wait := h.Fits(get())
			require.True(t, ok)
			require.Zero(t, wait)
		}
		clock.Advance(500 * time.Millisecond)
		require.Equal(t, []int{200, 429}, statuses(h, 2), "the window opens at 0.5s, not at the first Fits")
		ok, wait := h.Fits(get())
		require.False(t, ok)
		require.Equal(t, time.Second, wait)
		st := h.Stats()
		require.Equal(t, int64(1), st.Served)
		require.Equal(t, int64(1), st.Rejected)
	})
	t.Run("cost beyond the capacity", func(t *testing.T) {
		clock := rlt.NewManualClock(aligned)
		h, err := rlt.NewHandler(nil, rlt.WithClock(clock), rlt.WithChargeRefused(),
			rlt.WithQuota(rlt.Quota{Algorithm: rlt.TokenBucket, Limit: 4, Window: time.Second, Cost: rlt.CostFromHeader("X-Cost", 1)}))
		require.NoError(t, err)
		big := get()
		big.Header.Set("X-Cost", "5")
		ok, wait := h.Fits(big)
		require.False(t, ok)
		require.Negative(t, wait, "no wait would admit it")
		require.Equal(t, http.StatusRequestEntityTooLarge, call(h, "X-Cost", "5").StatusCode)
		require.Equal(t, []int{200, 200, 200, 200, 429}, statuses(h, 5), "the 413 charged nothing")
	})
	t.Run("partitions", func(t *testing.T) {
		clock := rlt.NewManualClock(aligned)
		h, err := rlt.NewHandler(nil, rlt.WithClock(clock), rlt.WithPartition(rlt.ByHeader("K")),
			rlt.WithQuota(rlt.Quota{Limit: 1, Window: time.Second}))
		require.NoError(t, err)
		require.Equal(t, 200, call(h, "K", "a").StatusCode)
		a, b := get(), get()
		a.Header.Set("K", "a")
		b.Header.Set("K", "b")
		ok, wait := h.Fits(a)
		require.False(t, ok)
		require.Equal(t, time.Second, wait)
		ok, _ = h.Fits(b)
		require.True(t, ok, "another key's quota")
		require.Len(t, h.Stats().Keys, 1, "asking about b kept nothing")
	})
}

func TestChargeRefusedString(t *testing.T) {
	h, err := rlt.NewHandler(nil, rlt.WithChargeRefused())
	require.NoError(t, err)
	require.Equal(t, "fixed-window 10 requests per 1s, one shared quota; headers ietf; "+
		"rejections 429 with Retry-After seconds, charged to the quota", h.String())
}

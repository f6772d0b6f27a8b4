package headway_test

// The pacing layer end to end, in virtual time: every test runs in a
// testing/synctest bubble, where time.Now, sleeps and timers are fake and
// time jumps ahead whenever every goroutine waits, so a minute of traffic
// costs milliseconds. The server is ratelimittest's, over an in-memory
// transport (internal/testkit/sim).

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/testkit/sim"
	"github.com/headway-go/headway/ratelimit"
	rlt "github.com/headway-go/headway/ratelimittest"
)

func simRun(t *testing.T, s sim.Scenario) (r sim.Result) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) { r = sim.Run(s) })
	return r
}

// TestPacingTargets guards the simulation's results for the algorithms and
// dialects whose figures meet the targets (see internal/testkit/sim for the
// whole table): 300 requests from 16 workers into 50 per second, 20 ms
// round trips.
func TestPacingTargets(t *testing.T) {
	p := func(alg rlt.Algorithm) rlt.Quota { return rlt.Quota{Algorithm: alg, Limit: 50, Window: time.Second} }
	for _, tc := range []struct {
		alg          rlt.Algorithm
		dialect      rlt.Dialect
		max429, maxX float64
	}{
		{rlt.FixedWindow, rlt.IETF, 0.01, 1.05},
		{rlt.FixedWindow, rlt.XRateLimit, 0.01, 1.05},
		{rlt.FixedWindow, rlt.GitHub, 0.01, 1.05},
		{rlt.TokenBucket, rlt.IETF, 0.01, 1.05},
		{rlt.TokenBucket, rlt.OpenAI, 0.01, 1.05},
		{rlt.GCRA, rlt.XRateLimit, 0.01, 1.05},
		{rlt.LeakyBucket, rlt.Anthropic, 0.01, 1.05},
		// The first burst is refused beyond the limit, the search for
		// the server a few more: 2.9% and 1.02x in the median of 800
		// runs (4.5% and 1.05x at worst). Before the silent model took
		// the admitted answers of an instant before its refusals, the
		// server's bucket was refuted in some orders: 5.4% and 1.09x in
		// the median, up to 4.3x (8 of 400 runs beyond 1.5x).
		{rlt.TokenBucket, rlt.None, 0.06, 1.2},
	} {
		t.Run(fmt.Sprintf("%s/%s", tc.alg, tc.dialect), func(t *testing.T) {
			r := simRun(t, sim.Scenario{Policy: p(tc.alg), Dialect: tc.dialect, RTT: 20 * time.Millisecond})
			require.Zero(t, r.Failed, "%v", r.Errors)
			require.LessOrEqual(t, r.ThrottledShare(), tc.max429, "%v", r)
			require.LessOrEqual(t, r.Slowdown(), tc.maxX, "%v", r)

			bare := simRun(t, sim.Scenario{Policy: p(tc.alg), Dialect: tc.dialect, RTT: 20 * time.Millisecond,
				Options2: []headway.Option{headway.WithoutPacing()}})
			require.Greater(t, bare.ThrottledShare(), 0.15, "without pacing the same run is refused often: %v", bare)
		})
	}
}

// TestThousandGoroutinesIntoFiftyPerSecond: 1,000 goroutines each send one
// GET with a 60 s timeout into a 50/s API. Without pacing most fail (the
// pause releases the whole herd at one instant); with pacing every one
// succeeds in about 20 s, with no 429.
func TestThousandGoroutinesIntoFiftyPerSecond(t *testing.T) {
	s := sim.Scenario{Policy: rlt.Quota{Limit: 50, Window: time.Second}, Dialect: rlt.IETF,
		Requests: 1000, Workers: 1000, RTT: 20 * time.Millisecond}
	r := simRun(t, s)
	require.Equal(t, 1000, r.Succeeded, "%v", r.Errors)
	require.LessOrEqual(t, r.ThrottledShare(), 0.01, "%v", r)
	require.LessOrEqual(t, r.Slowdown(), 1.10, "%v", r)
	require.Less(t, r.Wall, 21*time.Second)

	s.Options2 = []headway.Option{headway.WithoutPacing()}
	bare := simRun(t, s)
	require.Greater(t, bare.Failed, 500, "%v", bare)
}

// TestTenThousandGoroutinesOnOneKey stays correct under -race: every
// request succeeds, none is refused, and the key's quota is never exceeded.
func TestTenThousandGoroutinesOnOneKey(t *testing.T) {
	r := simRun(t, sim.Scenario{Policy: rlt.Quota{Algorithm: rlt.TokenBucket, Limit: 2000, Window: time.Second},
		Dialect: rlt.IETF, Requests: 10000, Workers: 10000, RTT: 10 * time.Millisecond})
	require.Equal(t, 10000, r.Succeeded, "%v", r.Errors)
	require.LessOrEqual(t, r.ThrottledShare(), 0.01, "%v", r)
}

// TestDeclaredQuotas: WithQuota enforces limits known from an API's
// documentation before any header arrives (the server here sends none), per
// route pattern: 10 per minute on POST /games, 120 per minute on GET
// /games/{id}, and nothing on other routes.
func TestDeclaredQuotas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		sent := map[string][]time.Time{}
		api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			sent[r.Method+" "+r.URL.Path[:min(len(r.URL.Path), 7)]] = append(sent[r.Method+" "+r.URL.Path[:min(len(r.URL.Path), 7)]], time.Now())
			mu.Unlock()
		})
		client := &http.Client{Transport: headway.NewTransport(sim.Transport{Handler: api, RTT: 10 * time.Millisecond},
			headway.WithQuota("POST api.test/games", 10, time.Minute),
			headway.WithQuota("GET api.test/games/{id}", 120, time.Minute, 20),
			headway.WithMaxWait(5*time.Minute))}
		var wg sync.WaitGroup
		do := func(method, url string) {
			defer wg.Done()
			req, _ := http.NewRequest(method, url, nil)
			resp, err := client.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		start := time.Now()
		for i := range 25 {
			wg.Add(3)
			go do(http.MethodPost, "http://api.test/games")
			go do(http.MethodGet, "http://api.test/games/"+strconv.Itoa(i))
			go do(http.MethodGet, "http://api.test/other")
		}
		wg.Wait()
		within := func(ts []time.Time, window time.Duration) int { // the most in any window
			most := 0
			for i := range ts {
				n := 0
				for _, u := range ts[i:] {
					if u.Sub(ts[i]) < window {
						n++
					}
				}
				most = max(most, n)
			}
			return most
		}
		posts, gets, others := sent["POST /games"], sent["GET /games/"], sent["GET /other"]
		require.Len(t, posts, 25)
		require.Len(t, gets, 25)
		require.Len(t, others, 25)
		require.Equal(t, 10, within(posts, time.Minute), "at most 10 POSTs in any minute, and the first 10 at once")
		require.GreaterOrEqual(t, posts[24].Sub(start), 2*time.Minute, "25 POSTs at 10 per minute take two minutes")
		require.LessOrEqual(t, within(gets, time.Second), 22, "the GETs: a burst of 20, then 2 per second")
		require.Less(t, gets[24].Sub(start), 5*time.Second, "the GETs are not held back by the POSTs' quota")
		require.Less(t, others[24].Sub(start), time.Second, "undeclared routes are not paced")
	})
}

func TestWithQuotaRefusesNonsense(t *testing.T) {
	require.Panics(t, func() { headway.WithQuota("GET /x/{", 1, time.Second) })
	require.Panics(t, func() { headway.WithQuota("/x", 0, time.Second) })
	require.Panics(t, func() { headway.WithQuota("/x", 1, 0) })
	require.Panics(t, func() { headway.WithQuota("/x", 1, time.Second, 1, 2) })
	require.NotPanics(t, func() { headway.WithQuota("/x", 1, time.Second) })
}

// TestRequestCosts: an OpenAI-style tokens-per-minute quota, whose cost each
// request declares with ContextWithCost, is spent without a refusal: the
// requests wait until the policy in that unit has room.
func TestRequestCosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
		h, err := rlt.NewHandler(api, rlt.WithDialect(rlt.OpenAI),
			rlt.WithQuota(rlt.Quota{Limit: 1000, Window: time.Minute}),
			rlt.WithQuota(rlt.Quota{Limit: 10000, Window: time.Minute, Unit: rlt.UnitTokens, Cost: rlt.CostFromHeader("X-Tokens", 0)}))
		require.NoError(t, err)
		client := &http.Client{Transport: headway.NewTransport(sim.Transport{Handler: h, RTT: 20 * time.Millisecond}, headway.WithMaxWait(2*time.Minute))}
		var wg sync.WaitGroup
		var failed atomic.Int32
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					ctx := headway.ContextWithCost(context.Background(), ratelimit.UnitTokens, 1500)
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/v1/chat", nil)
					req.Header.Set("X-Tokens", "1500")
					resp, err := client.Do(req)
					if err != nil || resp.StatusCode != 200 {
						failed.Add(1)
					}
					if err == nil {
						resp.Body.Close()
					}
				}
			}()
		}
		wg.Wait()
		require.Zero(t, failed.Load())
		st := h.Stats()
		require.EqualValues(t, 40, st.Served)
		require.Zero(t, st.Rejected, "the token quota was never overdrawn")
	})
}

// TestWaitsAreReported: WithOnWait says why a request is held back, and a
// wait that cannot fit fails at once with a *RateLimitError saying how long
// it would have waited and why; nothing is sent.
func TestWaitsAreReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
		h, err := rlt.NewHandler(api, rlt.WithDialect(rlt.IETF), rlt.WithQuota(rlt.Quota{Limit: 2, Window: time.Minute}))
		require.NoError(t, err)
		var mu sync.Mutex
		var events []headway.WaitEvent
		client := &http.Client{Transport: headway.NewTransport(sim.Transport{Handler: h, RTT: 10 * time.Millisecond},
			headway.WithMaxWait(10*time.Second),
			headway.WithOnWait(func(e headway.WaitEvent) { mu.Lock(); events = append(events, e); mu.Unlock() }))}
		for range 2 {
			resp, err := client.Get("http://api.test/x")
			require.NoError(t, err)
			resp.Body.Close()
		}
		_, err = client.Get("http://api.test/x")
		var rle *headway.RateLimitError
		require.ErrorAs(t, err, &rle)
		require.Zero(t, rle.StatusCode, "not sent")
		require.Equal(t, headway.ReasonWaitTooLong, rle.Reason)
		require.Greater(t, rle.Wait, 50*time.Second)
		require.Contains(t, rle.Why, "quota exhausted", "held back for the server's quota, not a pause")
		require.Contains(t, rle.Why, `"2-per-1m0s"`, "the quota is named")
		require.Contains(t, rle.Error(), "not sent: it would have waited")
		require.EqualValues(t, 2, h.Stats().Served+h.Stats().Rejected, "the third request never left")
		require.Empty(t, events, "a wait refused at once is not reported as a wait")
	})
}

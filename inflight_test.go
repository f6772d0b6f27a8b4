package headway_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/testkit/sim"
)

// concurrencyAPI allows at most limit requests at once, and refuses the
// others with a 429 and no rate-limit headers, as an API that limits
// concurrent requests does; each takes hold.
type concurrencyAPI struct {
	limit         int64
	hold          time.Duration
	now, most     atomic.Int64
	served, refus atomic.Int64
}

func (a *concurrencyAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := a.now.Add(1)
	defer a.now.Add(-1)
	if n > a.limit {
		a.refus.Add(1)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	for {
		m := a.most.Load()
		if n <= m || a.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(a.hold)
	a.served.Add(1)
}

// TestWithMaxInFlight: a server that allows 4 requests at once, 16 workers
// sending 160 requests of 100 ms each: with WithMaxInFlight(4) none is
// refused and the run takes the 4 s that 4 at a time allow.
func TestWithMaxInFlight(t *testing.T) {
	run := func(t *testing.T, opts ...headway.Option) (*concurrencyAPI, time.Duration, int64) {
		api := &concurrencyAPI{limit: 4, hold: 100 * time.Millisecond}
		rt := headway.NewTransport(sim.Transport{Handler: api, RTT: 2 * time.Millisecond},
			append([]headway.Option{headway.WithMaxWait(time.Minute)}, opts...)...)
		start := time.Now()
		failed := hammer(rt, 16, 10)
		return api, time.Since(start), failed
	}
	synctest.Test(t, func(t *testing.T) {
		api, wall, failed := run(t, headway.WithMaxInFlight(4))
		require.Zero(t, failed)
		require.Zero(t, api.refus.Load(), "none refused")
		require.Equal(t, int64(160), api.served.Load())
		require.LessOrEqual(t, api.most.Load(), int64(4))
		require.Less(t, wall, 4500*time.Millisecond, "4 at a time, 102 ms each: about 4.1 s")
	})
	synctest.Test(t, func(t *testing.T) {
		// A pattern caps only what it matches: the GETs learn the
		// server's cap (learncap.go), which costs a refusal.
		api, _, _ := run(t, headway.WithMaxInFlight(4, "POST api.test/"))
		require.Positive(t, api.refus.Load(), "GETs are not capped by a cap on POSTs")
	})
}

// TestWithMaxInFlightReleases: a request that fails, or gives up while it
// waits for room, gives its place back: with a cap of 1, a transport error
// and a cancelled waiter leave room for the next request at once.
func TestWithMaxInFlightReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		release := make(chan struct{})
		rt := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			switch calls.Add(1) {
			case 1:
				return nil, errors.New("connection reset")
			case 2:
				<-release // holds the one place
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
		})
		client := &http.Client{Transport: headway.NewTransport(rt, headway.WithMaxInFlight(1), headway.WithoutRetries())}
		_, err := client.Get("http://api.test/a")
		require.Error(t, err)
		done := make(chan error, 1)
		go func() {
			resp, err := client.Get("http://api.test/b") // takes the place the failure gave back
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		synctest.Wait()
		require.Equal(t, int64(2), calls.Load(), "the place the failed request held was given back")

		ctx, cancel := context.WithCancel(context.Background())
		waiter := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/c", nil)
			_, err := client.Do(req)
			waiter <- err
		}()
		synctest.Wait()
		require.Equal(t, int64(2), calls.Load(), "c waits for room")
		cancel()
		err = <-waiter
		var rle *headway.RateLimitError
		require.ErrorAs(t, err, &rle)
		require.Equal(t, headway.ReasonCanceled, rle.Reason)
		require.Contains(t, rle.Why, "WithMaxInFlight")

		close(release)
		require.NoError(t, <-done)
		resp, err := client.Get("http://api.test/d")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, int64(3), calls.Load())
	})
}

// TestWithMaxInFlightRefusesNonsense: a cap below 1 or an invalid pattern is
// a programming error.
func TestWithMaxInFlightRefusesNonsense(t *testing.T) {
	require.Panics(t, func() { headway.WithMaxInFlight(0) })
	require.Panics(t, func() { headway.WithMaxInFlight(1, "GET /{") })
}

// roundTripFunc is a function that is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestLearntConcurrencyCap: a server that allows a few requests at once,
// refuses the others with a 429 and says nothing of its limits, and
// workers that send more at once than it allows. Without WithMaxInFlight,
// headway learns the cap (learncap.go) at the cost of a refusal or two,
// and serves within a sixth of the time the cap allows where the cap is 4
// or less (the window grows by one a round trip at first, by an eighth of
// itself from 8: a larger cap costs a few more refusals and round trips;
// the bounds leave room for the race detector's scheduling). Before, 16 workers into a cap of 4 earned
// 15 refusals, and the rate the silent model learnt from them took 8.9 s
// for 160 requests where 4.1 s is possible.
func TestLearntConcurrencyCap(t *testing.T) {
	for _, tc := range []struct {
		limit, workers, each int
		hold, rtt            time.Duration
		maxRefused           int64
		maxOverIdeal         float64
	}{
		{4, 16, 10, 100 * time.Millisecond, 2 * time.Millisecond, 2, 1.15},
		{4, 16, 10, 20 * time.Millisecond, 20 * time.Millisecond, 2, 1.25},
		{2, 8, 20, 30 * time.Millisecond, 5 * time.Millisecond, 2, 1.15},
		{8, 32, 10, 50 * time.Millisecond, 10 * time.Millisecond, 4, 1.4},
		{16, 64, 10, 100 * time.Millisecond, 20 * time.Millisecond, 6, 1.6},
	} {
		synctest.Test(t, func(t *testing.T) {
			api := &concurrencyAPI{limit: int64(tc.limit), hold: tc.hold}
			rt := headway.NewTransport(sim.Transport{Handler: api, RTT: tc.rtt},
				headway.WithMaxWait(time.Minute), headway.WithRandSource(rand.NewPCG(1, 2)))
			start := time.Now()
			failed := hammer(rt, tc.workers, tc.each)
			wall := time.Since(start)
			ideal := time.Duration(tc.workers*tc.each/tc.limit) * (tc.hold + tc.rtt)
			t.Logf("cap %d, %d workers: %d refused, wall %v (%.2fx the %v the cap allows)",
				tc.limit, tc.workers, api.refus.Load(), wall, float64(wall)/float64(ideal), ideal)
			require.Zero(t, failed)
			require.EqualValues(t, tc.workers*tc.each, api.served.Load())
			require.LessOrEqual(t, api.refus.Load(), tc.maxRefused, "learning the cap costs a refusal or two")
			require.LessOrEqual(t, float64(wall), tc.maxOverIdeal*float64(ideal))
		})
	}
}

// TestLearntCapLeavesNamedQuotas: a key whose answers name a quota has no
// window: once its first answer came, 16 workers have 16 requests in
// flight at once.
func TestLearntCapLeavesNamedQuotas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var now, most atomic.Int64
		api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := now.Add(1)
			defer now.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			w.Header().Set("RateLimit-Policy", `"default";q=100000;w=60`)
			w.Header().Set("RateLimit", `"default";r=99999;t=60`)
			time.Sleep(100 * time.Millisecond)
		})
		rt := headway.NewTransport(sim.Transport{Handler: api, RTT: 2 * time.Millisecond})
		require.Zero(t, hammer(rt, 16, 4))
		require.EqualValues(t, 16, most.Load())
	})
}

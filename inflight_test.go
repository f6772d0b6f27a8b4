package headway_test

import (
	"context"
	"errors"
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
// refused and the run takes the 4 s that 4 at a time allow; without it,
// many are refused.
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
		api, _, _ := run(t)
		require.Greater(t, api.refus.Load(), int64(10), "without the cap the server refuses")
	})
	synctest.Test(t, func(t *testing.T) {
		// A pattern caps only what it matches.
		api, _, _ := run(t, headway.WithMaxInFlight(4, "POST api.test/"))
		require.Greater(t, api.refus.Load(), int64(10), "GETs are not capped by a cap on POSTs")
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

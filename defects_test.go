package headway

// Defects found when headway was tried as a new user would; each test here
// failed before its fix.

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/ratelimittest"
)

// TestWrapTwiceDoesNotStack: wrapping a client that headway already wraps
// replaces its layers. Stacked, one GET against an always-503 server made 14
// attempts at depth 2 and 25 at depth 3, and Stats counted every attempt
// once per layer.
func TestWrapTwiceDoesNotStack(t *testing.T) {
	loNoLeaks(t)
	var hits atomic.Int32
	status := atomic.Int32{}
	status.Store(http.StatusServiceUnavailable)
	srv := loServe(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(int(status.Load()))
	})
	base := &http.Client{Transport: loBase(t)}
	opts := []Option{WithClock(loAutoClock()), WithRetryBudget(nil)}
	for depth, c := range []*http.Client{Wrap(base, opts...), Wrap(Wrap(base, opts...), opts...), Wrap(Wrap(Wrap(base, opts...), opts...), opts...)} {
		hits.Store(0)
		status.Store(http.StatusServiceUnavailable)
		req, st := loRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
		resp, err := c.Do(req)
		require.NoError(t, err)
		loCloseBody(t, resp)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.EqualValues(t, DefaultMaxAttempts, hits.Load(), "depth %d", depth+1)
		require.Equal(t, DefaultMaxAttempts, st.Attempts, "depth %d", depth+1)

		status.Store(http.StatusOK)
		total := 0
		for range 10 {
			req, st := loRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
			resp, err := c.Do(req)
			require.NoError(t, err)
			loCloseBody(t, resp)
			total += st.Attempts
		}
		require.Equal(t, 10, total, "depth %d", depth+1)
	}
	// New's transport is recognised too, and the newer options win.
	c := Wrap(New(WithMaxAttempts(7), WithClock(loAutoClock())), WithMaxAttempts(2), WithClock(loAutoClock()), WithRetryBudget(nil))
	hits.Store(0)
	status.Store(http.StatusServiceUnavailable)
	req, _ := loRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
	resp, err := c.Do(req)
	require.NoError(t, err)
	loCloseBody(t, resp)
	require.EqualValues(t, 2, hits.Load())
	c.CloseIdleConnections()
}

// TestHTTP2StreamResetIsRetried: ratelimittest's dropped-connection fault
// on a TLS server with HTTP/2 resets the stream (INTERNAL_ERROR). Over
// HTTP/1.1 the same fault closes the connection and a GET is retried; over
// HTTP/2 it used to end the request at once.
func TestHTTP2StreamResetIsRetried(t *testing.T) {
	loNoLeaks(t)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	srv := ratelimittest.NewUnstartedServer(api,
		ratelimittest.WithQuota(ratelimittest.Quota{Limit: 1000, Window: time.Second}),
		ratelimittest.WithDroppedConnections(1)) // every admitted request is dropped
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	base := srv.Client().Transport.(*http.Transport)
	t.Cleanup(base.CloseIdleConnections)
	rt := NewTransport(base, WithClock(loAutoClock()), WithRetryBudget(nil))

	req, st := loRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
	resp, err := rt.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorContains(t, err, "INTERNAL_ERROR")
	var re *RetryError
	require.ErrorAs(t, err, &re)
	require.Equal(t, ReasonAttemptsExhausted, re.Reason)
	require.Equal(t, DefaultMaxAttempts, st.Attempts, "a reset stream is retried like a dropped connection")
	require.EqualValues(t, DefaultMaxAttempts, srv.Stats().Dropped)

	// A POST was written and may have been processed: not repeated.
	req, st = loRequest(t, context.Background(), http.MethodPost, srv.URL, strings.NewReader("order=1"))
	_, err = rt.RoundTrip(req)
	require.ErrorContains(t, err, "INTERNAL_ERROR")
	require.Equal(t, 1, st.Attempts)
}

// TestTruncatedHeadIsRetried: a connection that closes in the middle of the
// status line or of a header line reads as a malformed response; it is
// retried for a GET, as a clean close at the same point is. A response that
// is not HTTP at all is not.
func TestTruncatedHeadIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name, head string
		attempts   int
	}{
		{"mid status code", "HTTP/1.1 42", DefaultMaxAttempts},
		{"mid header line", "HTTP/1.1 200 OK\r\nContent-Ty", DefaultMaxAttempts},
		{"clean close after a header", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n", DefaultMaxAttempts},
		{"not HTTP", "garbage garbage garbage\r\n\r\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loNoLeaks(t)
			srv := loServeRaw(t, func(c net.Conn) {
				if loReadRequest(c) == nil {
					io.WriteString(c, tc.head)
				}
				c.Close()
			})
			rt, _ := loTransport(t, loAutoClock(), WithRetryBudget(nil))
			req, st := loRequest(t, context.Background(), http.MethodGet, "http://"+srv.addr()+"/", nil)
			resp, err := rt.RoundTrip(req)
			require.Nil(t, resp)
			require.Error(t, err)
			require.Equal(t, tc.attempts, st.Attempts, "%v", err)
		})
	}
}

// TestThrottledRetryHasAFloor: with WithBackoffDelays(0, 0), ten attempts
// against a 429 without Retry-After took 0.7 ms; a retry of a 429 now waits
// at least 100 ms whatever the options say.
func TestThrottledRetryHasAFloor(t *testing.T) {
	// The retry layer alone (the pacing layer would space them further).
	h := newHarness(t, []reply{{status: 429}}, WithBackoffDelays(0, 0), WithMaxAttempts(10), WithoutPacing())
	_, err, st := h.do(t, "GET", "")
	require.ErrorIs(t, err, ErrRateLimitExceeded)
	require.Equal(t, 10, st.Attempts)
	sleeps := h.clk.Sleeps()
	require.Len(t, sleeps, 9)
	for _, d := range sleeps {
		require.GreaterOrEqual(t, d, 100*time.Millisecond)
	}
	require.GreaterOrEqual(t, st.Waited, 900*time.Millisecond)

	// A 503 is the options' business: no floor.
	h = newHarness(t, []reply{{status: 503}, ok200()}, WithBackoffDelays(0, 0))
	_, err, st = h.do(t, "GET", "")
	require.NoError(t, err)
	require.Zero(t, st.Waited)
}

// slowBody serves n bytes, one per Read, each Read moving the fake clock on
// by per: a body trickling at 1/per bytes per second.
type slowBody struct {
	n      int
	per    time.Duration
	clk    interface{ Advance(time.Duration) }
	closed atomic.Bool
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, net.ErrClosed
	}
	if b.n == 0 {
		return 0, io.EOF
	}
	b.clk.Advance(b.per)
	b.n--
	p[0] = 'x'
	return 1, nil
}

func (b *slowBody) Close() error { b.closed.Store(true); return nil }

// TestDrainIsPartOfTheWait: draining a discarded body used to happen before
// the wait and on top of it, unreported (at 20 B/s, 4 attempts took 7.4 s
// of which 3.2 s were reported). Now the drain is spent within the wait, and
// Stats.Waited is the time the caller actually waited.
func TestDrainIsPartOfTheWait(t *testing.T) {
	h := newHarness(t, nil, WithMaxAttempts(4), WithBackoffDelays(time.Second, time.Second), WithJitter(JitterNone))
	var bodies []*slowBody
	mt := h.client.Transport.(*retryTransport)
	inner := mt.next.(*pacer)
	inner.next = loRTFunc(func(req *http.Request) (*http.Response, error) {
		b := &slowBody{n: 100, per: 50 * time.Millisecond, clk: h.clk}
		bodies = append(bodies, b)
		return &http.Response{StatusCode: 503, Status: "503 Service Unavailable", Header: http.Header{}, Body: b, ContentLength: 100, Request: req}, nil
	})
	t0 := h.clk.Now()
	resp, err, st := h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 503, resp.StatusCode)
	require.Equal(t, 4, st.Attempts)
	require.Equal(t, 3*time.Second, st.Waited)
	require.Equal(t, 3*time.Second, h.clk.Now().Sub(t0), "the caller waited what Stats says, no more")
	for _, b := range bodies[:3] {
		require.True(t, b.closed.Load())
	}
}

// foreignRT is a transport of someone else's (a logger, a tracer) that
// hides the transport it wraps.
type foreignRT struct{ next http.RoundTripper }

func (f foreignRT) RoundTrip(req *http.Request) (*http.Response, error) {
	return f.next.RoundTrip(req.WithContext(req.Context())) // a clone, as tracers make
}

// TestWrapThroughForeignWrapperDoesNotStack: a client whose transport is
// headway inside a transport of someone else's, wrapped again, sends each
// attempt once and counts it once. Stacked, a GET answered 503 reached the
// server 16 times (11 with the default budget) and Stats said 20.
func TestWrapThroughForeignWrapperDoesNotStack(t *testing.T) {
	loNoLeaks(t)
	var hits atomic.Int32
	status := atomic.Int32{}
	srv := loServe(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(int(status.Load()))
	})
	opts := []Option{WithClock(loAutoClock()), WithRetryBudget(nil)}
	inner := Wrap(&http.Client{Transport: loBase(t)}, opts...)
	for name, c := range map[string]*http.Client{
		"retries and pacing":   Wrap(&http.Client{Transport: foreignRT{inner.Transport}}, opts...),
		"outer without pacing": Wrap(&http.Client{Transport: foreignRT{inner.Transport}}, append(opts, WithoutPacing())...),
		"twice through":        Wrap(&http.Client{Transport: foreignRT{Wrap(&http.Client{Transport: foreignRT{inner.Transport}}, opts...).Transport}}, opts...),
	} {
		hits.Store(0)
		status.Store(http.StatusServiceUnavailable)
		req, st := loRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
		resp, err := c.Do(req)
		require.NoError(t, err, name)
		loCloseBody(t, resp)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, name)
		require.EqualValues(t, DefaultMaxAttempts, hits.Load(), name)
		require.Equal(t, DefaultMaxAttempts, st.Attempts, name)
	}
	// Without retries above, the inner stack's retry loop runs; its
	// attempts are counted once.
	hits.Store(0)
	c := Wrap(&http.Client{Transport: foreignRT{inner.Transport}}, append(opts, WithoutRetries())...)
	req, st := loRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
	resp, err := c.Do(req)
	require.NoError(t, err)
	loCloseBody(t, resp)
	require.EqualValues(t, DefaultMaxAttempts, hits.Load())
	require.Equal(t, DefaultMaxAttempts, st.Attempts)
}

// TestPacingOnlyAboveARetryLoop: an outer stack that paces but does not
// retry (WithoutRetries), behind a transport of someone else's, over an
// inner stack that retries and paces: the inner loop paces its attempts
// (the outer pacer can only hold the loop as a whole), as far apart as the
// inner stack alone spaces them (the 20 s the server's RateLimit header
// asks for). The inner loop dropped its pacer before, taking the marker's
// "paced above" for pacing of its attempts: its retries went unpaced.
func TestPacingOnlyAboveARetryLoop(t *testing.T) {
	loNoLeaks(t)
	var mu sync.Mutex
	var at []time.Time
	clk := loAutoClock()
	srv := loServe(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, clk.Now())
		mu.Unlock()
		w.Header().Set("RateLimit-Policy", `"d";q=1;w=20`)
		w.Header().Set("RateLimit", `"d";r=0;t=20`)
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	opts := []Option{WithClock(clk), WithRetryBudget(nil), WithOverloadThrottle(0)}
	spread := func(c *http.Client) time.Duration {
		mu.Lock()
		at = nil
		mu.Unlock()
		req, _ := loRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
		resp, err := c.Do(req)
		if err == nil {
			loCloseBody(t, resp)
		}
		mu.Lock()
		defer mu.Unlock()
		return at[len(at)-1].Sub(at[0])
	}
	inner := Wrap(&http.Client{Transport: loBase(t)}, opts...)
	alone := spread(inner)
	inner2 := Wrap(&http.Client{Transport: loBase(t)}, opts...)
	outer := Wrap(&http.Client{Transport: foreignRT{inner2.Transport}}, append(opts, WithoutRetries())...)
	stacked := spread(outer)
	t.Logf("attempts spread over %v alone, %v stacked", alone, stacked)
	require.GreaterOrEqual(t, stacked, alone/2, "the inner loop's retries went unpaced")
}

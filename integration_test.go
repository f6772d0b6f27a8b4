package headway

// Integration tests of the retry layer against real loopback servers
// (net/http/httptest and raw net.Listener servers), on a fake clock.
//
// The helpers at the top (prefixed lo, for loopback) are shared by
// classify_test.go, budget_test.go and bench_test.go.

import (
	"bufio"
	"context"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/headway-go/headway/internal/testkit/fakeclock"
)

// loStart is the fake clocks' starting instant.
var loStart = time.Date(2026, time.January, 2, 3, 4, 5, 0, time.UTC)

// loGuard bounds every wait on the real world (a response, a pending fake
// timer), so that a broken test fails instead of hanging. It is never slept.
const loGuard = 5 * time.Second

// loNoLeaks fails t if goroutines started during the test outlive it. Call it
// first: cleanups run last-registered first, so servers and idle connections
// registered later are closed before the check.
func loNoLeaks(t testing.TB) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// loAutoClock returns a fake clock whose sleeps return at once and are
// recorded.
func loAutoClock() *fakeclock.Clock { return fakeclock.New(loStart, true) }

// loBase returns a fresh base transport whose idle connections are closed when
// t ends.
func loBase(t testing.TB) *http.Transport {
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	return base
}

// loTransport returns headway's stack over a fresh base transport, on clk and
// a seeded random source (rand.NewPCG(1, 2)), so that delays are exact.
func loTransport(t testing.TB, clk Clock, opts ...Option) (http.RoundTripper, *http.Transport) {
	base := loBase(t)
	all := append([]Option{WithClock(clk), WithRandSource(mrand.NewPCG(1, 2))}, opts...)
	return NewTransport(base, all...), base
}

// loDraws returns the first n uniform numbers in [0, 1) that headway draws
// from rand.NewPCG(1, 2): the top 53 bits of each Uint64.
func loDraws(n int) []float64 {
	src := mrand.NewPCG(1, 2)
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(src.Uint64()>>11) / (1 << 53)
	}
	return out
}

// loFullJitter returns the backoff delays of the first n retries of a single
// request with the default delays and full jitter, drawn from
// rand.NewPCG(1, 2): uniform in [0, DefaultBaseDelay*2^(retry-1)].
func loFullJitter(n int) []time.Duration {
	if n == 0 {
		return nil // as fakeclock.Sleeps reports no sleep
	}
	out := make([]time.Duration, n)
	for i, u := range loDraws(n) {
		out[i] = time.Duration(u * float64(DefaultBaseDelay<<i))
	}
	return out
}

// loServer is an httptest server that counts the connections it accepted and
// the requests it handled.
type loServer struct {
	*httptest.Server
	conns atomic.Int32
	hits  atomic.Int32
}

// loServe starts a loServer running h, closed when t ends. Each handler call
// is counted before h runs.
func loServe(t testing.TB, h http.HandlerFunc) *loServer {
	t.Helper()
	s := &loServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, cs http.ConnState) {
		if cs == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// loRaw is a raw TCP server on loopback: each accepted connection is handed
// to handle in its own goroutine. Closing it closes the listener and every
// connection, and waits for the handlers.
type loRaw struct {
	ln       net.Listener
	accepted atomic.Int32
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
}

func loServeRaw(t testing.TB, handle func(net.Conn)) *loRaw {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &loRaw{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *loRaw) addr() string { return s.ln.Addr().String() }

// loReadRequest reads one request and its body from c.
func loReadRequest(c net.Conn) error {
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, req.Body)
	return err
}

// loClosedAddr returns a loopback address nothing listens on: it listens,
// then closes, so that dialing it is refused.
func loClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// loRequest builds a request carrying a Stats, for exact attempt counts.
func loRequest(t testing.TB, ctx context.Context, method, url string, body io.Reader) (*http.Request, *Stats) {
	t.Helper()
	st := new(Stats)
	req, err := http.NewRequestWithContext(ContextWithStats(ctx, st), method, url, body)
	require.NoError(t, err)
	return req, st
}

// loCountingRT counts the attempts that reach the base transport.
type loCountingRT struct {
	next http.RoundTripper
	n    atomic.Int32
}

func (c *loCountingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(req)
}

// loResult is the outcome of a round trip run in the background.
type loResult struct {
	resp *http.Response
	err  error
}

// loRoundTripAsync runs rt.RoundTrip(req) in a goroutine, for tests that
// move a manual fake clock while the request waits.
func loRoundTripAsync(rt http.RoundTripper, req *http.Request) <-chan loResult {
	done := make(chan loResult, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		done <- loResult{resp, err}
	}()
	return done
}

// loCloseBody reads and closes resp's body, returning it.
func loCloseBody(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return string(b)
}

// loTrackedBody is a request body without GetBody that records Close.
type loTrackedBody struct {
	io.Reader
	closed atomic.Int32
}

func (b *loTrackedBody) Close() error { b.closed.Add(1); return nil }

// TestDiscardedBodiesAreDrainedSoTheConnectionIsReused: two 503s with 10 KiB
// bodies, then a 200. The retry layer drains and closes each discarded
// response, so all three attempts travel on one connection.
func TestDiscardedBodiesAreDrainedSoTheConnectionIsReused(t *testing.T) {
	loNoLeaks(t)
	big := strings.Repeat("x", 10<<10)
	var n atomic.Int32
	srv := loServe(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		io.WriteString(w, big)
	})
	clk := loAutoClock()
	rt, _ := loTransport(t, clk)
	req, st := loRequest(t, context.Background(), http.MethodGet, srv.URL+"/items", nil)

	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, loCloseBody(t, resp), len(big))

	require.EqualValues(t, 3, srv.hits.Load(), "attempts at the server")
	require.Equal(t, 3, st.Attempts)
	require.EqualValues(t, 1, srv.conns.Load(), "connections opened: discarded bodies must be drained and closed")
	require.Equal(t, loFullJitter(2), clk.Sleeps())
}

// loSeen is what a server saw of one attempt.
type loSeen struct {
	method string
	uri    string
	header http.Header
	body   string
	length int64
}

// loRecorder records every attempt, answering with statuses[i] for the i-th
// (the last one repeated).
type loRecorder struct {
	mu       sync.Mutex
	seen     []loSeen
	statuses []int
}

func (rec *loRecorder) handle(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rec.mu.Lock()
	rec.seen = append(rec.seen, loSeen{r.Method, r.RequestURI, r.Header.Clone(), string(b), r.ContentLength})
	i := min(len(rec.seen), len(rec.statuses)) - 1
	code := rec.statuses[i]
	rec.mu.Unlock()
	w.WriteHeader(code)
	io.WriteString(w, http.StatusText(code))
}

func (rec *loRecorder) attempts() []loSeen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]loSeen(nil), rec.seen...)
}

// TestBodyIsRewoundOnEveryAttempt: a POST with an Idempotency-Key and a
// strings.Reader body, retried on 503, reaches the server byte-identical,
// headers included, on every attempt.
func TestBodyIsRewoundOnEveryAttempt(t *testing.T) {
	loNoLeaks(t)
	rec := &loRecorder{statuses: []int{503, 503, 503, 200}}
	srv := loServe(t, func(w http.ResponseWriter, r *http.Request) {
		// A new connection per attempt, so that net/http cannot rescue a
		// body that was not rewound with its own GetBody-based retry.
		w.Header().Set("Connection", "close")
		rec.handle(w, r)
	})
	clk := loAutoClock()
	rt, _ := loTransport(t, clk)

	const payload = `{"amount":1299,"currency":"eur","note":"ünïcødé and\nnewlines"}`
	req, st := loRequest(t, context.Background(), http.MethodPost, srv.URL+"/charges?x=1", strings.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyKeyHeader, "order-42")
	req.Header.Add("X-Multi", "a")
	req.Header.Add("X-Multi", "b")
	before := req.Header.Clone()

	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	loCloseBody(t, resp)

	seen := rec.attempts()
	require.Len(t, seen, 4)
	require.Equal(t, 4, st.Attempts)
	for i, s := range seen {
		require.Equal(t, payload, s.body, "attempt %d body", i+1)
		require.EqualValues(t, len(payload), s.length, "attempt %d Content-Length", i+1)
		require.Equal(t, http.MethodPost, s.method)
		require.Equal(t, "/charges?x=1", s.uri)
		require.Equal(t, "order-42", s.header.Get(IdempotencyKeyHeader))
		require.Equal(t, []string{"a", "b"}, s.header["X-Multi"])
		require.Equal(t, seen[0].header, s.header, "attempt %d headers", i+1)
	}
	require.Equal(t, before, req.Header, "the caller's header must not change")
	require.Equal(t, loFullJitter(3), clk.Sleeps())
}

// TestIdempotencyKeysAreGeneratedOncePerRequest: with WithIdempotencyKeys a
// POST is retried on 503 carrying the same random 32-hex key on every
// attempt; the next request gets another key; the caller's header is left
// alone.
func TestIdempotencyKeysAreGeneratedOncePerRequest(t *testing.T) {
	loNoLeaks(t)
	rec := &loRecorder{statuses: []int{503, 503, 200, 503, 200}}
	srv := loServe(t, rec.handle)
	clk := loAutoClock()
	rt, _ := loTransport(t, clk, WithIdempotencyKeys())
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)

	var keys []string
	for i, wantAttempts := range []int{3, 2} {
		req, st := loRequest(t, context.Background(), http.MethodPost, srv.URL+"/orders", strings.NewReader("item=7"))
		req.Header.Set("X-Request", strconv.Itoa(i))
		before := req.Header.Clone()
		from := len(rec.attempts())

		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		loCloseBody(t, resp)

		require.Equal(t, wantAttempts, st.Attempts, "request %d", i)
		seen := rec.attempts()[from:]
		require.Len(t, seen, wantAttempts)
		key := seen[0].header.Get(IdempotencyKeyHeader)
		require.Regexp(t, hex32, key)
		for _, s := range seen {
			require.Equal(t, []string{key}, s.header[IdempotencyKeyHeader], "the key must be the same on every attempt")
			require.Equal(t, "item=7", s.body)
		}
		require.Equal(t, before, req.Header, "the caller's req.Header must be unchanged")
		require.Empty(t, req.Header.Get(IdempotencyKeyHeader))
		keys = append(keys, key)
	}
	require.NotEqual(t, keys[0], keys[1], "each request gets its own key")
}

// TestPostWithoutKeyIsNotRetriedOn503: a 503 may come after the server
// processed the request; without an Idempotency-Key a POST is not repeated,
// and the 503 is returned as it is.
func TestPostWithoutKeyIsNotRetriedOn503(t *testing.T) {
	loNoLeaks(t)
	rec := &loRecorder{statuses: []int{503, 200}}
	srv := loServe(t, rec.handle)
	clk := loAutoClock()
	rt, _ := loTransport(t, clk)
	req, st := loRequest(t, context.Background(), http.MethodPost, srv.URL+"/pay", strings.NewReader("amount=1"))

	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, http.StatusText(503), loCloseBody(t, resp))
	require.Len(t, rec.attempts(), 1)
	require.Equal(t, 1, st.Attempts)
	require.Empty(t, clk.Sleeps())
}

// TestBodyWithoutGetBody: a body that cannot be rewound (no GetBody).
func TestBodyWithoutGetBody(t *testing.T) {
	const payload = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" // 64 bytes
	newReq := func(t *testing.T, url string) (*http.Request, *Stats, *loTrackedBody) {
		req, st := loRequest(t, context.Background(), http.MethodPost, url, nil)
		body := &loTrackedBody{Reader: strings.NewReader(payload)}
		req.Body = body // io.ReadCloser without GetBody, as from a pipe
		req.ContentLength = int64(len(payload))
		require.Nil(t, req.GetBody)
		return req, st, body
	}

	// By default it is sent once: a 429 (retried for any method otherwise)
	// ends in a RateLimitError saying why.
	t.Run("default", func(t *testing.T) {
		loNoLeaks(t)
		rec := &loRecorder{statuses: []int{429, 200}}
		srv := loServe(t, rec.handle)
		clk := loAutoClock()
		rt, _ := loTransport(t, clk)
		req, st, body := newReq(t, srv.URL+"/upload")

		resp, err := rt.RoundTrip(req)
		require.Nil(t, resp)
		require.ErrorIs(t, err, ErrRateLimitExceeded)
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle)
		require.Equal(t, ReasonBodyNotReplayable, rle.Reason)
		require.Equal(t, http.StatusTooManyRequests, rle.StatusCode)
		require.Equal(t, 1, rle.Attempts)
		require.Equal(t, 1, st.Attempts)
		seen := rec.attempts()
		require.Len(t, seen, 1)
		require.Equal(t, payload, seen[0].body)
		require.Empty(t, clk.Sleeps())
		require.Positive(t, body.closed.Load(), "the caller's body must be closed")
	})

	// With buffering and a body that fits, it is retried; the server sees the
	// same body twice.
	t.Run("buffered", func(t *testing.T) {
		loNoLeaks(t)
		rec := &loRecorder{statuses: []int{429, 200}}
		srv := loServe(t, rec.handle)
		clk := loAutoClock()
		rt, _ := loTransport(t, clk, WithBodyBuffering(1<<20))
		req, st, body := newReq(t, srv.URL+"/upload")

		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		loCloseBody(t, resp)
		require.Equal(t, 2, st.Attempts)
		seen := rec.attempts()
		require.Len(t, seen, 2)
		for _, s := range seen {
			require.Equal(t, payload, s.body)
			require.EqualValues(t, len(payload), s.length)
		}
		// A 429 without Retry-After waits at least the base delay.
		require.Equal(t, []time.Duration{DefaultBaseDelay}, clk.Sleeps())
		require.Positive(t, body.closed.Load(), "the caller's body must be closed")
	})

	// With buffering and a body that does not fit, it is streamed once, whole,
	// and not retried.
	t.Run("too large to buffer", func(t *testing.T) {
		loNoLeaks(t)
		rec := &loRecorder{statuses: []int{429, 200}}
		srv := loServe(t, rec.handle)
		clk := loAutoClock()
		rt, _ := loTransport(t, clk, WithBodyBuffering(16))
		req, st, body := newReq(t, srv.URL+"/upload")

		resp, err := rt.RoundTrip(req)
		require.Nil(t, resp)
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle)
		require.Equal(t, ReasonBodyNotReplayable, rle.Reason)
		require.Equal(t, 1, st.Attempts)
		seen := rec.attempts()
		require.Len(t, seen, 1)
		require.Equal(t, payload, seen[0].body, "the server must receive the whole body")
		require.EqualValues(t, len(payload), seen[0].length)
		require.Empty(t, clk.Sleeps())
		require.Positive(t, body.closed.Load(), "the caller's body must be closed")
	})
}

// TestClientCloseIdleConnectionsReachesTheBaseTransport: http.Client's
// CloseIdleConnections only works if the client's Transport has that method.
// A client from New or Wrap must keep it working: after it, the next request
// needs a new connection.
func TestClientCloseIdleConnectionsReachesTheBaseTransport(t *testing.T) {
	loNoLeaks(t)
	srv := loServe(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	base := loBase(t)
	client := Wrap(&http.Client{Transport: base}, WithClock(loAutoClock()))

	get := func() {
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		require.Equal(t, "ok", loCloseBody(t, resp))
	}
	get()
	get()
	require.EqualValues(t, 1, srv.conns.Load(), "the second request reuses the idle connection")
	client.CloseIdleConnections()
	get()
	require.EqualValues(t, 2, srv.conns.Load(),
		"client.CloseIdleConnections did not reach the base transport: the idle connection survived")
}

// loOverlapSource is a rand.Source that detects being called concurrently,
// which WithRandSource promises never happens ("used under a lock"). It
// yields inside Uint64 to widen the window.
type loOverlapSource struct {
	src     mrand.Source
	inside  atomic.Int32
	overlap atomic.Bool
}

func (s *loOverlapSource) Uint64() uint64 {
	if s.inside.Add(1) > 1 {
		s.overlap.Store(true)
	}
	for range 20 {
		runtime.Gosched()
	}
	u := s.src.Uint64()
	s.inside.Add(-1)
	return u
}

// TestRandSourceIsNeverUsedConcurrently: WithRandSource says the source is
// used under a lock, so any rand.Source (PCG, ChaCha8, which are not safe for
// concurrent use) will do. Concurrent requests draw from it both for backoff
// jitter and for the spread added to Retry-After waits; those draws must be
// serialised too.
func TestRandSourceIsNeverUsedConcurrently(t *testing.T) {
	loNoLeaks(t)
	srv := loServe(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("n") == "0" { // first attempt of each request
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	})
	src := &loOverlapSource{src: mrand.NewPCG(1, 2)}
	base := loBase(t)
	base.MaxIdleConnsPerHost = 16
	// Attempts are told apart by a query parameter rewritten below headway:
	// n=0 on the first attempt of a path, n=1 on its retry.
	tagger := &loAttemptTagger{}
	rt := NewTransport(tagger.wrap(base), WithClock(loAutoClock()), WithRandSource(src), WithRetryBudget(nil),
		WithKey(func(r *http.Request) string { return r.URL.Path }), // no pause shared between requests
		WithMaxAttempts(2))

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				req, err := http.NewRequest(http.MethodGet, srv.URL+"/g"+strconv.Itoa(g)+"/"+strconv.Itoa(i), nil)
				if err != nil {
					t.Error(err)
					return
				}
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	require.False(t, src.overlap.Load(),
		"the random source was called by two goroutines at once: backoff jitter and Retry-After spread lock it separately")
}

// loAttemptTagger rewrites each attempt's query to n=<attempt index of that
// path>, so that a handler can tell first attempts from retries.
type loAttemptTagger struct {
	mu   sync.Mutex
	seen map[string]int
}

func (a *loAttemptTagger) wrap(next http.RoundTripper) http.RoundTripper {
	return loRTFunc(func(req *http.Request) (*http.Response, error) {
		a.mu.Lock()
		if a.seen == nil {
			a.seen = map[string]int{}
		}
		n := a.seen[req.URL.Path]
		a.seen[req.URL.Path]++
		a.mu.Unlock()
		r := req.Clone(req.Context())
		r.Body = req.Body
		r.URL.RawQuery = "n=" + strconv.Itoa(n)
		return next.RoundTrip(r)
	})
}

type loRTFunc func(*http.Request) (*http.Response, error)

func (f loRTFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestStalledBodyCostsTheConnectionNotTheCaller: a server answers 503 with
// Content-Length 1000, sends 10 bytes and stalls. Draining it for reuse is
// part of the wait before the retry, and bounded by it (on a manual fake
// clock here); once the wait is over the body is closed, and the retry goes
// out on a new connection and succeeds.
func TestStalledBodyCostsTheConnectionNotTheCaller(t *testing.T) {
	loNoLeaks(t)
	var conns atomic.Int32
	srv := loServeRaw(t, func(c net.Conn) {
		if err := loReadRequest(c); err != nil {
			return
		}
		if conns.Add(1) == 1 {
			io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1000\r\n\r\n0123456789")
			io.Copy(io.Discard, c) // stall until the client hangs up
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	clk := fakeclock.New(loStart, false)
	rt, _ := loTransport(t, clk, WithMaxAttempts(2))
	req, st := loRequest(t, context.Background(), http.MethodGet, "http://"+srv.addr()+"/", nil)
	done := loRoundTripAsync(rt, req)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, clk.WaitForPending(ctx, 1), "the drain's timer is armed")
	clk.Advance(DefaultBaseDelay) // the whole wait: the drain gives up, the body is closed
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, "ok", loCloseBody(t, r.resp))
	require.Equal(t, 2, st.Attempts)
	require.EqualValues(t, 2, srv.accepted.Load(), "the stalled connection was not reused")
}

// A body announced as longer than drainLimit is not read at all.
func TestLongDiscardedBodyIsNotRead(t *testing.T) {
	body := &closeTracker{Reader: strings.NewReader(strings.Repeat("x", 10))}
	a := attempt{resp: &http.Response{Body: body, ContentLength: drainLimit + 1}, release: noRelease}
	a.discardWithin(context.Background(), fakeclock.New(loStart, true), 0, false)
	require.True(t, body.closed)
	require.Equal(t, 10, body.Reader.(*strings.Reader).Len(), "nothing was read")
}

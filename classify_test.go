package headway

// Transport errors, each produced for real on loopback, and how the retry
// layer classifies them. Helpers (lo...) are in integration_test.go.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/internal/testkit/fakeclock"
)

// TestConnectionRefusedIsRetried: nothing listens, so the request is never
// written and every method may be retried, POST included.
func TestConnectionRefusedIsRetried(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			loNoLeaks(t)
			addr := loClosedAddr(t)
			clk := loAutoClock()
			rt, _ := loTransport(t, clk)
			var body io.Reader
			if method == http.MethodPost {
				body = strings.NewReader("order=1")
			}
			req, st := loRequest(t, context.Background(), method, "http://"+addr+"/x", body)

			resp, err := rt.RoundTrip(req)
			require.Nil(t, resp)
			require.ErrorIs(t, err, syscall.ECONNREFUSED)
			require.Contains(t, err.Error(), fmt.Sprintf("giving up after %d attempt(s)", DefaultMaxAttempts))
			require.Equal(t, DefaultMaxAttempts, st.Attempts)
			require.Equal(t, loFullJitter(DefaultMaxAttempts-1), clk.Sleeps())
		})
	}
}

// TestConnectionResetBeforeResponse: the server reads the whole request, then
// resets the connection (SO_LINGER 0) without answering. The request was
// written, so it may have been processed: GET is retried, POST only with an
// Idempotency-Key.
func TestConnectionResetBeforeResponse(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		key      string
		attempts int
	}{
		{"GET", http.MethodGet, "", DefaultMaxAttempts},
		{"POST", http.MethodPost, "", 1},
		{"POST with Idempotency-Key", http.MethodPost, "pay-1", DefaultMaxAttempts},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			loNoLeaks(t)
			var served atomic.Int32
			srv := loServeRaw(t, func(c net.Conn) {
				if loReadRequest(c) == nil {
					served.Add(1)
				}
				c.(*net.TCPConn).SetLinger(0)
				c.Close() // RST
			})
			clk := loAutoClock()
			rt, _ := loTransport(t, clk)
			var body io.Reader
			if tc.method == http.MethodPost {
				body = strings.NewReader("amount=100")
			}
			req, st := loRequest(t, context.Background(), tc.method, "http://"+srv.addr()+"/r", body)
			if tc.key != "" {
				req.Header.Set(IdempotencyKeyHeader, tc.key)
			}

			resp, err := rt.RoundTrip(req)
			require.Nil(t, resp)
			require.ErrorIs(t, err, syscall.ECONNRESET)
			require.Equal(t, tc.attempts, st.Attempts)
			require.EqualValues(t, tc.attempts, srv.accepted.Load(), "connections")
			require.EqualValues(t, tc.attempts, served.Load(), "requests read by the server")
			require.Equal(t, loFullJitter(tc.attempts-1), clk.Sleeps())
		})
	}
}

// TestUnexpectedEOF: the server reads the request, writes part of a status
// line and closes. A GET is retried; a POST, written already, is not.
func TestUnexpectedEOF(t *testing.T) {
	for _, tc := range []struct {
		method   string
		attempts int
	}{{http.MethodGet, DefaultMaxAttempts}, {http.MethodPost, 1}} {
		t.Run(tc.method, func(t *testing.T) {
			loNoLeaks(t)
			srv := loServeRaw(t, func(c net.Conn) {
				if loReadRequest(c) == nil {
					io.WriteString(c, "HTTP/1.1 200 O")
				}
			})
			clk := loAutoClock()
			rt, _ := loTransport(t, clk)
			var body io.Reader
			if tc.method == http.MethodPost {
				body = strings.NewReader("x=1")
			}
			req, st := loRequest(t, context.Background(), tc.method, "http://"+srv.addr()+"/eof", body)

			resp, err := rt.RoundTrip(req)
			require.Nil(t, resp)
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			require.Equal(t, tc.attempts, st.Attempts)
			require.EqualValues(t, tc.attempts, srv.accepted.Load())
			require.Equal(t, loFullJitter(tc.attempts-1), clk.Sleeps())
		})
	}
}

// TestTLSHandshakeTimeoutIsRetried: the server accepts and never speaks; the
// base transport's TLSHandshakeTimeout (real time, 15 ms) fires on each
// attempt. Two attempts keep the real wait near 30 ms.
func TestTLSHandshakeTimeoutIsRetried(t *testing.T) {
	loNoLeaks(t)
	srv := loServeRaw(t, func(c net.Conn) { io.Copy(io.Discard, c) }) // silent until the client hangs up
	clk := loAutoClock()
	base := loBase(t)
	base.TLSHandshakeTimeout = 15 * time.Millisecond
	rt := NewTransport(base, WithClock(clk), WithMaxAttempts(2))
	req, st := loRequest(t, context.Background(), http.MethodGet, "https://"+srv.addr()+"/", nil)

	start := time.Now()
	resp, err := rt.RoundTrip(req)
	elapsed := time.Since(start)
	require.Nil(t, resp)
	require.ErrorContains(t, err, "TLS handshake timeout")
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout())
	require.Equal(t, 2, st.Attempts)
	require.EqualValues(t, 2, srv.accepted.Load())
	require.Len(t, clk.Sleeps(), 1)
	t.Logf("2 handshake timeouts took %v of real time", elapsed)
}

// TestAttemptTimeoutIsRetried: WithAttemptTimeout on a manual fake clock. The
// first attempt hangs until its context is done; the test fires the timeout
// with Advance, then the backoff sleep; the second attempt succeeds.
func TestAttemptTimeoutIsRetried(t *testing.T) {
	loNoLeaks(t)
	clk := fakeclock.New(loStart, false)
	arrived := make(chan struct{}, 1)
	var n atomic.Int32
	srv := loServe(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			arrived <- struct{}{}
			<-r.Context().Done() // abandoned by the client
			return
		}
		io.WriteString(w, "second")
	})
	var mu sync.Mutex
	var events []RetryEvent
	rt, _ := loTransport(t, clk, WithAttemptTimeout(2*time.Second), WithOnRetry(func(ev RetryEvent) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}))
	req, st := loRequest(t, context.Background(), http.MethodGet, srv.URL+"/slow", nil)

	done := loRoundTripAsync(rt, req)
	guard, cancel := context.WithTimeout(context.Background(), loGuard)
	defer cancel()
	select {
	case <-arrived:
	case <-guard.Done():
		t.Fatal("the first attempt never reached the server")
	}
	require.NoError(t, clk.WaitForPending(guard, 1), "the attempt's timer")
	clk.Advance(2 * time.Second) // fires the per-attempt timeout
	require.NoError(t, clk.WaitForPending(guard, 1), "the backoff sleep")
	clk.Advance(DefaultMaxDelay) // ends any backoff
	var res loResult
	select {
	case res = <-done:
	case <-guard.Done():
		t.Fatal("the request did not finish")
	}
	require.NoError(t, res.err)
	require.Equal(t, http.StatusOK, res.resp.StatusCode)
	require.Equal(t, "second", loCloseBody(t, res.resp))
	require.EqualValues(t, 2, n.Load())
	require.Equal(t, 2, st.Attempts)
	require.Equal(t, loFullJitter(1), clk.Sleeps())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, events, 1)
	require.Equal(t, 1, events[0].Attempt)
	require.ErrorIs(t, events[0].Err, ErrAttemptTimeout)
	require.False(t, errors.Is(events[0].Err, context.Canceled), "an attempt timeout is not the caller's cancellation")
}

// TestCallerCancelIsNotRetried: the caller cancels while the server holds the
// request: no retry, and the error says context.Canceled.
func TestCallerCancelIsNotRetried(t *testing.T) {
	loNoLeaks(t)
	arrived := make(chan struct{}, 4)
	srv := loServe(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	clk := loAutoClock()
	rt, _ := loTransport(t, clk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, st := loRequest(t, ctx, http.MethodGet, srv.URL+"/hold", nil)

	done := make(chan error, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
			err = fmt.Errorf("got a response: %d", resp.StatusCode)
		}
		done <- err
	}()
	select {
	case <-arrived:
	case <-time.After(loGuard):
		t.Fatal("the request never reached the server")
	}
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(loGuard):
		t.Fatal("the request did not end after cancel")
	}
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, st.Attempts)
	require.EqualValues(t, 1, srv.hits.Load())
	require.Empty(t, clk.Sleeps())
}

// TestUnsupportedSchemeIsNotRetried: an ftp:// URL can never work.
func TestUnsupportedSchemeIsNotRetried(t *testing.T) {
	loNoLeaks(t)
	clk := loAutoClock()
	base := &loCountingRT{next: loBase(t)}
	rt := NewTransport(base, WithClock(clk))
	req, st := loRequest(t, context.Background(), http.MethodGet, "ftp://127.0.0.1:1/file", nil)

	resp, err := rt.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorContains(t, err, "unsupported protocol scheme")
	require.EqualValues(t, 1, base.n.Load(), "attempts")
	require.Equal(t, 1, st.Attempts)
	require.Empty(t, clk.Sleeps())
}

// TestTLSCertificateErrorIsNotRetried: the client does not trust the test
// server's certificate; no retry can fix that.
func TestTLSCertificateErrorIsNotRetried(t *testing.T) {
	loNoLeaks(t)
	var conns, hits atomic.Int32
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // "TLS handshake error" noise
	ts.Config.ConnState = func(_ net.Conn, cs http.ConnState) {
		if cs == http.StateNew {
			conns.Add(1)
		}
	}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	clk := loAutoClock()
	rt, _ := loTransport(t, clk) // default roots: the test CA is unknown
	req, st := loRequest(t, context.Background(), http.MethodGet, ts.URL+"/", nil)

	resp, err := rt.RoundTrip(req)
	require.Nil(t, resp)
	var verr *tls.CertificateVerificationError
	require.ErrorAs(t, err, &verr)
	require.Equal(t, 1, st.Attempts)
	require.EqualValues(t, 1, conns.Load(), "connections seen by the server")
	require.Zero(t, hits.Load())
	require.Empty(t, clk.Sleeps())
}

// TestResponseHeaderTimeoutIsRetried: the base transport's own timeout
// reports a DeadlineExceeded although the caller's context is alive; that is
// a transient failure, retried for a GET.
func TestResponseHeaderTimeoutIsRetried(t *testing.T) {
	loNoLeaks(t)
	var calls atomic.Int32
	srv := loServe(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			<-r.Context().Done() // the first attempt hangs until the client gives up
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	clk := loAutoClock()
	base := loBase(t)
	base.ResponseHeaderTimeout = 20 * time.Millisecond
	rt := NewTransport(base, WithClock(clk), WithMaxAttempts(2))
	req, st := loRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	loCloseBody(t, resp)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, 2, st.Attempts)
	require.EqualValues(t, 2, calls.Load())
}

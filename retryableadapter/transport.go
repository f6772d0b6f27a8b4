package retryableadapter

import (
	"net/http"

	"github.com/headway-go/headway/internal/decide"
)

// attemptInfoTransport is the transport Configure installs. A transient
// error of a request with a non-idempotent method comes back wrapped in an
// *attemptError saying whether the request had an Idempotency-Key and
// whether it was written, which CheckRetry, given only the error, could not
// learn otherwise. Other errors pass unchanged.
type attemptInfoTransport struct {
	next http.RoundTripper // nil: http.DefaultTransport
}

func (t *attemptInfoTransport) base() http.RoundTripper {
	if t.next == nil {
		return http.DefaultTransport
	}
	return t.next
}

// RoundTrip implements http.RoundTripper.
func (t *attemptInfoTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.base()
	if decide.IsIdempotentMethod(req.Method) {
		return next.RoundTrip(req)
	}
	keyed := decide.HasIdempotencyKey(req.Header)
	r := req
	var wrote interface{ Load() bool }
	if !keyed {
		ctx, w := decide.TrackWrite(req.Context())
		r, wrote = req.WithContext(ctx), w
	}
	resp, err := next.RoundTrip(r)
	if err != nil && decide.IsTransient(err) {
		return nil, &attemptError{err: err, keyed: keyed, wrote: keyed || wrote.Load()}
	}
	return resp, err
}

// CloseIdleConnections passes the call on, so that the client's
// CloseIdleConnections (which retryablehttp calls when it gives up) still
// reaches the transport underneath.
func (t *attemptInfoTransport) CloseIdleConnections() { decide.CloseIdle(t.base()) }

// attemptError wraps a transport error with what CheckRetry needs to know.
// Its message is the wrapped error's.
type attemptError struct {
	err   error
	keyed bool // the request carried an Idempotency-Key
	wrote bool // the request was (maybe partly) written
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// Timeout and Temporary forward to the wrapped error, for *url.Error's
// methods of the same names, which look only one level down.
func (e *attemptError) Timeout() bool {
	t, ok := e.err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

func (e *attemptError) Temporary() bool {
	t, ok := e.err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

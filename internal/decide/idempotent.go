package decide

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
)

// IdempotencyKeyHeader is the header that makes a request safe to repeat
// (draft-ietf-httpapi-idempotency-key-header).
const IdempotencyKeyHeader = "Idempotency-Key"

// IsIdempotentMethod reports whether RFC 9110 defines method as idempotent
// ("" is GET).
func IsIdempotentMethod(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// HasIdempotencyKey reports whether a request's header carries an
// Idempotency-Key.
func HasIdempotencyKey(h http.Header) bool {
	vs := h[IdempotencyKeyHeader]
	return len(vs) > 0 && vs[0] != ""
}

// Repeatable reports whether a request may be sent again after the server
// may have processed it: its method is idempotent or it carries a key.
func Repeatable(method string, h http.Header) bool {
	return IsIdempotentMethod(method) || HasIdempotencyKey(h)
}

// TrackWrite returns a context whose requests record, in the returned flag,
// whether they were written (at least partly) to the connection: a request
// that failed before that point was not processed and may be repeated.
func TrackWrite(ctx context.Context) (context.Context, *atomic.Bool) {
	wrote := new(atomic.Bool)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	}), wrote
}

// CloseIdle calls rt's CloseIdleConnections, if it has one, so that
// http.Client.CloseIdleConnections works through a wrapping transport.
func CloseIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

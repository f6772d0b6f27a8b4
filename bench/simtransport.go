package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"time"
)

// SimTransport is an http.RoundTripper that serves each request with
// Handler in memory, each way taking half of RTT: the request reaches the
// handler RTT/2 after it is sent and the response is back RTT/2 later. The
// waits are timers, so inside a testing/synctest bubble they take virtual
// time and a minute of traffic costs milliseconds. A context that ends
// during either half ends the round trip with its error. It is safe for
// concurrent use.
type SimTransport struct {
	Handler http.Handler
	RTT     time.Duration
}

// RoundTrip implements http.RoundTripper.
func (t *SimTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, err := io.Copy(io.Discard, req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	if err := sleepCtx(req.Context(), t.RTT/2); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	t.Handler.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	if err := sleepCtx(req.Context(), t.RTT-t.RTT/2); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// sleepCtx waits for d or until ctx is done, returning ctx.Err() then.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

package headway

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/headway-go/headway/ratelimit"

	"github.com/headway-go/headway/internal/decide"
)

// RetryEvent describes one decision to retry, as passed to WithOnRetry.
type RetryEvent struct {
	// Request is the caller's request. It must not be modified.
	Request *http.Request
	// Key is the request's key (see WithKey).
	Key string
	// Attempt is the number of the attempt that just failed, from 1.
	Attempt int
	// StatusCode is the failed attempt's status, or 0 if it ended in Err.
	StatusCode int
	// Err is the failed attempt's transport error, or nil.
	Err error
	// Wait is how long headway will wait before the next attempt.
	Wait time.Duration
	// RetryAfter is the server's Retry-After, when it sent one.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// AttemptEvent describes one attempt sent to the server, as passed to
// WithOnAttempt.
type AttemptEvent struct {
	// Request is the caller's request. It must not be modified.
	Request *http.Request
	// Key is the request's key (see WithKey); Attempt its number, from 1.
	Key     string
	Attempt int
	// StatusCode is the response's status, 0 when the attempt ended in
	// Err; Observation what its headers said about rate limits.
	StatusCode  int
	Observation ratelimit.Observation
	Err         error
}

// DoneEvent describes a request that has ended, as passed to WithOnDone.
type DoneEvent struct {
	// Request is the caller's request. It must not be modified.
	Request *http.Request
	// Key is the request's key (see WithKey).
	Key string
	// StatusCode is the final response's status (0 when the request
	// ended in Err); Err the error returned, if any.
	StatusCode int
	Err        error
	// Attempts is how many attempts were sent (0: the request was held
	// back and never sent); Throttled how many were answered 429; Waited
	// the time spent waiting, by both layers.
	Attempts, Throttled int
	Waited              time.Duration
}

// WaitEvent describes a wait of the pacing layer before a request is sent,
// as passed to WithOnWait.
type WaitEvent struct {
	// Request is the caller's request. It must not be modified.
	Request *http.Request
	// Key is the request's pacing key (see WithKey).
	Key string
	// Wait is how long the request is expected to wait. When Definite,
	// it cannot go sooner (a pause, a window, a rate, as
	// pace.Decision.Definite); otherwise it waits for an answer to a
	// request in flight and Wait is only the longest it may take.
	Wait     time.Duration
	Definite bool
	// Reason says why, in a few words: the pause the server asked for, the
	// quota that ran out and when it resets, the rate being kept.
	Reason string
}

// report passes a retry decision to the WithOnRetry hook and the logger.
func (c *config) report(ctx context.Context, ev RetryEvent) {
	if c.onRetry != nil {
		c.onRetry(ev)
	}
	if !c.logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	req := ev.Request
	attrs := []slog.Attr{
		slog.String("method", req.Method), slog.String("url", decide.Redact(req.URL)),
		slog.Int("attempt", ev.Attempt), slog.Duration("wait", ev.Wait),
	}
	if ev.Err != nil {
		attrs = append(attrs, slog.String("error", ev.Err.Error()))
	} else {
		attrs = append(attrs, slog.Int("status", ev.StatusCode))
	}
	if ev.HasRetryAfter {
		attrs = append(attrs, slog.Duration("retry_after", ev.RetryAfter))
	}
	c.logger.LogAttrs(ctx, slog.LevelDebug, "headway: retrying", attrs...)
}

// attempted reports an attempt to the WithOnAttempt hook.
func (c *config) attempted(req *http.Request, key string, n int, a *attempt) {
	c.onAttempt(AttemptEvent{Request: req, Key: key, Attempt: n, StatusCode: a.status, Observation: a.obs, Err: a.err})
}

// done reports a request's end to the WithOnDone hook.
func (c *config) done(req *http.Request, key string, st *Stats, resp *http.Response, err error) {
	ev := DoneEvent{Request: req, Key: key, Err: err, Attempts: st.Attempts, Throttled: st.Throttled, Waited: st.Waited}
	if resp != nil {
		ev.StatusCode = resp.StatusCode
	}
	c.onDone(ev)
}

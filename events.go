package headway

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/headway-go/headway/internal/decide"
)

// RetryEvent describes one decision to retry, as passed to WithOnRetry.
type RetryEvent struct {
	// Request is the caller's request. It must not be modified.
	Request *http.Request
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

// WaitEvent describes a wait of the pacing layer before a request is sent,
// as passed to WithOnWait.
type WaitEvent struct {
	// Request is the caller's request. It must not be modified.
	Request *http.Request
	// Key is the request's pacing key (see WithKey).
	Key string
	// Wait is how long the request is expected to wait. When Bounded, it
	// waits for an answer to a request in flight and Wait is only the
	// longest it may take.
	Wait    time.Duration
	Bounded bool
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

package headway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"time"
)

// drainLimit bounds how much of a discarded response body is read so that
// its connection can be reused; a longer body is closed, costing the
// connection rather than unbounded reading.
const drainLimit = 64 << 10

// observer is implemented by headway's pacing layer: it returns the
// Observation it parsed along with the response, so each response's headers
// are parsed once for both layers.
type observer interface {
	// hold waits until req may be sent, returning how long it waited, or
	// refuses it (a *RateLimitError with StatusCode 0, or the context's
	// error, wrapped).
	hold(req *http.Request) (time.Duration, error)
	// observe sends req at once.
	observe(req *http.Request) (*http.Response, Observation, error)
}

// retryTransport is the retry layer. See NewTransport for its rules.
type retryTransport struct {
	next http.RoundTripper
	obs  observer // next, when it is headway's pacer
	c    *config
}

func newRetryTransport(next http.RoundTripper, c *config) *retryTransport {
	t := &retryTransport{next: next, c: c}
	t.obs, _ = next.(observer)
	return t
}

// attempt is the outcome of one attempt.
type attempt struct {
	resp  *http.Response
	obs   Observation
	err   error
	wrote bool // the request was (at least partly) written
	// release frees the attempt's own context, when it has one
	// (hasOwnContext: WithAttemptTimeout); otherwise it is noRelease.
	release       func()
	hasOwnContext bool
}

func noRelease() {}

// CloseIdleConnections closes the idle connections of the transport below,
// so that http.Client.CloseIdleConnections works through headway.
func (t *retryTransport) CloseIdleConnections() { closeIdle(t.next) }

// closeIdle calls rt's CloseIdleConnections, if it has one.
func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip implements http.RoundTripper.
func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errors.New("headway: request has no URL")
	}
	ctx := req.Context()
	st := statsFrom(ctx)
	c := t.c
	key := c.key(req)
	if c.budget != nil {
		c.budget.Deposit(key)
	}

	var hdr http.Header // a header of our own, when one had to be added
	idempotent := repeatable(req.Method, req.Header)
	if !idempotent && c.idempotencyKeys && (req.Method == http.MethodPost || req.Method == http.MethodPatch) {
		k, err := newIdempotencyKey()
		if err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
		hdr = req.Header.Clone()
		if hdr == nil {
			hdr = make(http.Header, 1)
		}
		hdr[IdempotencyKeyHeader] = []string{k}
		idempotent = true
	}
	safeAfterWrite := idempotent || c.retryAll

	body, err := newReplayer(req, c.bufferBody)
	if err != nil {
		return nil, err
	}
	var prevBackoff, waited time.Duration
	for n := 1; ; n++ {
		if t.obs != nil {
			// The pacing layer's pause comes before the attempt (and its
			// timeout): a request held back has not been sent.
			d, err := t.obs.hold(req)
			waited += d
			if err != nil {
				if n == 1 && body.first != nil {
					body.first.Close()
				}
				if rle, ok := err.(*RateLimitError); ok {
					rle.Attempts, rle.Waited = n-1, waited
				}
				return nil, err
			}
		}
		b, err := body.body(n)
		if err != nil {
			return nil, err
		}
		a := t.send(req, hdr, b, !safeAfterWrite)
		if st != nil {
			st.Attempts++
			if n > 1 {
				st.Retries++
			}
		}
		resp, err := a.resp, a.err
		throttled := resp != nil && resp.StatusCode == http.StatusTooManyRequests

		// Is this outcome worth another attempt at all?
		if err != nil {
			if ctx.Err() != nil || !isTransient(err) && !errors.Is(err, ErrAttemptTimeout) {
				return nil, err
			}
			if a.wrote && !safeAfterWrite {
				return nil, err
			}
		} else {
			if throttled && st != nil {
				st.Throttled++
			}
			retry, declined := c.retryResponse(resp.StatusCode, a.obs, safeAfterWrite)
			if declined {
				return nil, t.rateLimited(req, a, n, waited, ReasonServerDeclined, 0)
			}
			if !retry {
				return a.keep(), nil
			}
		}

		// It is; may we make one more, and how long must we wait?
		giveUp := func(reason Reason, limit time.Duration) (*http.Response, error) {
			switch {
			case err != nil: // send has released the failed attempt
				return nil, &RetryError{Attempts: n, Waited: waited, Reason: reason, Err: err}
			case throttled:
				return nil, t.rateLimited(req, a, n, waited, reason, limit)
			default:
				return a.keep(), nil
			}
		}
		if n >= c.maxAttempts {
			return giveUp(ReasonAttemptsExhausted, 0)
		}
		if !body.replayable {
			return giveUp(ReasonBodyNotReplayable, 0)
		}
		backoff := max(c.backoff.Delay(n, prevBackoff), 0)
		prevBackoff = backoff
		wait, reason, limit := c.planWait(ctx, a.obs, throttled, backoff, c.base)
		if reason != 0 {
			return giveUp(reason, limit)
		}
		if !throttled && c.budget != nil && !c.budget.Withdraw(key) {
			if err != nil {
				return nil, &budgetError{err: err}
			}
			return a.keep(), nil
		}

		a.discard(c.clock)
		t.retrying(req, n, a, err, wait)
		if werr := c.clock.Sleep(ctx, wait); werr != nil {
			return nil, fmt.Errorf("headway: waiting %v to retry %s %s: %w", wait, req.Method, redact(req.URL), werr)
		}
		waited += wait
		if st != nil {
			st.Waited += wait
		}
	}
}

// heldBack reports whether err is the pacing layer's refusal to send.
func heldBack(err error) bool {
	// The pacer returns its refusal unwrapped; a plain type assertion keeps
	// this free of allocations on the hot path.
	rle, ok := err.(*RateLimitError)
	return ok && rle.StatusCode == 0
}

// send makes one attempt with the given body and, when hdr is not nil, that
// header instead of the caller's, without touching the caller's request.
// trackWrite asks to learn whether the request was
// written before a failure, which decides whether a non-idempotent request
// may be retried.
func (t *retryTransport) send(req *http.Request, hdr http.Header, body io.ReadCloser, trackWrite bool) attempt {
	a := attempt{release: noRelease}
	ctx := req.Context()
	var wrote *atomic.Bool
	if trackWrite {
		wrote = new(atomic.Bool)
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
		})
	}
	var stop func() bool
	var cancel context.CancelCauseFunc
	if d := t.c.attemptTimeout; d > 0 {
		ctx, cancel = context.WithCancelCause(ctx)
		stop = t.c.clock.AfterFunc(d, func() { cancel(ErrAttemptTimeout) })
		a.release = func() { stop(); cancel(nil) }
		a.hasOwnContext = true
	}
	r := req
	if ctx != req.Context() || body != req.Body || hdr != nil {
		r = req.WithContext(ctx)
		if hdr != nil {
			r.Header = hdr
		}
		r.Body = body
	}
	if t.obs != nil {
		a.resp, a.obs, a.err = t.obs.observe(r)
	} else {
		a.resp, a.err = t.next.RoundTrip(r)
		if a.resp != nil {
			a.obs = ParseHeaders(a.resp.Header, a.resp.StatusCode, t.c.clock.Now())
		}
	}
	if a.resp == nil && a.err == nil {
		a.err = errors.New("headway: transport returned neither a response nor an error")
	}
	if stop != nil {
		stop()
		if a.err != nil && context.Cause(ctx) == ErrAttemptTimeout && req.Context().Err() == nil {
			a.err = &attemptTimeoutError{after: t.c.attemptTimeout}
		}
	}
	if a.err != nil {
		// The RoundTripper contract: a response or an error, never both.
		if a.resp != nil && a.resp.Body != nil {
			a.resp.Body.Close()
		}
		a.resp = nil
		a.release()
	}
	a.wrote = wrote != nil && wrote.Load()
	return a
}

// keep returns the response to the caller; if the attempt had its own
// context, closing the body releases it.
func (a *attempt) keep() *http.Response {
	if a.hasOwnContext {
		if a.resp.Body == nil || a.resp.Body == http.NoBody {
			a.release()
		} else {
			a.resp.Body = &releasingBody{ReadCloser: a.resp.Body, release: a.release}
		}
	}
	return a.resp
}

// drainTimeout bounds the time spent reading a response headway discards
// (or keeps an excerpt of): a server that stalls mid-body costs the
// connection, not the caller's time.
const drainTimeout = time.Second

// discard drains and closes a response that will not be returned, so its
// connection goes back to the pool. A body announced as longer than
// drainLimit is closed at once.
func (a *attempt) discard(clk Clock) {
	if a.resp != nil && a.resp.Body != nil {
		if a.resp.ContentLength <= drainLimit {
			boundedRead(clk, a.resp.Body, func() { io.CopyN(io.Discard, a.resp.Body, drainLimit) })
		}
		a.resp.Body.Close()
	}
	a.release()
}

// boundedRead runs read, closing body if it takes longer than drainTimeout
// so that the read ends.
func boundedRead(clk Clock, body io.Closer, read func()) {
	stop := clk.AfterFunc(drainTimeout, func() { body.Close() })
	read()
	stop()
}

type releasingBody struct {
	io.ReadCloser
	release func()
	done    atomic.Bool
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	if b.done.CompareAndSwap(false, true) {
		b.release()
	}
	return err
}

// retryResponse decides whether a response is worth another attempt, by
// status, by the server's explicit verdict, and by whether the request may be
// repeated after the server may have processed it (repeatable: idempotent,
// keyed, or WithRetryAllMethods). declined reports a 429 the server asked
// not to retry.
func (c *config) retryResponse(code int, obs Observation, repeatable bool) (retry, declined bool) {
	throttled := code == http.StatusTooManyRequests
	retry = c.retryStatus(code)
	switch obs.ShouldRetry {
	case VerdictRetry:
		return code >= 400, false
	case VerdictDoNotRetry:
		return false, throttled
	}
	// A 429 was not processed; any other failure may have been.
	return retry && (throttled || repeatable), false
}

// planWait decides how long to wait before the next attempt, or why to give
// up at once without waiting (reason != 0, with the bound that was hit).
// obs is what the failed attempt's response said (zero for a transport
// error), backoff the strategy's delay, floor the least a 429 without a
// positive Retry-After waits.
func (c *config) planWait(ctx context.Context, obs Observation, throttled bool, backoff, floor time.Duration) (wait time.Duration, reason Reason, limit time.Duration) {
	wait, required := backoff, time.Duration(0)
	if obs.HasRetryAfter && obs.RetryAfter > 0 {
		required = obs.RetryAfter
		if required > c.maxWait {
			return 0, ReasonWaitTooLong, c.maxWait
		}
		// The server knows when it will have capacity again: its
		// Retry-After replaces our guess rather than adding to it.
		wait = required + c.spread(required)
	} else if throttled || obs.HasRetryAfter {
		// A 429 with no usable Retry-After, or any response whose
		// Retry-After is zero or past, is no licence to storm: wait at
		// least the floor.
		wait = max(wait, floor)
	}
	wait = min(wait, max(c.maxWait, required))
	if dl, ok := ctx.Deadline(); ok {
		left := dl.Sub(c.clock.Now())
		if required >= left || wait >= left && required == 0 {
			return 0, ReasonDeadline, max(left, 0)
		}
		if wait >= left {
			wait = required
		}
	}
	return max(wait, 0), 0, 0
}

// spread returns a small positive random addition to a Retry-After wait
// (up to a tenth of it, at most one second), so that many clients told the
// same instant do not all come back at that instant.
func (c *config) spread(required time.Duration) time.Duration {
	s := min(required/10, time.Second)
	return time.Duration(c.rnd.float64() * float64(s))
}

// newRateLimitError builds the error for a 429 headway will not retry,
// keeping the start of its body; the caller still owns (and closes) resp.
func newRateLimitError(req *http.Request, resp *http.Response, obs Observation, attempts int, waited time.Duration, reason Reason, limit time.Duration) *RateLimitError {
	e := &RateLimitError{
		Method:        req.Method,
		URL:           redact(req.URL),
		StatusCode:    resp.StatusCode,
		Status:        resp.Status,
		Header:        resp.Header.Clone(),
		RetryAfter:    obs.RetryAfter,
		HasRetryAfter: obs.HasRetryAfter,
		Policies:      obs.Policies,
		Attempts:      attempts,
		Waited:        waited,
		Reason:        reason,
		Limit:         limit,
	}
	return e
}

// readExcerpt reads the start of a 429's body into e, within drainTimeout.
func (e *RateLimitError) readExcerpt(clk Clock, body io.ReadCloser) {
	if body == nil {
		return
	}
	boundedRead(clk, body, func() { e.Body, _ = io.ReadAll(io.LimitReader(body, MaxBodyExcerpt)) })
}

// rateLimited builds the error for a 429 headway will not retry, consuming
// the response.
func (t *retryTransport) rateLimited(req *http.Request, a attempt, attempts int, waited time.Duration, reason Reason, limit time.Duration) error {
	e := newRateLimitError(req, a.resp, a.obs, attempts, waited, reason, limit)
	e.readExcerpt(t.c.clock, a.resp.Body)
	a.discard(t.c.clock)
	t.c.logger.LogAttrs(req.Context(), slog.LevelInfo, "headway: giving up",
		slog.String("method", req.Method), slog.String("url", e.URL),
		slog.Int("status", e.StatusCode), slog.Int("attempts", attempts),
		slog.String("reason", reason.String()))
	return e
}

// retrying reports a decision to retry to the hook and the logger.
func (t *retryTransport) retrying(req *http.Request, n int, a attempt, err error, wait time.Duration) {
	ev := RetryEvent{Request: req, Attempt: n, Err: err, Wait: wait}
	if a.resp != nil {
		ev.StatusCode = a.resp.StatusCode
		ev.RetryAfter, ev.HasRetryAfter = a.obs.RetryAfter, a.obs.HasRetryAfter
	}
	if t.c.onRetry != nil {
		t.c.onRetry(ev)
	}
	if t.c.logger.Enabled(req.Context(), slog.LevelDebug) {
		attrs := []slog.Attr{
			slog.String("method", req.Method), slog.String("url", redact(req.URL)),
			slog.Int("attempt", n), slog.Duration("wait", wait),
		}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		} else {
			attrs = append(attrs, slog.Int("status", ev.StatusCode))
		}
		if ev.HasRetryAfter {
			attrs = append(attrs, slog.Duration("retry_after", ev.RetryAfter))
		}
		t.c.logger.LogAttrs(req.Context(), slog.LevelDebug, "headway: retrying", attrs...)
	}
}

// redact returns u without its query, fragment and user info, which may hold
// credentials.
func redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

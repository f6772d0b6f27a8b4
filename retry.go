package headway

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/headway-go/headway/internal/decide"
	"github.com/headway-go/headway/ratelimit"
)

// retryTransport is the retry layer. See NewTransport for its rules.
type retryTransport struct {
	next   http.RoundTripper
	obs    observer // next, when it is headway's pacing layer
	c      *config
	ol     overload         // the overload throttle's counts
	parser ratelimit.Parser // when obs is nil
	mark   *marker          // put on the requests sent, when the base may hide a headway stack (layers.go)
}

func newRetryTransport(next http.RoundTripper, c *config) *retryTransport {
	t := &retryTransport{next: next, c: c}
	t.obs, _ = next.(observer)
	return t
}

// CloseIdleConnections closes the idle connections of the transport below,
// so that http.Client.CloseIdleConnections works through headway.
func (t *retryTransport) CloseIdleConnections() { decide.CloseIdle(t.next) }

func (t *retryTransport) below() http.RoundTripper { return t.next }

// RoundTrip implements http.RoundTripper.
func (t *retryTransport) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	if applied(req.Context(), t.c, retryLayer) {
		// A headway stack above, behind a transport of someone else's,
		// retries this request already: one loop is enough.
		return t.next.RoundTrip(req)
	}
	req = mark(req, t.mark)
	ctx := req.Context()
	obs := t.obs
	if obs != nil && applied(ctx, t.c, paceLayer) {
		// A headway stack above paces but does not retry (it would have
		// run the loop): its pacer holds this loop as a whole, not each
		// attempt, so this loop keeps pacing its attempts and tells it.
		pacesBelow(ctx)
	}
	st := statsFrom(ctx)
	c := t.c
	key := c.key(req)
	if c.onDone != nil {
		if st == nil {
			st = new(Stats) // to tell the hook, when the caller keeps none
		}
		return t.loopDone(req, key, obs, st)
	}
	return t.loop(req, key, obs, st)
}

// loopDone is loop for a client with a WithOnDone hook, which hears of
// every request's end: a panic in the transport below included (as an
// error, before the panic goes on). The defer is here, not in RoundTrip,
// so that a request without the hook pays for none.
func (t *retryTransport) loopDone(req *http.Request, key string, obs observer, st *Stats) (resp *http.Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			t.c.done(req, key, st, nil, fmt.Errorf("headway: panic in the transport below: %v", r))
			panic(r)
		}
	}()
	resp, err = t.loop(req, key, obs, st)
	t.c.done(req, key, st, resp, err)
	return resp, err
}

// loop is RoundTrip's retry loop for req, to key, keeping st (nil: none)
// and pacing through obs (nil: not here).
func (t *retryTransport) loop(req *http.Request, key string, obs observer, st *Stats) (*http.Response, error) {
	c, ctx := t.c, req.Context()
	// A caller with a retry loop of its own (an SDK's): its first attempt
	// gets headway's loop, and its later ones are not sent (callerretry.go).
	caller := callerLoopOf(req.Header)
	if caller.retrying() {
		return refuse(req, caller.refusal())
	}
	if c.overload > 0 && !t.ol.admit(key, c.overload, c.clock, c.rnd) {
		// Held back: not sent, so it earns no retry either.
		return refuse(req, &RetryError{Reason: ReasonOverloaded, Err: ErrOverloaded})
	}
	if c.budget != nil {
		c.budget.Deposit(key)
	}
	hdr, idempotent, err := c.idempotency(req)
	if err != nil {
		return refuse(req, err)
	}
	safeAfterWrite := idempotent || c.retryAll

	body, err := newReplayer(req, c.bufferBody)
	if err != nil {
		return nil, err
	}
	var prevBackoff, waited time.Duration
	for n := 1; ; n++ {
		var l lease
		if obs != nil {
			// The pacing layer's pause comes before the attempt (and its
			// timeout): a request held back has not been sent.
			var d time.Duration
			l, d, err = obs.hold(req, key)
			waited += d
			if st != nil {
				st.Waited += d
			}
			if err != nil {
				if n == 1 {
					body.closeFirst()
				}
				if rle, ok := err.(*RateLimitError); ok {
					rle.Attempts, rle.Waited = n-1, waited
				}
				return nil, err
			}
		}
		b, err := body.body(n)
		if err != nil {
			if obs != nil {
				obs.cancel(l)
			}
			return nil, err
		}
		var a attempt
		t.send(&a, obs, req, hdr, b, !safeAfterWrite, l)
		if c.overload > 0 {
			// The caller's context ending is not the backend's doing.
			accepted := a.err == nil && a.resp.StatusCode < 500 || ctx.Err() != nil
			t.ol.record(key, c.clock, accepted)
		}
		if c.onAttempt != nil {
			c.attempted(req, key, n, &a)
		}
		if st != nil {
			st.Attempts++
			if n > 1 {
				st.Retries++
			}
		}
		err = a.err
		// A 429, or a 403 that says it is a rate limit (GitHub's).
		throttled := a.resp != nil && decide.Throttled(a.resp.StatusCode, &a.obs)

		// Is this outcome worth another attempt at all?
		if err != nil {
			if ctx.Err() != nil || !decide.IsTransient(err) && !errors.Is(err, ErrAttemptTimeout) {
				return nil, err
			}
			if a.wrote && !safeAfterWrite && !decide.Unprocessed(err) {
				return nil, err
			}
		} else {
			if throttled && st != nil {
				st.Throttled++
			}
			code := a.resp.StatusCode
			if throttled {
				code = http.StatusTooManyRequests // was not processed
			}
			retry, declined := c.rules.RetryResponse(code, a.obs.ShouldRetry, safeAfterWrite)
			if declined {
				return t.throttledGiveUp(req, &a, n, waited, ReasonServerDeclined, 0, caller)
			}
			if !retry {
				return caller.answer(a.keep()), nil
			}
		}

		// It is; may we make one more, and how long must we wait?
		giveUp := func(reason Reason, bound time.Duration) (*http.Response, error) {
			switch {
			case err != nil: // send has released the failed attempt
				return nil, &RetryError{Attempts: n, Waited: waited, Reason: reason, Err: err}
			case throttled:
				return t.throttledGiveUp(req, &a, n, waited, reason, bound, caller)
			default:
				return caller.answer(a.keep()), nil
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
		wait, reason, bound := c.rules.PlanWait(ctx, a.obs, throttled, backoff, c.base)
		if reason != 0 {
			return giveUp(Reason(reason), bound)
		}
		if !throttled && c.budget != nil && !c.budget.Withdraw(key) {
			return giveUp(ReasonBudgetExhausted, 0)
		}

		t.retrying(req, key, n, &a, wait)
		spent, werr := a.discardWithin(ctx, c.clock, wait, throttled)
		waited += spent
		if st != nil {
			st.Waited += spent
		}
		if werr != nil {
			return nil, t.canceled(req, &a, n, waited, werr)
		}
	}
}

// idempotency returns the header to send instead of the caller's (nil: the
// caller's), with an Idempotency-Key added when WithIdempotencyKeys asks for
// one, and whether the request may be repeated after it was written.
func (c *config) idempotency(req *http.Request) (http.Header, bool, error) {
	if decide.Repeatable(req.Method, req.Header) {
		return nil, true, nil
	}
	if !c.idempotencyKeys || req.Method != http.MethodPost && req.Method != http.MethodPatch {
		return nil, false, nil
	}
	k, err := newIdempotencyKey()
	if err != nil {
		return nil, false, err
	}
	hdr := req.Header.Clone()
	if hdr == nil {
		hdr = make(http.Header, 1)
	}
	hdr[IdempotencyKeyHeader] = []string{k}
	return hdr, true, nil
}

// heldBack reports whether err is the pacing layer's refusal to send.
func heldBack(err error) bool {
	// The pacer returns its refusal unwrapped; a plain type assertion keeps
	// this free of allocations on the hot path.
	rle, ok := err.(*RateLimitError)
	return ok && rle.StatusCode == 0
}

// newRateLimitError builds the error for a 429 headway will not retry; the
// caller still owns (and closes) resp.
func newRateLimitError(req *http.Request, resp *http.Response, obs ratelimit.Observation, attempts int, waited time.Duration, reason Reason, bound time.Duration) *RateLimitError {
	return &RateLimitError{
		Method:        req.Method,
		URL:           decide.Redact(req.URL),
		StatusCode:    resp.StatusCode,
		Status:        resp.Status,
		Header:        resp.Header.Clone(),
		RetryAfter:    obs.RetryAfter,
		HasRetryAfter: obs.HasRetryAfter,
		Policies:      obs.Policies,
		Attempts:      attempts,
		Waited:        waited,
		Reason:        reason,
		Bound:         bound,
	}
}

// throttledGiveUp ends a request whose last answer was a 429 headway will
// not retry: with a *RateLimitError, or, for a caller that retries on its
// own, with the response itself and the caller's verdict not to retry it
// (an error would look to the caller like a connection failure, worth
// another attempt).
func (t *retryTransport) throttledGiveUp(req *http.Request, a *attempt, attempts int, waited time.Duration, reason Reason, bound time.Duration, caller callerLoop) (*http.Response, error) {
	if caller.verdict != "" {
		t.gaveUp(req, a.status, attempts, reason)
		return caller.answer(a.keep()), nil
	}
	return nil, t.rateLimited(req, a, attempts, waited, reason, bound)
}

// rateLimited builds the error for a 429 headway will not retry, consuming
// the response.
func (t *retryTransport) rateLimited(req *http.Request, a *attempt, attempts int, waited time.Duration, reason Reason, bound time.Duration) error {
	e := newRateLimitError(req, a.resp, a.obs, attempts, waited, reason, bound)
	e.Body = a.excerpt(t.c.clock)
	t.gaveUp(req, e.StatusCode, attempts, reason)
	return e
}

// canceled builds the error for a request whose context ended while headway
// waited to retry it: what the last attempt said is kept, and the context's
// error is wrapped.
func (t *retryTransport) canceled(req *http.Request, a *attempt, attempts int, waited time.Duration, ctxErr error) error {
	t.gaveUp(req, a.status, attempts, ReasonCanceled)
	if decide.Throttled(a.status, &a.obs) {
		e := newRateLimitError(req, a.resp, a.obs, attempts, waited, ReasonCanceled, 0)
		e.Body, e.Err = a.body, ctxErr
		return e
	}
	return &RetryError{Attempts: attempts, Waited: waited, Reason: ReasonCanceled, StatusCode: a.status, Err: ctxErr}
}

// gaveUp logs a give-up.
func (t *retryTransport) gaveUp(req *http.Request, status, attempts int, reason Reason) {
	t.c.logger.LogAttrs(req.Context(), slog.LevelInfo, "headway: giving up",
		slog.String("method", req.Method), slog.String("url", decide.Redact(req.URL)),
		slog.Int("status", status), slog.Int("attempts", attempts),
		slog.String("reason", reason.String()))
}

// retrying reports a decision to retry to the hook and the logger.
func (t *retryTransport) retrying(req *http.Request, key string, n int, a *attempt, wait time.Duration) {
	ev := RetryEvent{Request: req, Key: key, Attempt: n, Err: a.err, Wait: wait}
	if a.resp != nil {
		ev.StatusCode = a.resp.StatusCode
		ev.RetryAfter, ev.HasRetryAfter = a.obs.RetryAfter, a.obs.HasRetryAfter
	}
	t.c.report(req.Context(), ev)
}

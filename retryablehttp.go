package headway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	cleanhttp "github.com/hashicorp/go-cleanhttp"
	retryablehttp "github.com/hashicorp/go-retryablehttp"
)

// ConfigureRetryablehttp makes c, a go-retryablehttp client, retry the way
// headway does. It sets:
//
//   - c.Backoff to RetryablehttpBackoff(opts...): the server's Retry-After
//     is the least wait, plus jittered exponential backoff;
//   - c.CheckRetry to RetryablehttpCheckRetry(opts...): headway's decision,
//     idempotency rules included;
//   - c.RetryMax to WithMaxAttempts minus one (DefaultMaxAttempts-1 unless
//     set; 0 with WithoutRetries);
//   - c.ErrorHandler to one that, when c gives up on a 429, returns a
//     *RateLimitError (ReasonAttemptsExhausted when RetryMax ran out) with
//     Attempts filled in, and otherwise behaves as retryablehttp's default
//     (the body is drained and closed, the error says how many attempts were
//     made). An ErrorHandler c already had is kept and called afterwards,
//     with the typed error;
//   - c.HTTPClient to a copy of itself (a fresh pooled client if it was nil)
//     whose Transport records, for requests with a non-idempotent method,
//     whether the request carried an Idempotency-Key and whether it was
//     written before a transport error. CheckRetry needs this to retry such a
//     request safely after a broken connection; the *http.Client c had is
//     not modified. If you replace c.HTTPClient afterwards, those requests
//     fall back to the safe side described at RetryablehttpCheckRetry.
//
// c.RetryWaitMin and c.RetryWaitMax keep their meaning unless opts set the
// backoff (see RetryablehttpBackoff). Call it once per client, before use; c
// must not be nil.
//
// Options that belong to headway's own transport have no effect here:
// retryablehttp sleeps on its own timer, counts its own attempts and rewinds
// its own bodies, so WithRetryBudget, WithOnRetry, WithAttemptTimeout,
// WithBodyBuffering, WithIdempotencyKeys and WithKey are ignored, and
// WithClock only supplies the current time. WithLogger logs give-ups on 429s.
// Do not also put a NewTransport with retries inside c.HTTPClient: retries
// would multiply (use WithoutRetries there to keep pacing only).
func ConfigureRetryablehttp(c *retryablehttp.Client, opts ...Option) {
	p := newRetryablehttpPolicy(opts)
	c.Backoff = p.backoff
	c.CheckRetry = p.checkRetry
	c.RetryMax = p.c.maxAttempts - 1
	if !p.c.retry {
		c.RetryMax = 0
	}
	c.ErrorHandler = p.errorHandler(c.ErrorHandler)

	hc := c.HTTPClient
	if hc == nil {
		hc = cleanhttp.DefaultPooledClient()
	}
	cp := *hc
	if _, ok := cp.Transport.(*attemptInfoTransport); !ok {
		cp.Transport = &attemptInfoTransport{next: cp.Transport}
	}
	c.HTTPClient = &cp
}

// RetryablehttpBackoff returns a retryablehttp.Backoff that waits as
// headway's retry layer does. When the response carries a positive
// Retry-After (any form ParseHeaders reads: delay-seconds, fractional
// seconds, an HTTP-date measured against the response's Date header,
// Retry-After-Ms, X-Ms-Retry-After-Ms), the wait is the larger of that
// delay plus a small random spread (up to a tenth of it, at most one second;
// never negative) and the jittered backoff for the retry. Otherwise it is the
// jittered backoff alone, except that a 429 whose Retry-After is absent, zero
// or in the past waits at least the base delay: it is no licence to retry at
// once.
//
// The jittered backoff follows WithJitter and WithRandSource. Its base and
// cap are retryablehttp's min and max (the client's RetryWaitMin and
// RetryWaitMax), so that those fields keep their meaning, unless opts
// include WithBackoffDelays or WithBackoff, which then win and min and max
// are ignored; min and max both <= 0 (an unset client) also use headway's
// delays (DefaultBaseDelay, DefaultMaxDelay unless set). attemptNum counts
// retries from 0, as retryablehttp does. retryablehttp keeps no state
// between the retries of a request, so a backoff that grows from the
// previous delay (JitterDecorrelated, or a Backoff given to WithBackoff) is
// replayed from the first retry on each call, with the same distribution
// as in headway's transport.
//
// The wait never exceeds WithMaxWait (default DefaultMaxWait) unless the
// server's Retry-After asks for more, which RetryablehttpCheckRetry refuses
// to wait for. When the request's context has a deadline that the wait
// would pass but the server's Retry-After alone would not, the random part
// is dropped so that the retry happens before the deadline. The result is
// never negative. The returned function is safe for concurrent use.
func RetryablehttpBackoff(opts ...Option) retryablehttp.Backoff {
	return newRetryablehttpPolicy(opts).backoff
}

// RetryablehttpCheckRetry returns a retryablehttp.CheckRetry that decides as
// headway's retry layer does:
//
//   - the context is done: no retry, the context's error;
//   - a transport error is retried only if it is transient (refused, reset,
//     cut short, timed out; never a bad URL or a certificate that does not
//     verify) and repeating the request is safe: its method is idempotent
//     (RFC 9110), it carries an Idempotency-Key, or it was never written.
//     CheckRetry is not given the request: it learns the method from the
//     *url.Error that net/http returns, and the Idempotency-Key and whether
//     the request was written from the transport ConfigureRetryablehttp
//     installs. Without that transport, a request of a non-idempotent
//     method is retried only after an error that shows nothing was sent
//     (connection refused, a failed DNS lookup or dial), and never after a
//     reset or timeout, even with an Idempotency-Key;
//   - a response: X-Should-Retry or Stripe-Should-Retry, when the server
//     sends them, decide (true retries any status >= 400, for any method);
//     otherwise the statuses of WithRetryStatuses (default
//     DefaultRetryStatuses) are retried, a 429 for any method, any other
//     status only for idempotent methods or requests with an
//     Idempotency-Key (or every method with WithRetryAllMethods);
//   - a Retry-After longer than WithMaxWait, or that would end after the
//     context's deadline: no retry. A 429 then yields a *RateLimitError
//     (ReasonWaitTooLong or ReasonDeadline; ReasonServerDeclined when the
//     server said not to retry it), which retryablehttp's Client.Do returns
//     wrapped, so errors.As and errors.Is(err, ErrRateLimitExceeded) find
//     it. Its Body holds the start of the response body, which has been read
//     and closed. Attempts is 0 (unknown) unless ConfigureRetryablehttp's
//     error handler fills it in. Any other status is returned to the caller
//     as it is, with a nil error.
//
// WithMaxAttempts cannot be enforced here (the client's RetryMax counts the
// attempts); WithoutRetries makes it never retry. The returned function is
// safe for concurrent use.
func RetryablehttpCheckRetry(opts ...Option) retryablehttp.CheckRetry {
	return newRetryablehttpPolicy(opts).checkRetry
}

// retryablehttpPolicy holds the configuration shared by the functions that
// plug headway into a retryablehttp.Client.
type retryablehttpPolicy struct {
	c *config
	// ownDelays: WithBackoffDelays or WithBackoff was given, so
	// retryablehttp's min and max are ignored.
	ownDelays bool
}

func newRetryablehttpPolicy(opts []Option) *retryablehttpPolicy {
	return &retryablehttpPolicy{c: newConfig(opts), ownDelays: setsBackoff(opts)}
}

// setsBackoff reports whether opts include WithBackoffDelays or WithBackoff.
func setsBackoff(opts []Option) bool {
	probe := config{base: -1, cap: -1}
	for _, o := range opts {
		if o != nil {
			o(&probe)
		}
	}
	return probe.base != -1 || probe.cap != -1 || probe.backoff != nil
}

// backoff implements retryablehttp.Backoff.
func (p *retryablehttpPolicy) backoff(lo, hi time.Duration, attemptNum int, resp *http.Response) time.Duration {
	c := p.c
	b, base := c.backoff, c.base
	if !p.ownDelays && (lo > 0 || hi > 0) {
		b = newExpBackoff(lo, hi, c.jitter, c.rnd)
		base = max(lo, 0)
		if hi > 0 {
			base = min(base, hi)
		}
	}
	backoff := delayAt(b, max(attemptNum, 0)+1)
	if resp == nil {
		return min(backoff, c.maxWait)
	}
	ctx := context.Background()
	if resp.Request != nil {
		ctx = resp.Request.Context()
	}
	obs := ParseHeaders(resp.Header, resp.StatusCode, c.clock.Now())
	var retryAfter time.Duration
	if obs.HasRetryAfter {
		retryAfter = obs.RetryAfter
	}
	wait, reason, _ := c.planWait(ctx, obs, resp.StatusCode == http.StatusTooManyRequests, backoff, base)
	if reason != 0 {
		// CheckRetry has refused such a retry already; should a caller's
		// own CheckRetry allow it, still never retry sooner than asked.
		wait = max(retryAfter, min(backoff, c.maxWait))
	}
	return wait
}

// maxBackoffChain bounds how many earlier retries delayAt replays.
const maxBackoffChain = 64

// delayAt returns b's delay before retry n. A Backoff may grow from the
// delay it gave for the previous retry, which retryablehttp does not keep,
// so the chain of earlier delays is replayed (its last maxBackoffChain
// steps): the result has the distribution it would have had with state.
// headway's own stateless jitters take one draw.
func delayAt(b Backoff, n int) time.Duration {
	if eb, ok := b.(*expBackoff); ok && eb.jitter != JitterDecorrelated {
		return max(b.Delay(n, 0), 0)
	}
	var prev time.Duration
	for i := max(1, n-maxBackoffChain+1); i <= n; i++ {
		prev = max(b.Delay(i, prev), 0)
	}
	return prev
}

// checkRetry implements retryablehttp.CheckRetry.
func (p *retryablehttpPolicy) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if cerr := ctx.Err(); cerr != nil {
		return false, cerr
	}
	if resp != nil {
		// Client.Do asks again after a response handler fails; a 429 this
		// policy already refused stays refused, with its typed error.
		if rb, ok := resp.Body.(*refusedBody); ok {
			return false, rb.err
		}
	}
	if !p.c.retry {
		return false, nil
	}
	if err != nil {
		return p.retryError(resp, err), nil
	}
	if resp == nil {
		return false, nil
	}
	return p.retryResponse(ctx, resp)
}

// retryError decides on a transport error (or, with resp, on the error of a
// retryablehttp response handler).
func (p *retryablehttpPolicy) retryError(resp *http.Response, err error) bool {
	if !isTransient(err) {
		return false
	}
	if p.c.retryAll {
		return true
	}
	if resp != nil {
		// The response arrived: the request was written and maybe processed.
		return resp.Request != nil && repeatable(resp.Request.Method, resp.Request.Header)
	}
	var ae *attemptError
	if errors.As(err, &ae) {
		return ae.keyed || !ae.wrote
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Op != "" && isIdempotentMethod(strings.ToUpper(ue.Op)) {
		return true
	}
	return sentNothing(err)
}

// sentNothing reports whether err shows that the request never left: the
// connection was refused or could not be dialled, or the host did not
// resolve.
func sentNothing(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// retryResponse decides on a response, as retryTransport.RoundTrip does.
func (p *retryablehttpPolicy) retryResponse(ctx context.Context, resp *http.Response) (bool, error) {
	c := p.c
	code := resp.StatusCode
	throttled := code == http.StatusTooManyRequests
	now := c.clock.Now()
	obs := ParseHeaders(resp.Header, code, now)
	giveUp := func(reason Reason, limit time.Duration) (bool, error) {
		if throttled {
			return false, p.refuse(resp, obs, reason, limit)
		}
		return false, nil
	}

	repeatable := c.retryAll || resp.Request != nil && repeatable(resp.Request.Method, resp.Request.Header)
	retry, declined := c.retryResponse(code, obs, repeatable)
	if declined {
		return giveUp(ReasonServerDeclined, 0)
	}
	if !retry {
		return false, nil
	}
	var retryAfter time.Duration
	if obs.HasRetryAfter {
		retryAfter = obs.RetryAfter
	}
	// Only the server's Retry-After can make the wait impossible here: the
	// backoff is chosen later, by the Backoff hook, within max wait.
	if _, reason, limit := c.planWait(ctx, obs, false, 0, 0); reason != 0 && retryAfter > 0 {
		return giveUp(reason, limit)
	}
	return true, nil
}

// refuse builds the *RateLimitError for a 429 that will not be retried. It
// reads the start of the body into the error and closes the body, which it
// replaces with an empty one that remembers the error.
func (p *retryablehttpPolicy) refuse(resp *http.Response, obs Observation, reason Reason, limit time.Duration) error {
	req := resp.Request
	if req == nil {
		req = &http.Request{}
	}
	err := newRateLimitError(req, resp, obs, 0, 0, reason, limit)
	err.readExcerpt(p.c.clock, resp.Body)
	if resp.Body != nil {
		io.CopyN(io.Discard, resp.Body, drainLimit)
		resp.Body.Close()
	}
	resp.Body = &refusedBody{err: err}
	return err
}

// refusedBody replaces the body of a 429 refused by checkRetry: empty, and
// carrying the error.
type refusedBody struct{ err error }

func (*refusedBody) Read([]byte) (int, error) { return 0, io.EOF }
func (*refusedBody) Close() error             { return nil }

// errorHandler returns the retryablehttp.ErrorHandler that
// ConfigureRetryablehttp installs; next is the client's previous one.
func (p *retryablehttpPolicy) errorHandler(next retryablehttp.ErrorHandler) retryablehttp.ErrorHandler {
	return func(resp *http.Response, err error, tries int) (*http.Response, error) {
		var rle *RateLimitError
		switch {
		case errors.As(err, &rle):
			if rle.Attempts == 0 {
				rle.Attempts = tries
			}
		case err == nil && resp != nil && resp.StatusCode == http.StatusTooManyRequests:
			// RetryMax ran out while the server kept answering 429.
			obs := ParseHeaders(resp.Header, resp.StatusCode, p.c.clock.Now())
			err = p.refuse(resp, obs, ReasonAttemptsExhausted, 0)
			if errors.As(err, &rle) {
				rle.Attempts = tries
			}
		}
		if next != nil {
			return next(resp, err, tries)
		}
		// retryablehttp's default: drain and close the body, return an error.
		var prefix string
		if resp != nil {
			if resp.Body != nil {
				io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
			}
			if resp.Request != nil {
				prefix = resp.Request.Method + " " + redact(resp.Request.URL) + " "
			}
		}
		if err == nil {
			return nil, fmt.Errorf("%sgiving up after %d attempt(s)", prefix, tries)
		}
		return nil, fmt.Errorf("%sgiving up after %d attempt(s): %w", prefix, tries, err)
	}
}

// attemptInfoTransport is the transport ConfigureRetryablehttp installs. A
// transient error of a request with a non-idempotent method comes back
// wrapped in an *attemptError saying whether the request had an
// Idempotency-Key and whether it was written, which CheckRetry, given only
// the error, could not learn otherwise. Other errors pass unchanged.
type attemptInfoTransport struct {
	next http.RoundTripper // nil: http.DefaultTransport
}

// RoundTrip implements http.RoundTripper.
func (t *attemptInfoTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	if isIdempotentMethod(req.Method) {
		return next.RoundTrip(req)
	}
	keyed := hasIdempotencyKey(req.Header)
	var wrote atomic.Bool
	r := req
	if !keyed {
		r = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
		}))
	}
	resp, err := next.RoundTrip(r)
	if err != nil && isTransient(err) {
		return nil, &attemptError{err: err, keyed: keyed, wrote: keyed || wrote.Load()}
	}
	return resp, err
}

// CloseIdleConnections passes the call on, so that the client's
// CloseIdleConnections (which retryablehttp calls when it gives up) still
// reaches the transport underneath.
func (t *attemptInfoTransport) CloseIdleConnections() {
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	if ci, ok := next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

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

// Package retryableadapter makes a github.com/hashicorp/go-retryablehttp
// client retry the way headway does, for code that already uses one:
//
//	c := retryablehttp.NewClient()
//	retryableadapter.Configure(c, retryableadapter.WithMaxWait(30*time.Second))
//	resp, err := c.Get(url)
//	var rle *headway.RateLimitError
//	if errors.As(err, &rle) { /* the server kept answering 429 */ }
//
// The decisions are headway's own (the same code its transport runs): the
// server's Retry-After in every form is the least wait, a 429 is retried for
// any method but a 5xx or a broken connection only for requests that may be
// repeated, a wait longer than the max wait or past the context's deadline
// is refused at once with a typed *headway.RateLimitError.
//
// What go-retryablehttp cannot do through its hooks (pacing requests before
// the server refuses them, a retry budget per host, per-attempt timeouts)
// needs headway's transport: put headway.NewTransport in the client's
// HTTPClient with headway.WithoutRetries to keep pacing only, or use
// headway.New instead.
package retryableadapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	cleanhttp "github.com/hashicorp/go-cleanhttp"
	retryablehttp "github.com/hashicorp/go-retryablehttp"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/decide"
	"github.com/headway-go/headway/ratelimit"
)

// Configure makes c, a go-retryablehttp client, retry the way headway does.
// It sets:
//
//   - c.Backoff to Backoff(opts...);
//   - c.CheckRetry to CheckRetry(opts...);
//   - c.RetryMax to WithMaxAttempts minus one (0 with WithoutRetries);
//   - c.ErrorHandler to one that, when c gives up on a 429, returns a
//     *headway.RateLimitError (ReasonAttemptsExhausted when RetryMax ran
//     out) with Attempts filled in, and otherwise behaves as retryablehttp's
//     default (the body is drained and closed, the error says how many
//     attempts were made). An ErrorHandler c already had is kept and called
//     afterwards, with the typed error;
//   - c.HTTPClient to a copy of itself (a fresh pooled client if it was nil)
//     whose Transport records, for requests with a non-idempotent method,
//     whether the request carried an Idempotency-Key and whether it was
//     written before a transport error. CheckRetry needs this to retry such
//     a request safely after a broken connection; the *http.Client c had is
//     not modified. If you replace c.HTTPClient afterwards, those requests
//     fall back to the safe side described at CheckRetry.
//
// c.RetryWaitMin and c.RetryWaitMax keep their meaning unless opts set the
// backoff (see Backoff). Call it once per client, before use; c must not be
// nil. Do not also put a headway transport with retries inside
// c.HTTPClient: retries would multiply (use headway.WithoutRetries there to
// keep pacing only).
func Configure(c *retryablehttp.Client, opts ...Option) {
	p := newConfig(opts)
	c.Backoff = p.backoffHook
	c.CheckRetry = p.checkRetry
	c.RetryMax = p.maxAttempts - 1
	if !p.retry {
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

// Backoff returns a retryablehttp.Backoff that waits as headway's retry
// layer does. When the response carries a positive Retry-After (any form
// ratelimit.ParseHeaders reads: delay-seconds, fractional seconds, an
// HTTP-date measured against the response's Date header, Retry-After-Ms,
// X-Ms-Retry-After-Ms), the wait is that delay plus a small random spread
// (up to a tenth of it, at most one second; never negative). Otherwise it is
// the jittered backoff alone, except that a 429 whose Retry-After is absent,
// zero or in the past waits at least the base delay, and never less than
// 100 ms: it is no licence to retry at once.
//
// The jittered backoff follows WithJitter and WithRandSource. Its base and
// cap are retryablehttp's min and max (the client's RetryWaitMin and
// RetryWaitMax), so that those fields keep their meaning, unless opts
// include WithBackoffDelays or WithBackoff, which then win; min and max both
// <= 0 (an unset client) also use the adapter's delays
// (headway.DefaultBaseDelay and headway.DefaultMaxDelay unless set).
// attemptNum counts retries from 0, as retryablehttp does. retryablehttp
// keeps no state between the retries of a request, so a backoff that grows
// from the previous delay (headway.JitterDecorrelated, or a Backoff given
// to WithBackoff) is replayed from the first retry on each call, with the
// same distribution as in headway's transport.
//
// The wait never exceeds WithMaxWait unless the server's Retry-After asks
// for more, which CheckRetry refuses to wait for. When the request's context
// has a deadline that the wait would pass but the server's Retry-After alone
// would not, the random part is dropped so that the retry happens before the
// deadline. The result is never negative. The returned function is safe for
// concurrent use.
func Backoff(opts ...Option) retryablehttp.Backoff { return newConfig(opts).backoffHook }

// CheckRetry returns a retryablehttp.CheckRetry that decides as headway's
// retry layer does:
//
//   - the context is done: no retry, the context's error;
//   - a transport error is retried only if it is transient (refused, reset,
//     cut short, timed out, an HTTP/2 stream reset; never a bad URL or a
//     certificate that does not verify) and repeating the request is safe:
//     its method is idempotent (RFC 9110), it carries an Idempotency-Key, or
//     it was never processed. CheckRetry is not given the request: it learns
//     the method from the *url.Error that net/http returns, and the
//     Idempotency-Key and whether the request was written from the
//     transport Configure installs. Without that transport, a request of a
//     non-idempotent method is retried only after an error that shows
//     nothing was processed (connection refused, a failed DNS lookup or
//     dial, a refused HTTP/2 stream), and never after a reset or timeout,
//     even with an Idempotency-Key;
//   - a response: X-Should-Retry or Stripe-Should-Retry, when the server
//     sends them, decide (true retries any status >= 400, for any method);
//     otherwise the statuses of WithRetryStatuses are retried, a 429 for any
//     method, any other status only for idempotent methods or requests with
//     an Idempotency-Key (or every method with WithRetryAllMethods);
//   - a Retry-After longer than WithMaxWait, or that would end after the
//     context's deadline: no retry. A 429 then yields a
//     *headway.RateLimitError (ReasonWaitTooLong or ReasonDeadline;
//     ReasonServerDeclined when the server said not to retry it), which
//     retryablehttp's Client.Do returns wrapped, so errors.As and
//     errors.Is(err, headway.ErrRateLimitExceeded) find it. Its Body holds
//     the start of the response body, which has been read and closed.
//     Attempts is 0 (unknown) unless Configure's error handler fills it in.
//     Any other status is returned to the caller as it is, with a nil error.
//
// WithMaxAttempts cannot be enforced here (the client's RetryMax counts the
// attempts); WithoutRetries makes it never retry. The returned function is
// safe for concurrent use.
func CheckRetry(opts ...Option) retryablehttp.CheckRetry { return newConfig(opts).checkRetry }

// backoffHook implements retryablehttp.Backoff.
func (c *config) backoffHook(lo, hi time.Duration, attemptNum int, resp *http.Response) time.Duration {
	base, capd := c.base, c.cap
	if !c.ownDelays && (lo > 0 || hi > 0) {
		base, capd = max(lo, 0), hi
		if hi > 0 {
			base = min(base, hi)
		}
	}
	b := c.backoff
	if b == nil {
		b = headway.NewBackoff(base, capd, c.jitter, c.rnd)
	}
	backoff := c.delayAt(b, max(attemptNum, 0)+1)
	if resp == nil {
		return min(backoff, c.maxWait)
	}
	ctx := context.Background()
	if resp.Request != nil {
		ctx = resp.Request.Context()
	}
	obs := ratelimit.ParseHeaders(resp.Header, resp.StatusCode, c.now())
	var retryAfter time.Duration
	if obs.HasRetryAfter {
		retryAfter = obs.RetryAfter
	}
	wait, reason, _ := c.rules.PlanWait(ctx, obs, resp.StatusCode == http.StatusTooManyRequests, backoff, base)
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
func (c *config) delayAt(b headway.Backoff, n int) time.Duration {
	if c.backoff == nil && c.jitter != headway.JitterDecorrelated {
		return max(b.Delay(n, 0), 0)
	}
	var prev time.Duration
	for i := max(1, n-maxBackoffChain+1); i <= n; i++ {
		prev = max(b.Delay(i, prev), 0)
	}
	return prev
}

// checkRetry implements retryablehttp.CheckRetry.
func (c *config) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
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
	if !c.retry {
		return false, nil
	}
	if err != nil {
		return c.retryError(resp, err), nil
	}
	if resp == nil {
		return false, nil
	}
	return c.retryResponse(ctx, resp)
}

// retryError decides on a transport error (or, with resp, on the error of a
// retryablehttp response handler).
func (c *config) retryError(resp *http.Response, err error) bool {
	if !decide.IsTransient(err) {
		return false
	}
	if c.retryAll {
		return true
	}
	if resp != nil {
		// The response arrived: the request was written and maybe processed.
		return resp.Request != nil && c.repeatable(resp.Request)
	}
	var ae *attemptError
	if errors.As(err, &ae) {
		return ae.keyed || !ae.wrote || decide.Unprocessed(err)
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Op != "" && decide.IsIdempotentMethod(strings.ToUpper(ue.Op)) {
		return true
	}
	return sentNothing(err)
}

// sentNothing reports whether err shows that the request was not processed:
// the connection was refused or could not be dialled, the host did not
// resolve, or an HTTP/2 server refused the stream.
func sentNothing(err error) bool {
	if decide.Unprocessed(err) {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// retryResponse decides on a response, as headway's retry layer does.
func (c *config) retryResponse(ctx context.Context, resp *http.Response) (bool, error) {
	code := resp.StatusCode
	throttled := code == http.StatusTooManyRequests
	obs := ratelimit.ParseHeaders(resp.Header, code, c.now())
	giveUp := func(reason headway.Reason, bound time.Duration) (bool, error) {
		if throttled {
			return false, c.refuse(resp, obs, reason, bound)
		}
		return false, nil
	}
	retry, declined := c.rules.RetryResponse(code, obs.ShouldRetry, c.repeatable(resp.Request))
	if declined {
		return giveUp(headway.ReasonServerDeclined, 0)
	}
	if !retry {
		return false, nil
	}
	// Only the server's Retry-After can make the wait impossible here: the
	// backoff is chosen later, by the Backoff hook, within max wait.
	if obs.HasRetryAfter && obs.RetryAfter > 0 {
		if _, reason, bound := c.rules.PlanWait(ctx, obs, false, 0, 0); reason != 0 {
			return giveUp(headway.Reason(reason), bound)
		}
	}
	return true, nil
}

// refuse builds the *headway.RateLimitError for a 429 that will not be
// retried. It reads the start of the body into the error and closes the
// body, which it replaces with an empty one that remembers the error.
func (c *config) refuse(resp *http.Response, obs ratelimit.Observation, reason headway.Reason, bound time.Duration) error {
	e := &headway.RateLimitError{
		StatusCode:    resp.StatusCode,
		Status:        resp.Status,
		Header:        resp.Header.Clone(),
		RetryAfter:    obs.RetryAfter,
		HasRetryAfter: obs.HasRetryAfter,
		Policies:      obs.Policies,
		Reason:        reason,
		Bound:         bound,
	}
	if req := resp.Request; req != nil {
		e.Method, e.URL = req.Method, decide.Redact(req.URL)
	}
	if resp.Body != nil {
		e.Body = drainBody(resp.Body)
	}
	resp.Body = &refusedBody{err: e}
	c.logger.LogAttrs(context.Background(), slog.LevelInfo, "headway: giving up",
		slog.String("method", e.Method), slog.String("url", e.URL),
		slog.Int("status", e.StatusCode), slog.String("reason", reason.String()))
	return e
}

// drainTimeout bounds the time spent reading a refused 429's body.
const drainTimeout = time.Second

// drainBody reads the start of body (at most headway.MaxBodyExcerpt bytes)
// and up to 64 KiB more, within drainTimeout, then closes it.
func drainBody(body io.ReadCloser) []byte {
	stop := time.AfterFunc(drainTimeout, func() { body.Close() })
	defer stop.Stop()
	b, _ := io.ReadAll(io.LimitReader(body, headway.MaxBodyExcerpt))
	io.CopyN(io.Discard, body, 64<<10)
	body.Close()
	return b
}

// refusedBody replaces the body of a 429 refused by checkRetry: empty, and
// carrying the error.
type refusedBody struct{ err error }

func (*refusedBody) Read([]byte) (int, error) { return 0, io.EOF }
func (*refusedBody) Close() error             { return nil }

// errorHandler returns the retryablehttp.ErrorHandler that Configure
// installs; next is the client's previous one.
func (c *config) errorHandler(next retryablehttp.ErrorHandler) retryablehttp.ErrorHandler {
	return func(resp *http.Response, err error, tries int) (*http.Response, error) {
		var rle *headway.RateLimitError
		switch {
		case errors.As(err, &rle):
			if rle.Attempts == 0 {
				rle.Attempts = tries
			}
		case err == nil && resp != nil && resp.StatusCode == http.StatusTooManyRequests:
			// RetryMax ran out while the server kept answering 429.
			obs := ratelimit.ParseHeaders(resp.Header, resp.StatusCode, c.now())
			err = c.refuse(resp, obs, headway.ReasonAttemptsExhausted, 0)
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
				prefix = resp.Request.Method + " " + decide.Redact(resp.Request.URL) + " "
			}
		}
		if err == nil {
			return nil, fmt.Errorf("%sgiving up after %d attempt(s)", prefix, tries)
		}
		return nil, fmt.Errorf("%sgiving up after %d attempt(s): %w", prefix, tries, err)
	}
}

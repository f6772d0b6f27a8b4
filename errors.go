package headway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// ErrRateLimitExceeded is matched by errors.Is for every *RateLimitError:
// the server kept answering 429 and headway gave up.
var ErrRateLimitExceeded = errors.New("headway: rate limit exceeded")

// ErrRetryBudgetExhausted is matched by errors.Is for the *RetryError
// returned when a request failed and the retry budget for its key refused
// another attempt (see WithRetryBudget); the transport error is wrapped too.
var ErrRetryBudgetExhausted = errors.New("headway: retry budget exhausted")

// ErrOverloaded is the error a *RetryError wraps (Reason ReasonOverloaded)
// when the overload throttle held a request back without sending it: most
// recent attempts to its key failed (see WithOverloadThrottle).
var ErrOverloaded = errors.New("headway: backend overloaded, request not sent")

// ErrAttemptTimeout is the cause of a transport error when one attempt took
// longer than WithAttemptTimeout allows.
var ErrAttemptTimeout = errors.New("headway: attempt timed out")

// Reason says why headway gave up on a request: which of its bounds (or
// the server, or the caller) ended it. What made a request wait is
// something else, RateLimitError.Why. (Reason's values are those of the
// decisions in internal/decide, which TestReasonsAgree checks.)
type Reason int

const (
	// ReasonAttemptsExhausted: every attempt WithMaxAttempts allows was made.
	ReasonAttemptsExhausted Reason = iota + 1
	// ReasonWaitTooLong: the server asked for a wait longer than WithMaxWait.
	ReasonWaitTooLong
	// ReasonDeadline: the required wait would end after the context deadline.
	ReasonDeadline
	// ReasonServerDeclined: the server said not to retry
	// (Stripe-Should-Retry or X-Should-Retry: false).
	ReasonServerDeclined
	// ReasonBodyNotReplayable: the request body cannot be sent again (no
	// GetBody, and buffering was not enabled or the body was too large).
	ReasonBodyNotReplayable
	// ReasonBudgetExhausted: the retry budget of the request's key refused
	// another attempt (see WithRetryBudget).
	ReasonBudgetExhausted
	// ReasonCanceled: the request's context was cancelled, or its deadline
	// passed, while headway waited to retry.
	ReasonCanceled
	// ReasonOverloaded: most recent attempts to the request's key failed
	// (5xx or transport errors), and the overload throttle held this one
	// back without sending it (see WithOverloadThrottle).
	ReasonOverloaded
)

// String describes the reason in a few words.
func (r Reason) String() string {
	switch r {
	case ReasonAttemptsExhausted:
		return "attempts exhausted"
	case ReasonWaitTooLong:
		return "wait longer than max wait"
	case ReasonDeadline:
		return "deadline too close"
	case ReasonServerDeclined:
		return "server said not to retry"
	case ReasonBodyNotReplayable:
		return "body not replayable"
	case ReasonBudgetExhausted:
		return "retry budget exhausted"
	case ReasonCanceled:
		return "context done while waiting"
	case ReasonOverloaded:
		return "backend overloaded, not sent"
	default:
		return fmt.Sprintf("Reason(%d)", int(r))
	}
}

// MaxBodyExcerpt bounds RateLimitError.Body.
const MaxBodyExcerpt = 1 << 10

// RateLimitError is returned when the server answered 429 and headway gave
// up. errors.Is(err, ErrRateLimitExceeded) reports it; errors.As gives the
// details. The 429 response itself has been read (up to MaxBodyExcerpt bytes
// of its body, kept in Body) and closed.
type RateLimitError struct {
	// Method and URL identify the request (the URL without its query). The
	// message leaves them out: http.Client's *url.Error, which wraps this
	// error, already names them.
	Method string
	URL    string
	// StatusCode and Status are the last response's.
	StatusCode int
	Status     string
	// Header is a clone of the last response's header.
	Header http.Header
	// Body is the start of the last response's body, at most MaxBodyExcerpt bytes.
	Body []byte
	// RetryAfter is the server's last Retry-After, valid when HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Policies are the quotas the last response announced (see
	// ratelimit.Observation.Policies); Policy.Exhausted tells which ones ran
	// out.
	Policies []ratelimit.Policy
	// Attempts is how many attempts were made; Waited is the total time
	// spent waiting between them. StatusCode is 0 when the pacing layer
	// refused to send the request (Attempts then counts the attempts made
	// before): the wait it needed (Wait, Why) cannot fit.
	Attempts int
	Waited   time.Duration
	// Reason says which of headway's bounds ended the request (the max
	// wait, the deadline, the attempts, the budget...); Why, below, what
	// made it wait: they answer different questions, and a request held
	// by an exhausted quota past its deadline has both (ReasonDeadline,
	// and the quota that ran out).
	Reason Reason
	// Bound is the bound that was hit: the max wait for ReasonWaitTooLong,
	// the time left before the deadline for ReasonDeadline.
	Bound time.Duration
	// Err is the context's error when Reason is ReasonCanceled, else nil.
	Err error
	// Wait and Why are set when the pacing layer refused to send the
	// request (StatusCode 0): how long it would have had to wait (what
	// was left of the wait when its context ended, with ReasonCanceled;
	// 0 when unknown, as in a key's line), and what held it, in words: a
	// pause the server asked for, the quota that ran out and when it
	// returns, the rate learnt from 429s (pace.Why and its detail), where
	// Reason says which bound that wait could not fit.
	Wait time.Duration
	Why  string
}

// Error describes the whole situation in one line.
func (e *RateLimitError) Error() string {
	var b strings.Builder
	b.WriteString("headway: rate limited: ")
	if e.StatusCode == 0 {
		// Refused by the pacing layer before anything was sent.
		b.WriteString("not sent")
		if e.Wait > 0 {
			fmt.Fprintf(&b, ": it would have waited %v", e.Wait)
		}
		if e.Why != "" {
			fmt.Fprintf(&b, " (%s)", e.Why)
		}
	} else {
		status := e.Status
		if status == "" {
			status = fmt.Sprintf("%d %s", e.StatusCode, http.StatusText(e.StatusCode))
		}
		b.WriteString(status)
		if e.Attempts > 0 {
			fmt.Fprintf(&b, " after %d attempt", e.Attempts)
			if e.Attempts != 1 {
				b.WriteByte('s')
			}
		}
	}
	if e.Waited > 0 {
		fmt.Fprintf(&b, " (waited %v)", e.Waited)
	}
	if e.HasRetryAfter {
		fmt.Fprintf(&b, ", server asked to wait %v", e.RetryAfter)
	}
	for _, p := range e.Policies {
		if p.Exhausted() {
			fmt.Fprintf(&b, "; quota exhausted: %v", p)
			break
		}
	}
	b.WriteString("; gave up: ")
	b.WriteString(e.Reason.String())
	switch e.Reason {
	case ReasonWaitTooLong:
		fmt.Fprintf(&b, " (%v)", e.Bound)
	case ReasonDeadline:
		fmt.Fprintf(&b, " (%v left)", e.Bound)
	case ReasonCanceled:
		if e.Err != nil {
			fmt.Fprintf(&b, " (%v)", e.Err)
		}
	}
	if len(e.Body) > 0 {
		excerpt := strings.Join(strings.Fields(string(e.Body)), " ")
		if len(excerpt) > 120 {
			excerpt = excerpt[:120] + "..."
		}
		fmt.Fprintf(&b, "; body: %q", excerpt)
	}
	return b.String()
}

// Is reports whether target is ErrRateLimitExceeded.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimitExceeded }

// Unwrap returns Err: the context's error when headway stopped waiting
// because the request's context was done.
func (e *RateLimitError) Unwrap() error { return e.Err }

// RetryError is returned when headway gave up on a request whose last
// attempt failed in a way it retries (a transport error or a 5xx) without
// the response being returned: the attempts ran out on a transport error,
// the retry budget refused another attempt, or the context ended while
// headway waited to retry. It wraps the last error (the transport's, or the
// context's), so errors.Is(err, syscall.ECONNREFUSED) or
// errors.Is(err, context.Canceled) still work, and errors.Is(err,
// ErrRetryBudgetExhausted) reports a budget refusal. It reports a timeout
// (Timeout() true) when the wrapped error was one.
type RetryError struct {
	// Attempts is how many attempts were made; Waited the time spent
	// waiting between them.
	Attempts int
	Waited   time.Duration
	// Reason says which of headway's bounds ended the request (the
	// attempts, the budget, the deadline...).
	Reason Reason
	// StatusCode is the last response's status when the last attempt got
	// one (a 5xx, when the context ended during the wait), else 0.
	StatusCode int
	// Err is the last attempt's error, or the context's.
	Err error
}

// Error describes the give-up and the last error.
func (e *RetryError) Error() string {
	var last string
	if e.StatusCode != 0 {
		last = fmt.Sprintf(", last status %d", e.StatusCode)
	}
	return fmt.Sprintf("headway: giving up after %d attempt(s) (%s%s): %v", e.Attempts, e.Reason, last, e.Err)
}

// Unwrap returns the last attempt's error.
func (e *RetryError) Unwrap() error { return e.Err }

// Is reports whether target is ErrRetryBudgetExhausted and the budget
// refused the retry.
func (e *RetryError) Is(target error) bool {
	return target == ErrRetryBudgetExhausted && e.Reason == ReasonBudgetExhausted
}

// Timeout reports whether the last attempt's error was a timeout.
func (e *RetryError) Timeout() bool { return isTimeout(e.Err) }

// isTimeout reports whether err, or an error it wraps, says it is a timeout.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// attemptTimeoutError is the error of an attempt cut short by
// WithAttemptTimeout: errors.Is(err, ErrAttemptTimeout), and a timeout.
type attemptTimeoutError struct{ after time.Duration }

func (e *attemptTimeoutError) Error() string {
	return fmt.Sprintf("%v after %v", ErrAttemptTimeout, e.after)
}

func (e *attemptTimeoutError) Is(target error) bool { return target == ErrAttemptTimeout }

func (e *attemptTimeoutError) Timeout() bool { return true }

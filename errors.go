package headway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ErrRateLimitExceeded is matched by errors.Is for every *RateLimitError:
// the server kept answering 429 and headway gave up.
var ErrRateLimitExceeded = errors.New("headway: rate limit exceeded")

// ErrRetryBudgetExhausted is wrapped, together with the transport error, by
// the error returned when a request failed and the retry budget for its key
// refused another attempt (see WithRetryBudget).
var ErrRetryBudgetExhausted = errors.New("headway: retry budget exhausted")

// ErrAttemptTimeout is the cause of a transport error when one attempt took
// longer than WithAttemptTimeout allows.
var ErrAttemptTimeout = errors.New("headway: attempt timed out")

// Reason says why headway gave up on a request.
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
	// Method and URL identify the request (the URL without its query).
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
	// Observation.Policies); Policy.Exhausted tells which ones ran out.
	Policies []Policy
	// Attempts is how many attempts were made; Waited is the total time
	// spent waiting between them. StatusCode and Attempts are 0 when the
	// pacing layer refused to send the request at all, because an earlier
	// 429 to the same key asked for a wait that cannot fit.
	Attempts int
	Waited   time.Duration
	// Reason says why headway stopped.
	Reason Reason
	// Limit is the bound that was hit: the max wait for ReasonWaitTooLong,
	// the time left before the deadline for ReasonDeadline.
	Limit time.Duration
}

// Error describes the whole situation in one line.
func (e *RateLimitError) Error() string {
	var b strings.Builder
	b.WriteString("headway: rate limited: ")
	if e.Method != "" {
		b.WriteString(e.Method)
		b.WriteByte(' ')
	}
	if e.URL != "" {
		b.WriteString(e.URL)
		b.WriteString(": ")
	}
	if e.StatusCode == 0 {
		// Refused by the pacing layer before anything was sent.
		b.WriteString("held back: the server asked earlier for a pause that cannot fit")
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
		fmt.Fprintf(&b, " (%v)", e.Limit)
	case ReasonDeadline:
		fmt.Fprintf(&b, " (%v left)", e.Limit)
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

// RetryError is returned when a request ended in a transport error that
// headway did retry, or could have, and then gave up on. It wraps the last
// error, so errors.Is(err, syscall.ECONNREFUSED) and the like still work,
// and it reports a timeout (Timeout() true) when that error was one.
type RetryError struct {
	// Attempts is how many attempts were made; Waited the time spent
	// waiting between them.
	Attempts int
	Waited   time.Duration
	// Reason says why headway stopped.
	Reason Reason
	// Err is the last attempt's error.
	Err error
}

// Error describes the give-up and the last error.
func (e *RetryError) Error() string {
	return fmt.Sprintf("headway: giving up after %d attempt(s) (%s): %v", e.Attempts, e.Reason, e.Err)
}

// Unwrap returns the last attempt's error.
func (e *RetryError) Unwrap() error { return e.Err }

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

// budgetError wraps a transport error whose retry the budget refused.
type budgetError struct{ err error }

func (e *budgetError) Error() string {
	return "headway: retry budget exhausted, not retrying: " + e.err.Error()
}

func (e *budgetError) Unwrap() []error { return []error{ErrRetryBudgetExhausted, e.err} }

func (e *budgetError) Timeout() bool { return isTimeout(e.err) }

package headway

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// A caller that retries on its own: many SDKs wrap their http.Client in a
// retry loop of their own (the Stainless-generated ones, openai-go and
// anthropic-sdk-go among them, retry twice by default). Stacked on headway,
// each of the caller's attempts would get headway's WithMaxAttempts, and a
// failing backend would see their product: 3 x 4 attempts per call.
//
// Such a caller numbers its attempts in a header, and honours a header that
// tells it not to retry. headway reads the one and writes the other, so
// that the two loops make one:
//   - the caller's first attempt gets headway's whole retry loop, paced as
//     any request;
//   - whatever response headway then gives back with a status of 400 or
//     more says, in the caller's verdict header, not to retry it: headway
//     has retried it as far as its rules allow (or found it not worth
//     retrying), and a 429 it gives up on is returned as the response, for
//     the caller's own error, not as a *RateLimitError that the caller
//     would take for a connection failure and retry;
//   - a later attempt of the caller (a count of 1 or more: it retries an
//     error headway returned, or ignored the verdict) is not sent: headway
//     has already made every attempt its rules allow for that call. It
//     fails at once with a *RetryError wrapping ErrRetriedByCaller.
//
// So a call costs the server at most WithMaxAttempts attempts, whatever the
// caller's own retry count, and headway's rules (Retry-After as law, the
// retry budget, no repeated side effects) decide every retry. A caller whose
// retries are off (openai-go's option.WithMaxRetries(0)) still numbers its
// only attempt 0, and gets headway's loop. With WithoutRetries there is no
// retry layer, and the caller's loop is the only one: headway then paces
// each of its attempts and changes nothing in the responses.

// ErrRetriedByCaller is wrapped by the *RetryError returned, without
// sending, for a caller's own retry of a request headway has already
// answered (an attempt count of 1 or more in X-Stainless-Retry-Count):
// headway made every attempt its rules allow on the caller's first attempt.
var ErrRetriedByCaller = errors.New("headway: not sent: the caller retries a request headway has already retried or declined to retry")

// callerLoops lists the retry loops headway recognises: the request header
// in which a caller numbers its attempts (0 for the first), and the
// response header in which it takes a verdict ("false": do not retry).
var callerLoops = [...]struct{ count, verdict string }{
	// Every Stainless-generated SDK (openai-go, anthropic-sdk-go, and the
	// others): requestconfig sets the count on each attempt and reads
	// x-should-retry before its own rules.
	{count: "X-Stainless-Retry-Count", verdict: "X-Should-Retry"},
}

// callerLoop is what a request says of its caller's retry loop.
type callerLoop struct {
	verdict string // the header to write the verdict in; "" when none
	count   int    // the attempts the caller made before this one
	header  string // the count's header, for messages
}

// callerLoopOf returns what req's header says of a retry loop of its
// caller's: the zero callerLoop when it names none (or a count that is not
// a non-negative integer).
func callerLoopOf(h http.Header) callerLoop {
	if len(h) == 0 {
		return callerLoop{}
	}
	for _, l := range callerLoops {
		v, ok := h[l.count]
		if !ok || len(v) == 0 {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v[0]))
		if err != nil || n < 0 {
			continue
		}
		return callerLoop{verdict: l.verdict, count: n, header: l.count}
	}
	return callerLoop{}
}

// retrying reports whether the request is a caller's own retry.
func (l callerLoop) retrying() bool { return l.verdict != "" && l.count > 0 }

// refusal is the error for a caller's own retry, which is not sent.
func (l callerLoop) refusal() error {
	return &RetryError{
		Reason: ReasonAttemptsExhausted,
		Err:    fmt.Errorf("%w (%s: %d)", ErrRetriedByCaller, l.header, l.count),
	}
}

// answer tells the caller's loop not to retry resp when it is a failure:
// headway has made that decision already. resp is returned.
func (l callerLoop) answer(resp *http.Response) *http.Response {
	if l.verdict == "" || resp == nil || resp.StatusCode < http.StatusBadRequest {
		return resp
	}
	if resp.Header == nil {
		resp.Header = make(http.Header, 1)
	}
	resp.Header.Set(l.verdict, "false")
	return resp
}

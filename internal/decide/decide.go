// Package decide holds the retry decisions that headway's transport and its
// go-retryablehttp adapter share, so that the two cannot drift: which
// outcomes are worth another attempt, whether a request may be repeated, how
// long to wait before the next attempt, and when to give up without waiting.
//
// It is pure policy over explicit inputs: it does no I/O and reads the time
// only through Rules.Now.
package decide

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// Reason codes; headway.Reason has the same values, so a code converts to it
// directly. 0 means "no reason to give up".
const (
	AttemptsExhausted = iota + 1
	WaitTooLong
	Deadline
	ServerDeclined
	BodyNotReplayable
	BudgetExhausted
	Canceled
	Overloaded
)

// MinThrottledWait is the least time before a 429 is retried when the
// server gave no usable Retry-After, whatever the backoff options say: a
// refusal is never a licence to ask again at once.
const MinThrottledWait = 100 * time.Millisecond

// Rules are the options the decisions depend on.
type Rules struct {
	// MaxWait bounds a single wait; a server asking for more is refused.
	MaxWait time.Duration
	// Statuses marks the response statuses worth retrying.
	Statuses [600]bool
	// Now reads the clock, for deadlines.
	Now func() time.Time
	// Rand is the source of the Retry-After spread.
	Rand *Rand
}

// RetryStatus reports whether code is one of the statuses retried.
func (r *Rules) RetryStatus(code int) bool {
	return code >= 0 && code < len(r.Statuses) && r.Statuses[code]
}

// Throttled reports whether a response refused its request for a rate
// limit: a 429, or a 403 that says it is one, as GitHub's do (its primary
// limit answers 403 or 429 with x-ratelimit-remaining 0, its secondary
// limits 403 or 429 with a Retry-After; Octokit's throttling reads them
// so). A 403 with neither is a refusal of access, never retried.
func Throttled(code int, obs *ratelimit.Observation) bool {
	switch code {
	case http.StatusTooManyRequests:
		return true
	case http.StatusForbidden:
		if obs.HasRetryAfter {
			return true
		}
		for i := range obs.Policies {
			if p := &obs.Policies[i]; (p.Unit == "" || p.Unit == ratelimit.UnitRequests) && p.Exhausted() {
				return true
			}
		}
	}
	return false
}

// RetryResponse decides whether a response is worth another attempt, by
// status, by the server's explicit verdict, and by whether the request may be
// repeated after the server may have processed it (repeatable: idempotent,
// keyed, or every method allowed). declined reports a 429 the server asked
// not to retry.
func (r *Rules) RetryResponse(code int, verdict ratelimit.Verdict, repeatable bool) (retry, declined bool) {
	throttled := code == http.StatusTooManyRequests
	switch verdict {
	case ratelimit.VerdictRetry:
		return code >= 400, false
	case ratelimit.VerdictDoNotRetry:
		return false, throttled
	}
	// A 429 was not processed; any other failure may have been.
	return r.RetryStatus(code) && (throttled || repeatable), false
}

// PlanWait decides how long to wait before the next attempt, or why to give
// up at once without waiting (reason != 0, with the bound that was hit).
// obs is what the failed attempt's response said (zero for a transport
// error), backoff the strategy's delay, floor the least a 429 without a
// positive Retry-After waits (never less than MinThrottledWait).
func (r *Rules) PlanWait(ctx context.Context, obs ratelimit.Observation, throttled bool, backoff, floor time.Duration) (wait time.Duration, reason int, bound time.Duration) {
	wait, required := max(backoff, 0), time.Duration(0)
	if obs.HasRetryAfter && obs.RetryAfter > 0 {
		required = obs.RetryAfter
		if required > r.MaxWait {
			return 0, WaitTooLong, r.MaxWait
		}
		// The server knows when it will have capacity again: its
		// Retry-After replaces our guess rather than adding to it.
		wait = required + r.Spread(required)
	} else if throttled {
		// A 429 with no usable Retry-After is no licence to storm.
		wait = max(wait, floor, MinThrottledWait)
	} else if obs.HasRetryAfter {
		// Nor is any other response whose Retry-After is zero or past.
		wait = max(wait, floor)
	}
	wait = min(wait, max(r.MaxWait, required))
	return r.FitDeadline(ctx, wait, required)
}

// FitDeadline checks a planned wait against ctx's deadline: a wait that the
// server requires (required > 0) and that would end at or after the deadline
// gives up at once (Deadline, with the time left); a discretionary part that
// does not fit is dropped.
func (r *Rules) FitDeadline(ctx context.Context, wait, required time.Duration) (time.Duration, int, time.Duration) {
	if dl, ok := ctx.Deadline(); ok {
		left := dl.Sub(r.Now())
		if required >= left || wait >= left && required == 0 {
			return 0, Deadline, max(left, 0)
		}
		if wait >= left {
			wait = required
		}
	}
	return max(wait, 0), 0, 0
}

// Spread returns a small positive random addition to a wait the server
// required (up to a tenth of it, at most one second), so that many clients
// told the same instant do not all come back at that instant.
func (r *Rules) Spread(required time.Duration) time.Duration {
	s := min(required/10, time.Second)
	return time.Duration(r.Rand.Float64() * float64(s))
}

// Redact returns u without its query, fragment and user info, which may hold
// credentials.
func Redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

package ratelimit

import (
	"net/http"
	"strings"
	"time"
)

// MaxDuration bounds every wait that headway reads from a server's headers.
// Larger values (for example `Retry-After: 99999999999`) are clamped to it, so
// arithmetic on them can never overflow; the retry layer then refuses to wait
// that long anyway (see WithMaxWait).
const MaxDuration = 100 * 365 * 24 * time.Hour

// Verdict is a server's explicit answer to "may this request be retried?",
// as sent in `Stripe-Should-Retry` or `x-should-retry`.
type Verdict int8

const (
	// VerdictNone means the server said nothing; headway decides by itself.
	VerdictNone Verdict = iota
	// VerdictRetry means the server asked the client to retry.
	VerdictRetry
	// VerdictDoNotRetry means the server asked the client not to retry.
	VerdictDoNotRetry
)

// String returns "none", "retry" or "do-not-retry".
func (v Verdict) String() string {
	switch v {
	case VerdictRetry:
		return "retry"
	case VerdictDoNotRetry:
		return "do-not-retry"
	default:
		return "none"
	}
}

// Observation is what one response's headers say about rate limiting. It is
// produced by ParseHeaders, once per response, and shared by the retry and
// pacing layers.
//
// Every dialect a server may speak (see Dialect) is read into the same
// model: the policies the server announced, its Retry-After and its verdict
// on retrying. Durations are relative ("30s from when the server sent the
// response"), never absolute, so they can be used without reading a clock.
type Observation struct {
	// Status is the response's status code.
	Status int
	// RetryAfter is how long the server asked the client to wait before the
	// next request, measured from the response's Date header when it has a
	// valid one (so a client whose clock is off still waits the right time),
	// otherwise from the time the response was received. It is never
	// negative: a date in the past gives 0. Valid only when HasRetryAfter.
	RetryAfter time.Duration
	// HasRetryAfter reports whether a valid Retry-After (or one of its
	// millisecond variants) was present.
	HasRetryAfter bool
	// RetryAfterHeader names the header RetryAfter was read from, in
	// canonical form: "Retry-After-Ms", "X-Ms-Retry-After-Ms",
	// "Retry-After", or, without a valid Retry-After, the stand-ins
	// "X-Rate-Limit-Retry-After-Seconds" (Bucket4j) and "X-Retry-In"
	// (Traefik 1, a Go duration).
	RetryAfterHeader string
	// RetryAfterDate reports that the Retry-After was an HTTP-date: an
	// instant on the server's clock (often when a window's quota returns),
	// where delay-seconds are a wait, rounded to the second.
	RetryAfterDate bool
	// ShouldRetry is the server's explicit verdict, if it gave one.
	ShouldRetry Verdict
	// Policies are the quotas the server announced, in the order described
	// on ParseHeaders. Nil when it announced none.
	Policies []Policy
	// Dialects are the header formats that were recognised.
	Dialects DialectSet
}

// ParseHeaders reads what a response's headers say about rate limiting.
// received is the time the response arrived; it is used only when the
// response has no valid Date header to measure absolute times against.
//
// ParseHeaders is pure: it does no I/O, reads no clock and keeps no state.
// Malformed, negative or absurd values never produce a negative or
// unbounded duration or a negative count: they are ignored, or clamped to
// MaxDuration. Header names are matched without regard to case, so a
// header map built by hand with lower-case names (as HTTP/2 sends them) is
// read like a canonical one.
//
// Policies come in a fixed order: the IETF RateLimit fields first (in the
// order the server listed them), then Jira's Beta-RateLimit fields, then
// X-RateLimit-*, X-Rate-Limit-* (and X's 24-hour limits), OpenAI-style
// x-ratelimit-{limit,remaining,reset}-<unit> (and Kong's), Linear-style
// x-ratelimit-<name>-<kind>, Anthropic, Azure, Zendesk, Shopify, HubSpot,
// Salesforce, Azure Resource Graph, Together, Fastly and Akamai. A policy
// read from the generic X-RateLimit-* or X-Rate-Limit-* fields (or from
// Kong's, Jira's or Akamai's forms of them) that repeats one already read
// from the IETF fields (the same limit, and the same remaining when both
// say it) is merged into it rather than listed twice. At most 64 policies
// are read. The rules for each dialect are documented on the Dialect
// constants.
func ParseHeaders(h http.Header, status int, received time.Time) Observation {
	return parseHeaders(h, status, received, nil)
}

// parseHeaders is ParseHeaders, remembering what repeats in memo when it is
// not nil.
func parseHeaders(h http.Header, status int, received time.Time, memo *Parser) Observation {
	obs := Observation{Status: status}
	if len(h) == 0 {
		return obs
	}
	var f fieldSet
	f.read(h)
	if !f.any {
		return obs
	}
	db := dateBase{received: received, memo: memo}
	db.date, _ = f.first(fDate)
	if f.hasAny(retryAfterFieldSet) {
		obs.RetryAfter, obs.RetryAfterHeader, obs.RetryAfterDate, obs.HasRetryAfter = f.retryAfter(&db)
	}
	if f.hasAny(verdictFields) {
		obs.ShouldRetry = f.verdict()
	}
	if f.limits {
		b := policyBuilder{memo: memo}
		b.build(&f, &db)
		obs.Policies, obs.Dialects = b.out, b.dialects
	}
	if f.has(fStripeShouldRetry) || f.has(fStripeRateLimitedReason) {
		obs.Dialects = obs.Dialects.With(DialectStripe)
	}
	return obs
}

// The fields retryAfter and verdict read: without any of them, they say
// nothing.
var (
	retryAfterFieldSet = fields(fRetryAfterMs, fMsRetryAfterMs, fRetryAfter, fXRateLimitRetryAfterSeconds, fXRetryIn)
	verdictFields      = fields(fStripeShouldRetry, fXShouldRetry)
)

func (f *fieldSet) verdict() Verdict {
	for _, name := range [...]field{fStripeShouldRetry, fXShouldRetry} {
		v, ok := f.first(name)
		if !ok {
			continue
		}
		switch {
		case strings.EqualFold(strings.TrimSpace(v), "true"):
			return VerdictRetry
		case strings.EqualFold(strings.TrimSpace(v), "false"):
			return VerdictDoNotRetry
		}
	}
	return VerdictNone
}

package ratelimit

import (
	"math/bits"
	"strings"
)

// Dialect is one of the header formats servers use to announce rate limits.
// Where a dialect documents the format of its resets, that format is read.
// Where it does not (RateLimit-Reset and X-RateLimit-Reset are delays for
// some servers and Unix times for others), a reset number is read by this
// rule: a number that reads as a Unix time (in milliseconds, or in seconds)
// within about three years of the response's Date is one; otherwise at
// least 1e12 is a Unix time in milliseconds, at least 1e9 a Unix time in
// seconds, anything smaller a delay in seconds. Reset strings are
// HTTP-dates (also with a "UTC" zone), RFC 3339 or minute-precision ISO 8601
// times, or Go durations ("6m0s"). Absolute times are measured against the
// response's Date header.
type Dialect uint8

// The dialects ParseHeaders recognises.
const (
	// DialectIETFDraft00 is draft-ietf-httpapi-ratelimit-headers -00..-03:
	// RateLimit-Limit ("10, 10;w=1, 50;w=60": the current limit, then
	// policies), RateLimit-Remaining and RateLimit-Reset (delay-seconds in
	// the draft; the Unix times some servers send, such as Twitch's, are
	// recognised by the rule). Zendesk's, Heroku's and Kong's ratelimit-*
	// fields read as this dialect.
	DialectIETFDraft00 Dialect = iota + 1
	// DialectIETFDraft04 is -04..-06: the -03 fields plus
	// "RateLimit-Policy: 10;w=1, 50;w=60".
	DialectIETFDraft04
	// DialectIETFDraft07 is -07: "RateLimit: limit=100, remaining=50,
	// reset=5" and "RateLimit-Policy: 100;w=10".
	DialectIETFDraft07
	// DialectIETFDraft08 is -08 to -11, the structured lists
	// `RateLimit-Policy: "burst";q=100;w=60` and `RateLimit:
	// "burst";r=50;t=30`, parsed as RFC 9651 structured fields (leniently
	// when a server deviates). Cloudflare sends this form.
	DialectIETFDraft08
	// DialectXRateLimit is the de facto X-RateLimit-Limit, -Remaining and
	// -Reset (go-chi/httprate, express-rate-limit's legacy headers,
	// sethvargo/go-limiter); the reset by the rule above. A draft-03 list
	// in X-RateLimit-Limit ("100, 100;window=60") is read as one, and
	// Spring Cloud Gateway's X-RateLimit-Burst-Capacity stands for a
	// missing limit.
	DialectXRateLimit
	// DialectXRateLimitHyphenated is X-Rate-Limit-Limit, -Remaining and
	// -Reset (X/Twitter, Okta: Unix seconds, read by the rule; tollbooth's
	// X-Rate-Limit-Duration gives the window, and AspNetCoreRateLimit's
	// period in place of the limit, "1m", too), and X's
	// x-user-limit-24hour-* and x-app-limit-24hour-*, policies named
	// "user-24hour" and "app-24hour".
	DialectXRateLimitHyphenated
	// DialectGitHub is X-RateLimit-* with -Used and -Resource; the resource
	// names the policy and resets are Unix seconds.
	DialectGitHub
	// DialectGitLab is RateLimit-* with -Name, -Observed and -ResetTime;
	// its RateLimit-Reset is a Unix time, unlike the IETF delay.
	DialectGitLab
	// DialectOpenAI is x-ratelimit-{limit,remaining,reset}-{requests,tokens}
	// with resets as Go durations, and its imitators (Azure OpenAI, also
	// spelled x-rate-limit-*; Groq; Mistral's "req"; Cerebras; Fireworks'
	// "tokens-prompt" and "tokens-generated" as input and output tokens;
	// Together's x-tokenlimit-limit and -remaining, a tokens policy). A
	// window in the suffix ("tokens-minute", "req-60-second") gives the
	// window. Counts of -1 (Azure's "not reported") are ignored.
	DialectOpenAI
	// DialectAnthropic is anthropic-ratelimit-<unit>-{limit,remaining,reset}
	// with RFC 3339 resets, one policy per unit; anthropic-priority-* gives
	// policies named "priority".
	DialectAnthropic
	// DialectDiscord is X-RateLimit-* with -Reset-After (seconds, which
	// wins over the Unix -Reset), -Bucket, -Global and -Scope.
	DialectDiscord
	// DialectShopify is "X-Shopify-Shop-Api-Call-Limit: 32/40" (used/limit).
	DialectShopify
	// DialectReddit is X-Ratelimit-Used, -Remaining (a decimal) and -Reset
	// (seconds to the end of the period), without -Limit.
	DialectReddit
	// DialectZendesk is "X-Rate-Limit: 700" with X-Rate-Limit-Remaining, and
	// "Zendesk-RateLimit-<endpoint>: total=100; remaining=99; resets=41".
	DialectZendesk
	// DialectJira is Jira's X-RateLimit-* (with -NearLimit, RateLimit-Reason
	// and resets like "2020-09-01T12:05Z") and its Beta-RateLimit-Policy and
	// Beta-RateLimit fields in the -08 form.
	DialectJira
	// DialectAzure is x-ms-ratelimit-remaining-<scope> (remaining counts
	// only), including "x-ms-ratelimit-remaining-resource:
	// Microsoft.Compute/HighCostGet3Min;107,...", and Resource Graph's
	// x-ms-user-quota-remaining with x-ms-user-quota-resets-after
	// ("hh:mm:ss"), a policy named "user-quota".
	DialectAzure
	// DialectEnvoy is Envoy's rate limit filter: x-envoy-ratelimited, or a
	// draft-03 list in x-ratelimit-limit ("10, 10;w=60;name=\"per-minute\"";
	// the names are read). A list that spells its window out ("window=60",
	// the earliest drafts) is DialectXRateLimit.
	DialectEnvoy
	// DialectStripe is Stripe-Should-Retry and Stripe-Rate-Limited-Reason.
	DialectStripe
	// DialectKong is Kong's rate limiting plugins: X-RateLimit-Limit-<window>
	// and X-RateLimit-Remaining-<window> ("Minute", "Hour", ...; a month is
	// 30 days; a number is seconds, as Rate Limiting Advanced sends), or
	// -<name>-<window> for response rate limiting, beside draft-03
	// RateLimit-* for the window closest to its limit.
	DialectKong
	// DialectBitbucket is Bitbucket's X-RateLimit-Limit with -Resource
	// (naming the policy) and -NearLimit.
	DialectBitbucket
	// DialectLinear is x-ratelimit-<name>-{limit,remaining,reset} (Linear:
	// "X-RateLimit-Requests-Remaining", "X-RateLimit-Complexity-Limit"),
	// resets read by the rule.
	DialectLinear
	// DialectHubSpot is X-HubSpot-RateLimit-*: -Max and -Remaining per
	// -Interval-Milliseconds, -Secondly and -Daily with their -Remaining.
	DialectHubSpot
	// DialectSalesforce is "Sforce-Limit-Info: api-usage=25/5000"
	// (used/limit).
	DialectSalesforce
	// DialectFastly is Fastly's API: Fastly-RateLimit-Remaining and
	// Fastly-RateLimit-Reset (a Unix time, read by the rule).
	DialectFastly
	// DialectAkamai is Akamai's APIs: Akamai-RateLimit-Limit, -Remaining
	// and -Next (RFC 3339), and X-RateLimit-Next in older ones.
	DialectAkamai

	numDialects = iota
)

var dialectNames = [numDialects + 1]string{
	DialectIETFDraft00:          "ietf-draft-00",
	DialectIETFDraft04:          "ietf-draft-04",
	DialectIETFDraft07:          "ietf-draft-07",
	DialectIETFDraft08:          "ietf-draft-08",
	DialectXRateLimit:           "x-ratelimit",
	DialectXRateLimitHyphenated: "x-rate-limit",
	DialectGitHub:               "github",
	DialectGitLab:               "gitlab",
	DialectOpenAI:               "openai",
	DialectAnthropic:            "anthropic",
	DialectDiscord:              "discord",
	DialectShopify:              "shopify",
	DialectReddit:               "reddit",
	DialectZendesk:              "zendesk",
	DialectJira:                 "jira",
	DialectAzure:                "azure",
	DialectEnvoy:                "envoy",
	DialectStripe:               "stripe",
	DialectKong:                 "kong",
	DialectBitbucket:            "bitbucket",
	DialectLinear:               "linear",
	DialectHubSpot:              "hubspot",
	DialectSalesforce:           "salesforce",
	DialectFastly:               "fastly",
	DialectAkamai:               "akamai",
}

// String returns the dialect's short name, such as "ietf-draft-08" or
// "github".
func (d Dialect) String() string {
	if d > 0 && int(d) <= numDialects {
		return dialectNames[d]
	}
	return "unknown"
}

// DialectSet is a set of dialects. The zero value is empty.
type DialectSet uint32

// Every Dialect must have a bit in a DialectSet.
const _ DialectSet = 1 << numDialects

// With returns the set with d added.
func (s DialectSet) With(d Dialect) DialectSet {
	if d == 0 || int(d) > numDialects {
		return s
	}
	return s | 1<<d
}

// Has reports whether d is in the set.
func (s DialectSet) Has(d Dialect) bool { return d < 32 && s&(1<<d) != 0 }

// Len returns the number of dialects in the set.
func (s DialectSet) Len() int { return bits.OnesCount32(uint32(s)) }

// List returns the dialects in the set, in the order of the constants.
func (s DialectSet) List() []Dialect {
	if s == 0 {
		return nil
	}
	out := make([]Dialect, 0, s.Len())
	for d := Dialect(1); int(d) <= numDialects; d++ {
		if s.Has(d) {
			out = append(out, d)
		}
	}
	return out
}

// String lists the dialects' names, separated by commas.
func (s DialectSet) String() string {
	var b strings.Builder
	for _, d := range s.List() {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(d.String())
	}
	return b.String()
}

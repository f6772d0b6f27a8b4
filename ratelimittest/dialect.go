package ratelimittest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Dialect is a family of rate-limit response headers. The server writes each
// from the format's own definition (see the constants), never from headway's
// parser, so the two can check each other.
type Dialect string

// The dialects. "Binding policy" below is the request policy that refused
// the request, or else the one with the fewest units left (ties: the later
// reset). Resets count to when the key's quota is fully restored.
const (
	// IETF is draft-ietf-httpapi-ratelimit-headers -08 and later: one list
	// item per request policy, `RateLimit-Policy: "burst";q=10;w=1` and
	// `RateLimit: "burst";r=3;t=1` (t in delay-seconds), with pk (a byte
	// sequence identifying the partition) when the quota is partitioned.
	// For the buckets and GCRA, q is the burst and w the time to refill
	// it. w is whole seconds, so a window (or refill) under a second is
	// written w=1: the quota is exact, the implied rate is understated.
	IETF Dialect = "ietf"
	// IETFDraft07 is draft -07: `RateLimit-Policy: 10;w=1, 1000;w=86400` and,
	// for the binding policy, `RateLimit: limit=10, remaining=3, reset=1`.
	IETFDraft07 Dialect = "ietf-draft-07"
	// IETFDraft04 is drafts -04..-06: `RateLimit-Policy` as in -07 plus
	// RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset (delay-seconds)
	// for the binding policy. Like headway's ratelimit.DialectIETFDraft04,
	// it is named after the first draft of its range.
	IETFDraft04 Dialect = "ietf-draft-04"
	// XRateLimit is the de-facto X-RateLimit-Limit, -Remaining and -Reset,
	// the reset as Unix epoch seconds (rounded up), for the binding policy.
	XRateLimit Dialect = "x-ratelimit"
	// GitHub is x-ratelimit-limit, -remaining, -used, -reset (epoch seconds)
	// and -resource (the policy's Name, or "core" when it has none).
	GitHub Dialect = "github"
	// OpenAI is x-ratelimit-{limit,remaining,reset}-requests and -tokens, the
	// resets as Go durations rounded up to the millisecond ("1s", "6m0s",
	// "12ms"), for the binding requests and tokens policies.
	OpenAI Dialect = "openai"
	// Anthropic is anthropic-ratelimit-{requests,tokens,input-tokens,
	// output-tokens}-{limit,remaining,reset}, the resets RFC 3339 in UTC,
	// rounded up to the second, for the binding policy of each unit.
	Anthropic Dialect = "anthropic"
	// Discord is X-RateLimit-Limit, -Remaining, -Reset (epoch seconds with
	// milliseconds), -Reset-After (seconds with milliseconds) and -Bucket;
	// a 429 adds X-RateLimit-Scope ("user" when partitioned, else "shared")
	// and the JSON body {"message", "retry_after", "global"}.
	Discord Dialect = "discord"
	// Shopify is X-Shopify-Shop-Api-Call-Limit: used/capacity for the
	// binding policy (Shopify's REST API is a leaky bucket of 40).
	Shopify Dialect = "shopify"
	// None writes no rate-limit headers (nginx limit_req, many gateways).
	None Dialect = "none"
)

// Dialects returns every dialect, in the order of the constants.
func Dialects() []Dialect {
	return []Dialect{IETF, IETFDraft07, IETFDraft04, XRateLimit, GitHub, OpenAI, Anthropic, Discord, Shopify, None}
}

// dialectAliases are other spellings ParseDialect accepts.
var dialectAliases = map[string]Dialect{
	"ietf-draft8": IETF, "ietf-draft-08": IETF, "draft8": IETF, "draft-8": IETF,
	"ietf-draft7": IETFDraft07, "draft7": IETFDraft07, "draft-7": IETFDraft07,
	"ietf-draft-06": IETFDraft04, "ietf-draft6": IETFDraft04, "draft6": IETFDraft04, "draft-6": IETFDraft04,
	"ietf-draft-05": IETFDraft04, "ietf-draft-04": IETFDraft04,
	"xratelimit": XRateLimit, "x-rate-limit": XRateLimit, "legacy": XRateLimit,
}

// ParseDialect returns the dialect named s (case-insensitive; a few other
// spellings such as "draft7" are accepted).
func ParseDialect(s string) (Dialect, error) {
	if d, ok := lookupName(s, Dialects()); ok {
		return d, nil
	}
	if d, ok := dialectAliases[normalName(s)]; ok {
		return d, nil
	}
	return "", fmt.Errorf("ratelimittest: unknown dialect %q (want one of %s)", s, joinNames(Dialects()))
}

// RetryAfterForm is how a rejection says when to come back.
type RetryAfterForm string

// The Retry-After forms. Both forms round up, so a client that waits as
// told is never early.
const (
	RetryAfterSeconds RetryAfterForm = "seconds" // delay-seconds, e.g. "3"
	RetryAfterDate    RetryAfterForm = "date"    // an HTTP-date (IMF-fixdate)
	RetryAfterNone    RetryAfterForm = "none"    // no Retry-After
)

// ParseRetryAfterForm returns the Retry-After form named s (it parses a
// form's name, not a Retry-After value: that is ratelimit.ParseRetryAfter).
func ParseRetryAfterForm(s string) (RetryAfterForm, error) {
	switch n := RetryAfterForm(strings.ToLower(strings.TrimSpace(s))); n {
	case RetryAfterSeconds, RetryAfterDate, RetryAfterNone:
		return n, nil
	case "delay", "delay-seconds", "delta":
		return RetryAfterSeconds, nil
	case "http-date":
		return RetryAfterDate, nil
	case "":
		return RetryAfterNone, nil
	}
	return "", fmt.Errorf("ratelimittest: unknown Retry-After form %q (want seconds, date or none)", s)
}

// view is what one response reports.
type view struct {
	status      []policyStatus // the policies the headers describe
	wall        time.Time      // the server's (possibly skewed) time
	refused     bool
	wait        int64 // ns until admission when refused, or never
	key         string
	partitioned bool
	// The header quirks (see WithRetryAfterFullWindow, WithCoarseResets,
	// WithResetAlwaysOne, WithFloorResets).
	fullWindow, coarse, resetOne, floor, truncRA bool
}

// resetIn is the delay the dialects write for a reset d ns away: d itself,
// or one second (WithResetAlwaysOne), or d rounded up to whole seconds
// (WithCoarseResets).
func (v *view) resetIn(d int64) int64 {
	switch {
	case v.resetOne:
		return second
	case v.coarse:
		return ceilSeconds(d)
	}
	return d
}

// resetAt is the delay an absolute reset is written for, d ns away: d
// itself or one second (WithResetAlwaysOne). The absolute time itself is
// then rounded up, so rounding d first would round twice.
func (v *view) resetAt(d int64) int64 {
	if v.resetOne {
		return second
	}
	return d
}

// ceilSeconds rounds d up to whole seconds, saturating.
func ceilSeconds(d int64) int64 {
	if s := ceilDiv(d, second); s <= maxInt64/second {
		return s * second
	}
	return maxInt64
}

const second = int64(time.Second)

// binding is the policy of unit u that the single-policy dialects report.
func (v *view) binding(u Unit) *policyStatus {
	var b *policyStatus
	for i := range v.status {
		s := &v.status[i]
		if s.rule.unit != u {
			continue
		}
		if b == nil || better(s, b) {
			b = s
		}
	}
	return b
}

func better(s, b *policyStatus) bool {
	switch {
	case s.refused != b.refused:
		return s.refused
	case s.refused && s.reset != b.reset:
		return s.reset > b.reset // the one Retry-After comes from
	}
	if s.remaining != b.remaining {
		return s.remaining < b.remaining
	}
	return s.reset > b.reset
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// epochCeil is the Unix time in seconds, rounded up, d after the wall time.
func (v *view) epochCeil(d int64) int64 {
	t := v.wall.Add(time.Duration(d))
	if t.Nanosecond() > 0 {
		return t.Unix() + 1
	}
	return t.Unix()
}

// epochReset is the Unix time in seconds of a reset d after the wall time:
// rounded up, or down with WithFloorResets.
func (v *view) epochReset(d int64) int64 {
	if v.floor {
		return v.wall.Add(time.Duration(d)).Unix()
	}
	return v.epochCeil(d)
}

// epochMillisCeil is the Unix time in milliseconds, rounded up, d after the
// wall time.
func (v *view) epochMillisCeil(d int64) int64 {
	t := v.wall.Add(time.Duration(d))
	if t.Nanosecond()%int(time.Millisecond) > 0 {
		return t.UnixMilli() + 1
	}
	return t.UnixMilli()
}

// ietfWindow is a policy's w parameter: its window, or for the buckets the
// time to refill a whole burst (so q/w is the rate), in seconds, at least 1.
func ietfWindow(r *rule) int64 {
	w := r.window
	if r.burst != r.limit {
		w = mulDivCeil(r.burst, r.window, r.limit)
	}
	return max(1, ceilDiv(w, second))
}

// sfString quotes s as an RFC 9651 sf-string, dropping what it cannot hold.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// partitionKey is the pk parameter: the first 8 bytes of the key's SHA-256,
// as an RFC 9651 byte sequence (the key itself may be a secret).
func partitionKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return ":" + base64.StdEncoding.EncodeToString(sum[:8]) + ":"
}

func (v *view) write(h http.Header, d Dialect) {
	switch d {
	case IETF:
		var pol, rl []string
		for _, s := range v.status {
			if s.rule.unit != UnitRequests {
				continue
			}
			name := sfString(s.rule.name)
			p := fmt.Sprintf("%s;q=%d;w=%d", name, s.rule.capacity(), ietfWindow(s.rule))
			l := fmt.Sprintf("%s;r=%d;t=%d", name, s.remaining, ceilDiv(v.resetIn(s.reset), second))
			if v.partitioned {
				pk := ";pk=" + partitionKey(v.key)
				p, l = p+pk, l+pk
			}
			pol, rl = append(pol, p), append(rl, l)
		}
		if len(pol) > 0 {
			h.Set("RateLimit-Policy", strings.Join(pol, ", "))
			h.Set("RateLimit", strings.Join(rl, ", "))
		}
	case IETFDraft07, IETFDraft04:
		b := v.binding(UnitRequests)
		if b == nil {
			return
		}
		h.Set("RateLimit-Policy", strings.Join(v.draftPolicies(b), ", "))
		reset := ceilDiv(v.resetIn(b.reset), second)
		if d == IETFDraft07 {
			h.Set("RateLimit", fmt.Sprintf("limit=%d, remaining=%d, reset=%d", b.rule.capacity(), b.remaining, reset))
			return
		}
		h.Set("RateLimit-Limit", itoa(b.rule.capacity()))
		h.Set("RateLimit-Remaining", itoa(b.remaining))
		h.Set("RateLimit-Reset", itoa(reset))
	case XRateLimit, GitHub:
		b := v.binding(UnitRequests)
		if b == nil {
			return
		}
		h.Set("X-RateLimit-Limit", itoa(b.rule.capacity()))
		h.Set("X-RateLimit-Remaining", itoa(b.remaining))
		h.Set("X-RateLimit-Reset", itoa(v.epochReset(v.resetAt(b.reset))))
		if d == GitHub {
			h.Set("X-RateLimit-Used", itoa(b.rule.capacity()-b.remaining))
			res := "core"
			if b.rule.named {
				res = b.rule.name
			}
			h.Set("X-RateLimit-Resource", res)
		}
	case OpenAI:
		for _, u := range []Unit{UnitRequests, UnitTokens} {
			if b := v.binding(u); b != nil {
				h.Set("X-Ratelimit-Limit-"+string(u), itoa(b.rule.capacity()))
				h.Set("X-Ratelimit-Remaining-"+string(u), itoa(b.remaining))
				reset := ceilDiv(v.resetIn(b.reset), int64(time.Millisecond))
				h.Set("X-Ratelimit-Reset-"+string(u), (time.Duration(reset) * time.Millisecond).String())
			}
		}
	case Anthropic:
		for _, u := range []Unit{UnitRequests, UnitTokens, UnitInputTokens, UnitOutputTokens} {
			if b := v.binding(u); b != nil {
				p := "Anthropic-Ratelimit-" + string(u) + "-"
				h.Set(p+"Limit", itoa(b.rule.capacity()))
				h.Set(p+"Remaining", itoa(b.remaining))
				h.Set(p+"Reset", time.Unix(v.epochReset(v.resetAt(b.reset)), 0).UTC().Format(time.RFC3339))
			}
		}
	case Discord:
		b := v.binding(UnitRequests)
		if b == nil {
			return
		}
		ms := int64(time.Millisecond)
		after := ceilDiv(v.resetIn(b.reset), ms)
		at := v.resetAt(b.reset)
		resetMs := v.epochMillisCeil(at)
		if v.coarse {
			resetMs = v.epochCeil(at) * 1000
		}
		h.Set("X-RateLimit-Limit", itoa(b.rule.capacity()))
		h.Set("X-RateLimit-Remaining", itoa(b.remaining))
		h.Set("X-RateLimit-Reset", millis(resetMs))
		h.Set("X-RateLimit-Reset-After", millis(after))
		sum := sha256.Sum256([]byte(b.rule.name))
		h.Set("X-RateLimit-Bucket", hex.EncodeToString(sum[:8]))
		if v.refused {
			scope := "shared"
			if v.partitioned {
				scope = "user"
			}
			h.Set("X-RateLimit-Scope", scope)
		}
	case Shopify:
		if b := v.binding(UnitRequests); b != nil {
			h.Set("X-Shopify-Shop-Api-Call-Limit", fmt.Sprintf("%d/%d", b.rule.capacity()-b.remaining, b.rule.capacity()))
		}
	}
}

// draftPolicies lists the request policies for drafts -04..-07, which tie
// the current state to a policy by its quota alone and so forbid two
// policies with the same quota: a policy whose quota repeats another's is
// left out, except that the binding one is always kept.
func (v *view) draftPolicies(b *policyStatus) []string {
	var pol []string
	var seen []int64
	for i := range v.status {
		s := &v.status[i]
		q := s.rule.capacity()
		if s.rule.unit != UnitRequests || (s != b && q == b.rule.capacity()) || slices.Contains(seen, q) {
			continue
		}
		seen = append(seen, q)
		pol = append(pol, fmt.Sprintf("%d;w=%d", q, ietfWindow(s.rule)))
	}
	return pol
}

// millis formats n milliseconds as seconds with up to three decimals:
// 64570 -> "64.57", 1000 -> "1". float64 holds every n below 2^53 exactly
// enough for the shortest form to be the decimal one.
func millis(n int64) string { return strconv.FormatFloat(float64(n)/1000, 'f', -1, 64) }

// retryAfter is the Retry-After value for a refused request, or "".
func (v *view) retryAfter(form RetryAfterForm) string {
	if !v.refused || v.wait == never {
		return ""
	}
	wait := v.wait
	if v.fullWindow {
		wait = v.refusingWindow()
	}
	switch form {
	case RetryAfterSeconds:
		if v.truncRA {
			return itoa(wait / second)
		}
		return itoa(max(1, ceilDiv(wait, second)))
	case RetryAfterDate:
		return time.Unix(v.epochReset(wait), 0).UTC().Format(http.TimeFormat)
	}
	return ""
}

// refusingWindow is the Window of the refusing policy the true Retry-After
// comes from: the longest wait, on a tie the longer window.
func (v *view) refusingWindow() int64 {
	var b *policyStatus
	for i := range v.status {
		s := &v.status[i]
		if !s.refused {
			continue
		}
		if b == nil || s.wait > b.wait || (s.wait == b.wait && s.rule.window > b.rule.window) {
			b = s
		}
	}
	if b == nil {
		return v.wait // not reached: a refusal has a refusing policy
	}
	return b.rule.window
}

// retryAfterBody is the retry_after of Discord's 429 body: the true wait in
// seconds with milliseconds, rounded up (whole seconds with
// WithCoarseResets).
func (v *view) retryAfterBody() string {
	if v.coarse {
		return itoa(ceilDiv(v.wait, second))
	}
	return millis(ceilDiv(v.wait, int64(time.Millisecond)))
}

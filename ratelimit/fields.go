package ratelimit

import (
	"net/http"
	"slices"
	"strings"
	"time"
)

// field is a header field ParseHeaders reads, known by its exact name.
type field uint8

const (
	fDate field = iota
	fRetryAfter
	fRetryAfterMs
	fMsRetryAfterMs
	fStripeShouldRetry
	fXShouldRetry
	fStripeRateLimitedReason
	fXRateLimitRetryAfterSeconds
	fXRetryIn

	fRateLimit // first of the fields that announce limits
	fRateLimitPolicy
	fRateLimitLimit
	fRateLimitRemaining
	fRateLimitReset
	fRateLimitName
	fRateLimitObserved
	fRateLimitResetTime
	fRateLimitReason
	fBetaRateLimit
	fBetaRateLimitPolicy
	fXRLLimit
	fXRLRemaining
	fXRLReset
	fXRLUsed
	fXRLResource
	fXRLResetAfter
	fXRLBucket
	fXRLGlobal
	fXRLScope
	fXRLNearLimit
	fXRateLimitLimit
	fXRateLimitRemaining
	fXRateLimitReset
	fXRateLimit
	fShopify
	fEnvoyRateLimited
	fHubSpotDaily
	fHubSpotDailyRemaining
	fHubSpotInterval
	fHubSpotMax
	fHubSpotRemaining
	fHubSpotSecondly
	fHubSpotSecondlyRemaining
	fSforceLimitInfo
	fMsUserQuotaRemaining
	fMsUserQuotaResetsAfter
	fXRateLimitDuration
	fXRLNext
	fXRLBurstCapacity
	fTokenLimitLimit
	fTokenLimitRemaining
	fFastlyRemaining
	fFastlyReset
	fAkamaiLimit
	fAkamaiRemaining
	fAkamaiNext

	numFields
)

// fieldByName maps lower-case header names to fields. It is never written
// after initialisation.
var fieldByName = map[string]field{
	"date":                                      fDate,
	"retry-after":                               fRetryAfter,
	"retry-after-ms":                            fRetryAfterMs,
	"x-ms-retry-after-ms":                       fMsRetryAfterMs,
	"stripe-should-retry":                       fStripeShouldRetry,
	"x-should-retry":                            fXShouldRetry,
	"stripe-rate-limited-reason":                fStripeRateLimitedReason,
	"x-rate-limit-retry-after-seconds":          fXRateLimitRetryAfterSeconds,
	"x-retry-in":                                fXRetryIn,
	"ratelimit":                                 fRateLimit,
	"ratelimit-policy":                          fRateLimitPolicy,
	"ratelimit-limit":                           fRateLimitLimit,
	"ratelimit-remaining":                       fRateLimitRemaining,
	"ratelimit-reset":                           fRateLimitReset,
	"ratelimit-name":                            fRateLimitName,
	"ratelimit-observed":                        fRateLimitObserved,
	"ratelimit-resettime":                       fRateLimitResetTime,
	"ratelimit-reason":                          fRateLimitReason,
	"beta-ratelimit":                            fBetaRateLimit,
	"beta-ratelimit-policy":                     fBetaRateLimitPolicy,
	"x-ratelimit-limit":                         fXRLLimit,
	"x-ratelimit-remaining":                     fXRLRemaining,
	"x-ratelimit-reset":                         fXRLReset,
	"x-ratelimit-used":                          fXRLUsed,
	"x-ratelimit-resource":                      fXRLResource,
	"x-ratelimit-reset-after":                   fXRLResetAfter,
	"x-ratelimit-bucket":                        fXRLBucket,
	"x-ratelimit-global":                        fXRLGlobal,
	"x-ratelimit-scope":                         fXRLScope,
	"x-ratelimit-nearlimit":                     fXRLNearLimit,
	"x-rate-limit-limit":                        fXRateLimitLimit,
	"x-rate-limit-remaining":                    fXRateLimitRemaining,
	"x-rate-limit-reset":                        fXRateLimitReset,
	"x-rate-limit":                              fXRateLimit,
	"x-shopify-shop-api-call-limit":             fShopify,
	"x-envoy-ratelimited":                       fEnvoyRateLimited,
	"x-hubspot-ratelimit-daily":                 fHubSpotDaily,
	"x-hubspot-ratelimit-daily-remaining":       fHubSpotDailyRemaining,
	"x-hubspot-ratelimit-interval-milliseconds": fHubSpotInterval,
	"x-hubspot-ratelimit-max":                   fHubSpotMax,
	"x-hubspot-ratelimit-remaining":             fHubSpotRemaining,
	"x-hubspot-ratelimit-secondly":              fHubSpotSecondly,
	"x-hubspot-ratelimit-secondly-remaining":    fHubSpotSecondlyRemaining,
	"sforce-limit-info":                         fSforceLimitInfo,
	"x-ms-user-quota-remaining":                 fMsUserQuotaRemaining,
	"x-rate-limit-duration":                     fXRateLimitDuration,
	"x-ratelimit-next":                          fXRLNext,
	"x-ratelimit-burst-capacity":                fXRLBurstCapacity,
	"x-tokenlimit-limit":                        fTokenLimitLimit,
	"x-tokenlimit-remaining":                    fTokenLimitRemaining,
	"fastly-ratelimit-remaining":                fFastlyRemaining,
	"fastly-ratelimit-reset":                    fFastlyReset,
	"akamai-ratelimit-limit":                    fAkamaiLimit,
	"akamai-ratelimit-remaining":                fAkamaiRemaining,
	"akamai-ratelimit-next":                     fAkamaiNext,
	"x-ms-user-quota-resets-after":              fMsUserQuotaResetsAfter,
}

// family is a group of headers whose names end in a variable part: the
// unit, scope or endpoint the header is about.
type family uint8

const (
	famX24Hour           family = iota // x-{app,user}-limit-24hour-<kind> (X)
	famOpenAI                          // x-ratelimit-{limit,remaining,reset}-<unit>
	famNamed                           // x-ratelimit-<name>-<kind> (Linear)
	famAnthropic                       // anthropic-ratelimit-<unit>-<kind>
	famAnthropicPriority               // anthropic-priority-<unit>-<kind>
	famAzure                           // x-ms-ratelimit-remaining-<scope>
	famZendesk                         // zendesk-ratelimit-<endpoint>
)

var familyPrefixes = [...]struct {
	prefix string
	fam    family
	kind   countKind // for famOpenAI, the kind is in the prefix
}{
	{"x-ratelimit-limit-", famOpenAI, kindLimit},
	{"x-ratelimit-remaining-", famOpenAI, kindRemaining},
	{"x-ratelimit-reset-", famOpenAI, kindReset},
	{"x-ratelimit-", famNamed, 0},                 // after the OpenAI prefixes, which it also matches
	{"x-rate-limit-limit-", famOpenAI, kindLimit}, // Azure OpenAI's hyphenated spelling
	{"x-rate-limit-remaining-", famOpenAI, kindRemaining},
	{"x-rate-limit-reset-", famOpenAI, kindReset},
	{"x-app-limit-24hour-", famX24Hour, 0},
	{"x-user-limit-24hour-", famX24Hour, 0},
	{"anthropic-ratelimit-", famAnthropic, 0},
	{"anthropic-priority-", famAnthropicPriority, 0},
	{"x-ms-ratelimit-remaining-", famAzure, kindRemaining},
	{"zendesk-ratelimit-", famZendesk, 0},
}

// countKind says which part of a policy a header carries.
type countKind uint8

const (
	kindLimit countKind = iota + 1
	kindRemaining
	kindReset
)

// familyField is one header of a family.
type familyField struct {
	fam    family
	kind   countKind
	suffix string // the variable part, as spelled in the key (compare with compareFold)
	value  string // the first field line
	// What splitUnit reads in the suffix, once per header.
	unit   Unit
	window time.Duration
	base   string
	known  bool
	rank   int // of the unit, for ordering
}

// fieldSet holds the header fields ParseHeaders reads, found by one pass
// over the header map with names compared without regard to case.
type fieldSet struct {
	vals      [numFields][]string
	fams      []familyField // the family headers, in map order
	present   uint64        // bit f: field f was found
	spellings uint64        // bit f: field f was found under several spellings
	any       bool          // some field other than Date was found
	limits    bool          // some field that announces limits was found
}

// fieldNames is fieldByName inverted. It is never written after
// initialisation.
var fieldNames = func() (t [numFields]string) {
	for name, f := range fieldByName {
		t[f] = name
	}
	return t
}()

// A fieldSet's spellings is a bitset of fields: they must fit.
const _ uint64 = 1 << (numFields - 1)

// fieldsByLen indexes fieldByName by name length, so that a lookup compares
// a few strings instead of hashing. It is never written after
// initialisation.
var fieldsByLen = func() (t [maxFieldName + 1][]fieldName) {
	for name, f := range fieldByName {
		t[len(name)] = append(t[len(name)], fieldName{name, f})
	}
	return t
}()

type fieldName struct {
	name string
	f    field
}

// maxFieldName bounds the names looked up; longer ones are none of ours.
const maxFieldName = 64

func (f *fieldSet) read(h http.Header) {
	for key, vs := range h {
		if len(key) < 4 || len(key) > maxFieldName || len(vs) == 0 {
			continue
		}
		switch key[0] | 0x20 { // cheap rejection of most other headers
		case 'a', 'b', 'd', 'f', 'r', 's', 'x', 'z':
		default:
			continue
		}
		if fl, ok := canonicalField(key); ok {
			// The name as net/http's reader spells it: no need to fold.
			f.add(h, fl, key, vs)
			continue
		}
		if fl, ok := lookupField(key); ok {
			f.add(h, fl, key, vs)
			continue
		}
		if i := familyOf(key); i >= 0 {
			if ff, ok := familyFieldOf(key, vs[0], i); ok {
				if f.fams == nil {
					f.fams = make([]familyField, 0, 8)
				}
				f.fams = append(f.fams, ff)
				f.any, f.limits = true, true
			}
		}
	}
	if f.spellings != 0 {
		f.mergeSpellings(h)
	}
}

// canonicalField finds the field whose name, in the canonical form of
// net/http (http.CanonicalHeaderKey), is exactly key: the common case, which
// costs a few comparisons instead of a folding lookup. A key in any other
// spelling is left to lookupField, which finds the same field.
func canonicalField(key string) (field, bool) {
	switch key {
	case "Akamai-Ratelimit-Limit":
		return fAkamaiLimit, true
	case "Akamai-Ratelimit-Next":
		return fAkamaiNext, true
	case "Akamai-Ratelimit-Remaining":
		return fAkamaiRemaining, true
	case "Beta-Ratelimit":
		return fBetaRateLimit, true
	case "Beta-Ratelimit-Policy":
		return fBetaRateLimitPolicy, true
	case "Date":
		return fDate, true
	case "Fastly-Ratelimit-Remaining":
		return fFastlyRemaining, true
	case "Fastly-Ratelimit-Reset":
		return fFastlyReset, true
	case "Ratelimit":
		return fRateLimit, true
	case "Ratelimit-Limit":
		return fRateLimitLimit, true
	case "Ratelimit-Name":
		return fRateLimitName, true
	case "Ratelimit-Observed":
		return fRateLimitObserved, true
	case "Ratelimit-Policy":
		return fRateLimitPolicy, true
	case "Ratelimit-Reason":
		return fRateLimitReason, true
	case "Ratelimit-Remaining":
		return fRateLimitRemaining, true
	case "Ratelimit-Reset":
		return fRateLimitReset, true
	case "Ratelimit-Resettime":
		return fRateLimitResetTime, true
	case "Retry-After":
		return fRetryAfter, true
	case "Retry-After-Ms":
		return fRetryAfterMs, true
	case "Sforce-Limit-Info":
		return fSforceLimitInfo, true
	case "Stripe-Rate-Limited-Reason":
		return fStripeRateLimitedReason, true
	case "Stripe-Should-Retry":
		return fStripeShouldRetry, true
	case "X-Envoy-Ratelimited":
		return fEnvoyRateLimited, true
	case "X-Hubspot-Ratelimit-Daily":
		return fHubSpotDaily, true
	case "X-Hubspot-Ratelimit-Daily-Remaining":
		return fHubSpotDailyRemaining, true
	case "X-Hubspot-Ratelimit-Interval-Milliseconds":
		return fHubSpotInterval, true
	case "X-Hubspot-Ratelimit-Max":
		return fHubSpotMax, true
	case "X-Hubspot-Ratelimit-Remaining":
		return fHubSpotRemaining, true
	case "X-Hubspot-Ratelimit-Secondly":
		return fHubSpotSecondly, true
	case "X-Hubspot-Ratelimit-Secondly-Remaining":
		return fHubSpotSecondlyRemaining, true
	case "X-Ms-Retry-After-Ms":
		return fMsRetryAfterMs, true
	case "X-Ms-User-Quota-Remaining":
		return fMsUserQuotaRemaining, true
	case "X-Ms-User-Quota-Resets-After":
		return fMsUserQuotaResetsAfter, true
	case "X-Rate-Limit":
		return fXRateLimit, true
	case "X-Rate-Limit-Duration":
		return fXRateLimitDuration, true
	case "X-Rate-Limit-Limit":
		return fXRateLimitLimit, true
	case "X-Rate-Limit-Remaining":
		return fXRateLimitRemaining, true
	case "X-Rate-Limit-Reset":
		return fXRateLimitReset, true
	case "X-Rate-Limit-Retry-After-Seconds":
		return fXRateLimitRetryAfterSeconds, true
	case "X-Ratelimit-Bucket":
		return fXRLBucket, true
	case "X-Ratelimit-Burst-Capacity":
		return fXRLBurstCapacity, true
	case "X-Ratelimit-Global":
		return fXRLGlobal, true
	case "X-Ratelimit-Limit":
		return fXRLLimit, true
	case "X-Ratelimit-Nearlimit":
		return fXRLNearLimit, true
	case "X-Ratelimit-Next":
		return fXRLNext, true
	case "X-Ratelimit-Remaining":
		return fXRLRemaining, true
	case "X-Ratelimit-Reset":
		return fXRLReset, true
	case "X-Ratelimit-Reset-After":
		return fXRLResetAfter, true
	case "X-Ratelimit-Resource":
		return fXRLResource, true
	case "X-Ratelimit-Scope":
		return fXRLScope, true
	case "X-Ratelimit-Used":
		return fXRLUsed, true
	case "X-Retry-In":
		return fXRetryIn, true
	case "X-Shopify-Shop-Api-Call-Limit":
		return fShopify, true
	case "X-Should-Retry":
		return fXShouldRetry, true
	case "X-Tokenlimit-Limit":
		return fTokenLimitLimit, true
	case "X-Tokenlimit-Remaining":
		return fTokenLimitRemaining, true
	}
	return 0, false
}

// lookupField finds the field named key, in any case.
func lookupField(key string) (field, bool) {
	for _, fn := range fieldsByLen[len(key)] {
		if equalFoldLower(key, fn.name) {
			return fn.f, true
		}
	}
	return 0, false
}

// equalFoldLower reports whether s equals lower, a lower-case ASCII string,
// ignoring the case of ASCII letters in s. It is strings.EqualFold without
// the Unicode cases header names never need.
//
// It compares from the end: the names it is given share their beginnings
// ("x-ratelimit-...") far more than their ends.
func equalFoldLower(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func (f *fieldSet) add(h http.Header, fl field, key string, vs []string) {
	if fl != fDate { // a Date alone says nothing about rate limits
		f.any = true
	}
	if fl >= fRateLimit {
		f.limits = true
	}
	f.present |= 1 << fl
	if f.vals[fl] == nil {
		f.vals[fl] = vs
		return
	}
	// The same field under several spellings of its name (rare: net/http
	// canonicalises what it reads): merged once the pass is over.
	f.spellings |= 1 << fl
}

// mergeSpellings takes, for each field found under several spellings of
// its name, the lines of every spelling in the order of the keys, so that
// the result does not depend on map order. One more pass over the map, and
// a sort, per such field.
func (f *fieldSet) mergeSpellings(h http.Header) {
	for fl := field(0); fl < numFields; fl++ {
		if f.spellings&(1<<fl) == 0 {
			continue
		}
		var keys []string
		for k, vs := range h {
			if len(vs) > 0 && len(k) == len(fieldNames[fl]) && equalFoldLower(k, fieldNames[fl]) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		var merged []string
		for _, k := range keys {
			merged = append(merged, h[k]...)
		}
		f.vals[fl] = merged
	}
}

// familyOf returns the index in familyPrefixes of the family a header name
// belongs to, in any case, or -1.
func familyOf(key string) int {
	for i, p := range familyPrefixes {
		if len(key) > len(p.prefix) && equalFoldLower(key[:len(p.prefix)], p.prefix) {
			return i
		}
	}
	return -1
}

// familyFieldOf reads a header of the family familyPrefixes[i]; ok is
// false when it is not one after all ("X-RateLimit-Policy" has the prefix of
// Linear's family but no kind).
func familyFieldOf(key, value string, i int) (ff familyField, ok bool) {
	p := familyPrefixes[i]
	ff = familyField{fam: p.fam, kind: p.kind, suffix: key[len(p.prefix):], value: value}
	switch p.fam {
	case famX24Hour:
		// x-app-limit-24hour-<kind>: the policy is named after the
		// prefix's second word; the suffix is the kind.
		if ff.kind = kindOf(ff.suffix); ff.kind == 0 {
			return ff, false
		}
		ff.suffix = key[2 : strings.IndexByte(key[2:], '-')+2]
	case famAnthropic, famAnthropicPriority, famNamed:
		// <unit>-<kind>: the kind is the last word.
		j := strings.LastIndexByte(ff.suffix, '-')
		if j <= 0 {
			return ff, false
		}
		if ff.kind = kindOf(ff.suffix[j+1:]); ff.kind == 0 {
			return ff, false
		}
		ff.suffix = ff.suffix[:j]
	}
	ff.unit, ff.window, ff.base, ff.known, ff.rank = splitUnit(ff.suffix)
	return ff, true
}

// kindOf reads the last word of a family header: "limit", "remaining" or
// "reset", in any case; 0 for anything else.
func kindOf(word string) countKind {
	switch {
	case strings.EqualFold(word, "limit"):
		return kindLimit
	case strings.EqualFold(word, "remaining"):
		return kindRemaining
	case strings.EqualFold(word, "reset"):
		return kindReset
	}
	return 0
}

// has reports whether the field is present.
func (f *fieldSet) has(fl field) bool { return len(f.vals[fl]) > 0 }

// hasAny reports whether any of the fields in the set (bit f: field f) is
// present.
func (f *fieldSet) hasAny(set uint64) bool { return f.present&set != 0 }

// fields returns the set of the given fields, for hasAny.
func fields(fls ...field) (set uint64) {
	for _, fl := range fls {
		set |= 1 << fl
	}
	return set
}

// first returns the field's first line.
func (f *fieldSet) first(fl field) (string, bool) {
	if vs := f.vals[fl]; len(vs) > 0 {
		return vs[0], true
	}
	return "", false
}

// lines returns all of the field's lines.
func (f *fieldSet) lines(fl field) []string { return f.vals[fl] }

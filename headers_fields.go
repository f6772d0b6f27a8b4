package headway

import (
	"net/http"
	"strings"
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

	numFields
)

// fieldByName maps lower-case header names to fields. It is never written
// after initialisation.
var fieldByName = map[string]field{
	"date":                          fDate,
	"retry-after":                   fRetryAfter,
	"retry-after-ms":                fRetryAfterMs,
	"x-ms-retry-after-ms":           fMsRetryAfterMs,
	"stripe-should-retry":           fStripeShouldRetry,
	"x-should-retry":                fXShouldRetry,
	"stripe-rate-limited-reason":    fStripeRateLimitedReason,
	"ratelimit":                     fRateLimit,
	"ratelimit-policy":              fRateLimitPolicy,
	"ratelimit-limit":               fRateLimitLimit,
	"ratelimit-remaining":           fRateLimitRemaining,
	"ratelimit-reset":               fRateLimitReset,
	"ratelimit-name":                fRateLimitName,
	"ratelimit-observed":            fRateLimitObserved,
	"ratelimit-resettime":           fRateLimitResetTime,
	"ratelimit-reason":              fRateLimitReason,
	"beta-ratelimit":                fBetaRateLimit,
	"beta-ratelimit-policy":         fBetaRateLimitPolicy,
	"x-ratelimit-limit":             fXRLLimit,
	"x-ratelimit-remaining":         fXRLRemaining,
	"x-ratelimit-reset":             fXRLReset,
	"x-ratelimit-used":              fXRLUsed,
	"x-ratelimit-resource":          fXRLResource,
	"x-ratelimit-reset-after":       fXRLResetAfter,
	"x-ratelimit-bucket":            fXRLBucket,
	"x-ratelimit-global":            fXRLGlobal,
	"x-ratelimit-scope":             fXRLScope,
	"x-ratelimit-nearlimit":         fXRLNearLimit,
	"x-rate-limit-limit":            fXRateLimitLimit,
	"x-rate-limit-remaining":        fXRateLimitRemaining,
	"x-rate-limit-reset":            fXRateLimitReset,
	"x-rate-limit":                  fXRateLimit,
	"x-shopify-shop-api-call-limit": fShopify,
	"x-envoy-ratelimited":           fEnvoyRateLimited,
}

// family is a group of headers whose names end in a variable part: the
// unit, scope or endpoint the header is about.
type family uint8

const (
	famOpenAI            family = iota // x-ratelimit-{limit,remaining,reset}-<unit>
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
	{"anthropic-ratelimit-", famAnthropic, 0},
	{"anthropic-priority-", famAnthropicPriority, 0},
	{"x-ms-ratelimit-remaining-", famAzure, kindRemaining},
	{"zendesk-ratelimit-", famZendesk, 0},
}

// countKind says which part of a policy a header carries.
type countKind uint8

const (
	kindNone countKind = iota
	kindLimit
	kindRemaining
	kindReset
)

// familyField is one header of a family.
type familyField struct {
	fam    family
	kind   countKind
	suffix string // the variable part, as spelled in the key (compare with strings.EqualFold)
	value  string // the first field line
}

// fieldSet holds the header fields ParseHeaders reads, found by one pass
// over the header map with names compared without regard to case.
type fieldSet struct {
	vals   [numFields][]string
	keys   [numFields]string // the map key each field was found under
	fams   [maxFamilyFields]familyField
	nFams  int
	any    bool // some field was found
	limits bool // some field that announces limits was found
}

// maxFamilyFields bounds the family headers read from one response: Anthropic
// sends 18, OpenAI 6.
const maxFamilyFields = 32

// maxFieldName bounds the names looked up; longer ones are none of ours.
const maxFieldName = 64

func (f *fieldSet) read(h http.Header) {
	var buf [maxFieldName]byte
	for key, vs := range h {
		if len(key) < 4 || len(key) > maxFieldName || len(vs) == 0 {
			continue
		}
		switch key[0] | 0x20 { // cheap rejection of most other headers
		case 'a', 'b', 'd', 'r', 's', 'x', 'z':
		default:
			continue
		}
		lower := buf[:len(key)]
		for i := 0; i < len(key); i++ {
			c := key[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			lower[i] = c
		}
		if fl, ok := fieldByName[string(lower)]; ok {
			f.add(fl, key, vs)
			continue
		}
		f.addFamily(key, lower, vs[0])
	}
}

func (f *fieldSet) add(fl field, key string, vs []string) {
	f.any = true
	if fl >= fRateLimit {
		f.limits = true
	}
	if f.vals[fl] == nil {
		f.vals[fl], f.keys[fl] = vs, key
		return
	}
	// The same field under two spellings of its name: keep the lines of the
	// key that sorts first first, so the result does not depend on map order.
	merged := make([]string, 0, len(f.vals[fl])+len(vs))
	if key < f.keys[fl] {
		merged = append(append(merged, vs...), f.vals[fl]...)
		f.keys[fl] = key
	} else {
		merged = append(append(merged, f.vals[fl]...), vs...)
	}
	f.vals[fl] = merged
}

func (f *fieldSet) addFamily(key string, lower []byte, value string) {
	for _, p := range familyPrefixes {
		if len(lower) <= len(p.prefix) || string(lower[:len(p.prefix)]) != p.prefix {
			continue
		}
		ff := familyField{fam: p.fam, kind: p.kind, suffix: key[len(p.prefix):], value: value}
		if p.fam == famAnthropic || p.fam == famAnthropicPriority {
			// <unit>-<kind>: the kind is the last word.
			i := strings.LastIndexByte(ff.suffix, '-')
			if i <= 0 {
				return
			}
			switch string(lower[len(p.prefix)+i+1:]) {
			case "limit":
				ff.kind = kindLimit
			case "remaining":
				ff.kind = kindRemaining
			case "reset":
				ff.kind = kindReset
			default:
				return
			}
			ff.suffix = ff.suffix[:i]
		}
		if f.nFams == len(f.fams) {
			return // more than any real response sends; the rest is ignored
		}
		f.fams[f.nFams] = ff
		f.nFams++
		f.any, f.limits = true, true
		return
	}
}

// has reports whether the field is present.
func (f *fieldSet) has(fl field) bool { return len(f.vals[fl]) > 0 }

// first returns the field's first line.
func (f *fieldSet) first(fl field) (string, bool) {
	if vs := f.vals[fl]; len(vs) > 0 {
		return vs[0], true
	}
	return "", false
}

// lines returns all of the field's lines.
func (f *fieldSet) lines(fl field) []string { return f.vals[fl] }

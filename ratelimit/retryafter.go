package ratelimit

import (
	"math/bits"
	"net/http"
	"strings"
	"time"
)

// retryAfterFields lists the fields that carry a retry delay, most precise
// first: the millisecond variants (Azure, OpenAI) win over Retry-After.
var retryAfterFields = [...]struct {
	f    field
	name string
}{
	{fRetryAfterMs, "Retry-After-Ms"},
	{fMsRetryAfterMs, "X-Ms-Retry-After-Ms"},
}

// retryAfter returns the retry delay, the header it was read from, whether
// it was an HTTP-date, and whether there was one.
func (f *fieldSet) retryAfter(c *dateBase) (d time.Duration, from string, date, ok bool) {
	for _, ra := range retryAfterFields {
		if v, ok := f.first(ra.f); ok {
			if d, ok := parseDecimalDuration(v, time.Millisecond); ok {
				return d, ra.name, false, true
			}
		}
	}
	v, ok := f.first(fRetryAfter)
	if !ok {
		d, from, ok = f.retryAfterVariants()
		return d, from, false, ok
	}
	var now time.Time
	// Only a date needs the server's clock; delay-seconds skip parsing Date.
	if t := trimOWS(v); t == "" || t[0] < '0' || t[0] > '9' {
		now, date = c.now(), true
	}
	if d, ok = ParseRetryAfter(v, now); !ok {
		d, from, ok = f.retryAfterVariants()
		return d, from, false, ok
	}
	return d, "Retry-After", date, true
}

// retryAfterVariants reads the delays that servers without a Retry-After
// send in its place: Bucket4j's X-Rate-Limit-Retry-After-Seconds, Traefik
// 1's X-Retry-In (a Go duration, "30s").
func (f *fieldSet) retryAfterVariants() (time.Duration, string, bool) {
	if v, ok := f.first(fXRateLimitRetryAfterSeconds); ok {
		if d, ok := parseDecimalDuration(v, time.Second); ok {
			return d, "X-Rate-Limit-Retry-After-Seconds", true
		}
	}
	if v, ok := f.first(fXRetryIn); ok {
		if d, ok := parseGoDuration(trimOWS(v)); ok {
			return d, "X-Retry-In", true
		}
	}
	return 0, "", false
}

// ParseRetryAfter parses one Retry-After value (RFC 9110, section 10.2.3):
// delay-seconds (also the common fractional form "2.0"), or an HTTP-date in
// any of its three forms (IMF-fixdate, RFC 850, asctime) and the common
// variants with a "UTC" zone or a numeric offset ("+0000"). A date is
// measured against now, which should be
// the response's Date when it has one; a date in the past gives 0.
//
// ok is false for an empty, negative, signed or otherwise malformed value.
// Huge values are clamped to MaxDuration.
func ParseRetryAfter(value string, now time.Time) (d time.Duration, ok bool) {
	v := trimOWS(value)
	if v == "" {
		return 0, false
	}
	if c := v[0]; c >= '0' && c <= '9' {
		return parseDecimalDuration(v, time.Second)
	}
	t, ok := parseHTTPDate(v)
	if !ok {
		return 0, false
	}
	return untilClamped(now, t), true
}

// untilClamped returns t-now, clamped to [0, MaxDuration].
func untilClamped(now, t time.Time) time.Duration {
	if !t.After(now) {
		return 0
	}
	// Compare in seconds first: t.Sub saturates, but a date centuries ahead
	// should still clamp to MaxDuration rather than to MaxInt64.
	if t.Unix()-now.Unix() > int64(MaxDuration/time.Second) {
		return MaxDuration
	}
	return min(t.Sub(now), MaxDuration)
}

// httpDateLayouts are the forms an HTTP-date takes in the wild: the three of
// RFC 9110 and common variants. Each zoned layout is also read with "UTC" in
// place of "GMT" (sethvargo/go-limiter writes IMF-fixdate so, and Go's own
// time.RFC850 writes "Thursday, 26-Nov-26 03:18:46 UTC").
var httpDateLayouts = [...]string{
	http.TimeFormat,                    // Sun, 06 Nov 1994 08:49:37 GMT
	"Monday, 02-Jan-06 15:04:05 GMT",   // RFC 850
	"Mon Jan _2 15:04:05 2006",         // asctime
	"Mon, 2 Jan 2006 15:04:05 GMT",     // single-digit day, seen in the wild
	"Monday, 02-Jan-2006 15:04:05 GMT", // RFC 850 with a four-digit year
	time.RFC1123Z,                      // Sun, 06 Nov 1994 08:49:37 +0000
}

// ParseDate parses an HTTP-date (RFC 9110, section 5.6.7), such as a Date
// header, in any of the forms ParseRetryAfter accepts.
func ParseDate(v string) (time.Time, bool) { return parseHTTPDate(v) }

func parseHTTPDate(v string) (time.Time, bool) {
	v = trimOWS(v)
	if t, ok := parseIMFFixdate(v); ok {
		return t, true
	}
	if len(v) < len("Mon Jan 2 15:04:05 2006") || len(v) > 64 {
		return time.Time{}, false
	}
	if rest, ok := strings.CutSuffix(v, " UTC"); ok {
		v = rest + " GMT" // the layouts spell the zone GMT; both mean UTC
	}
	for _, layout := range httpDateLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// parseIMFFixdate reads "Sun, 06 Nov 1994 08:49:37 GMT" (or "UTC"), the form
// nearly every server sends, without time.Parse: every Date header and
// every date reset goes through here. It takes the names of days and months
// in their canonical case only and reports false for anything else, which
// parseHTTPDate then tries by layout.
func parseIMFFixdate(v string) (time.Time, bool) {
	if len(v) != len("Sun, 06 Nov 1994 08:49:37 GMT") || v[3] != ',' || v[4] != ' ' || v[7] != ' ' ||
		v[11] != ' ' || v[16] != ' ' || v[19] != ':' || v[22] != ':' || v[25] != ' ' {
		return time.Time{}, false
	}
	if zone := v[26:]; zone != "GMT" && zone != "UTC" {
		return time.Time{}, false
	}
	d2 := func(i int) int { // two digits at v[i:i+2], or -1
		a, b := int(v[i])-'0', int(v[i+1])-'0'
		if a < 0 || a > 9 || b < 0 || b > 9 {
			return -1
		}
		return a*10 + b
	}
	day, hour, minute, sec := d2(5), d2(17), d2(20), d2(23)
	year := -1
	if hi, lo := d2(12), d2(14); hi >= 0 && lo >= 0 {
		year = hi*100 + lo
	}
	var month int
	switch v[8:11] {
	case "Jan":
		month = 1
	case "Feb":
		month = 2
	case "Mar":
		month = 3
	case "Apr":
		month = 4
	case "May":
		month = 5
	case "Jun":
		month = 6
	case "Jul":
		month = 7
	case "Aug":
		month = 8
	case "Sep":
		month = 9
	case "Oct":
		month = 10
	case "Nov":
		month = 11
	case "Dec":
		month = 12
	}
	if month == 0 || day < 1 || year < 0 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	if day > daysIn(month, year) { // 31 Feb and the like: time.Parse rejects them too
		return time.Time{}, false
	}
	// time.Parse checks the weekday name's spelling, not its truth; so do we.
	switch v[:3] {
	case "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun":
		secs := daysFromCivil(year, month, day)*86400 + int64(hour*3600+minute*60+sec)
		return time.Unix(secs, 0).UTC(), true
	}
	return time.Time{}, false
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns the number of days from 1970-01-01 to the given
// proleptic Gregorian date, for years 0 to 9999 (Howard Hinnant's
// days_from_civil).
func daysFromCivil(year, month, day int) int64 {
	if month <= 2 {
		year--
	}
	era := year / 400
	if year < 0 {
		era = (year - 399) / 400
	}
	yoe := year - era*400
	mp := (month + 9) % 12 // March is 0
	doy := (153*mp+2)/5 + day - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

// parseDecimalDuration reads a non-negative decimal number of units
// ("2", "2.0", "0.25", "1500") with no sign, exponent or spaces. Values
// beyond MaxDuration are clamped to it. The arithmetic is exact (integers,
// not floats); a value that is not a whole number of nanoseconds is rounded
// up, so that a server's "0.0001" is never read as "now".
func parseDecimalDuration(v string, unit time.Duration) (time.Duration, bool) {
	v = trimOWS(v)
	if v == "" || unit <= 0 {
		return 0, false
	}
	limit := int64(MaxDuration / unit) // the most whole units that fit
	var (
		whole      int64  // saturates at limit+1
		frac       int64  // the first 9 fractional digits, over 10^fracDigits
		pow        uint64 = 1
		fracDigits int
		beyond     bool // a nonzero fractional digit after the 9th
		seenDot    bool
		digits     int // digits before the dot
	)
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= '0' && c <= '9':
			d := int64(c - '0')
			switch {
			case seenDot && fracDigits < 9:
				frac = frac*10 + d
				pow *= 10
				fracDigits++
			case seenDot:
				beyond = beyond || d != 0
			case whole > limit/10:
				digits++
				whole = limit + 1
			default:
				digits++
				whole = whole*10 + d
			}
		case c == '.' && !seenDot && digits > 0:
			seenDot = true
		default:
			return 0, false
		}
	}
	if seenDot && fracDigits == 0 { // "1."
		return 0, false
	}
	if whole > limit {
		return MaxDuration, true
	}
	// frac/pow < 1, so frac*unit/pow < unit: the quotient cannot overflow.
	hi, lo := bits.Mul64(uint64(frac), uint64(unit))
	q, r := bits.Div64(hi, lo, pow)
	if r != 0 || beyond {
		q++
	}
	d := time.Duration(whole)*unit + time.Duration(q) // <= MaxDuration+unit
	return min(d, MaxDuration), true
}

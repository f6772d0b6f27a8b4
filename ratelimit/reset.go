package ratelimit

import (
	"math"
	"strings"
	"time"
)

// This file turns the numbers and times that rate-limit headers carry into
// counts and durations: every function here is total (no panics), never
// returns a negative count or duration, and clamps durations to
// MaxDuration.

// The rule for a reset number whose dialect does not say what it means
// ("X-RateLimit-Reset: 1740000000" or "... 30"):
//
//  1. A number that reads as a Unix time within nearDate of the response's
//     Date (or of the receive time, without a Date) is one: in milliseconds
//     if it is near as milliseconds, else in seconds. This reads old
//     captures right (a 1994 reset is 7.8e8) and costs a Date parse only
//     for numbers of at least nearDate.
//  2. Otherwise its size decides: at least 1e12 is Unix milliseconds, at
//     least 1e9 Unix seconds (a delay of 1e9 seconds would be 31 years),
//     anything smaller a delay in seconds.
const (
	nearDate          = 1e8 // about three years, in seconds
	epochSecondsFloor = 1e9
	epochMillisFloor  = 1e12
)

// resetFormat is how a dialect documents its reset values.
type resetFormat uint8

const (
	resetAuto  resetFormat = iota // by the rule above; strings by layout
	resetDelta                    // delay-seconds, fractional allowed
	resetEpoch                    // Unix seconds, fractional allowed
)

// dateBase is what absolute reset times are measured against. base is the response's Date
// when it has a valid one, else the time the response was received; it is
// computed on first use, because most responses need no absolute time.
type dateBase struct {
	date     string // the Date field, "" if absent
	received time.Time
	base     time.Time
	done     bool
	memo     *Parser // remembers the last Date parsed; nil for ParseHeaders
	// abs reports whether the reset parseReset read last was an instant
	// (a Unix time or a date), not a delay.
	abs bool
}

func (c *dateBase) now() time.Time {
	if !c.done {
		c.done = true
		c.base = c.received
		if c.date != "" {
			if t, ok := c.memo.parseDate(c.date); ok {
				c.base = t
			}
		}
	}
	return c.base
}

// parseReset reads a reset value in the given format. ok is false when the
// value is malformed; the result is never negative (a reset in the past is 0)
// and never beyond MaxDuration.
func parseReset(v string, f resetFormat, c *dateBase) (time.Duration, bool) {
	c.abs = false
	v = trimOWS(v)
	if v == "" {
		return 0, false
	}
	switch f {
	case resetDelta:
		return parseDecimalDuration(v, time.Second)
	case resetEpoch:
		sec, nsec, ok := parseUnix(v, time.Second)
		if !ok {
			return 0, false
		}
		c.abs = true
		return untilUnix(c.now(), sec, nsec), true
	}
	if v[0] < '0' || v[0] > '9' {
		// Letters first: an HTTP-date ("Wed, 25 Nov 2026 21:32:42 UTC").
		t, ok := parseHTTPDate(v)
		if !ok {
			return 0, false
		}
		c.abs = true
		return untilClamped(c.now(), t), true
	}
	if isDecimal(v) {
		return parseAutoNumber(v, c)
	}
	if strings.IndexByte(v, '-') > 0 && strings.IndexByte(v, ':') > 0 {
		t, ok := parseISODate(v)
		if !ok {
			return 0, false
		}
		c.abs = true
		return untilClamped(c.now(), t), true
	}
	return parseGoDuration(v)
}

// parseAutoNumber applies the epoch-or-delta rule to a decimal number.
func parseAutoNumber(v string, c *dateBase) (time.Duration, bool) {
	var whole int64 // the integer part, saturating far above any threshold
	for i := 0; i < len(v) && v[i] != '.'; i++ {
		if whole < 1e17 {
			whole = whole*10 + int64(v[i]-'0')
		}
	}
	epoch := func(unit time.Duration) (time.Duration, bool) {
		sec, nsec, ok := parseUnix(v, unit)
		if !ok {
			return 0, false
		}
		c.abs = true
		return untilUnix(c.now(), sec, nsec), true
	}
	if whole >= nearDate {
		if now := c.now().Unix(); now >= 2*nearDate { // a base after 1976
			near := func(t int64) bool { return t >= now-nearDate && t <= now+nearDate }
			switch {
			case near(whole / 1000):
				return epoch(time.Millisecond)
			case near(whole):
				return epoch(time.Second)
			}
		}
	}
	switch {
	case whole >= epochMillisFloor:
		return epoch(time.Millisecond)
	case whole >= epochSecondsFloor:
		return epoch(time.Second)
	default:
		return parseDecimalDuration(v, time.Second)
	}
}

// isDecimal reports whether v is digits with at most one dot between digits.
func isDecimal(v string) bool {
	dot := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= '0' && c <= '9':
		case c == '.' && !dot && i > 0 && i < len(v)-1:
			dot = true
		default:
			return false
		}
	}
	return v != ""
}

// maxUnixSeconds bounds the Unix times that are parsed exactly; later times
// are all further ahead than MaxDuration of any plausible now, and are
// clamped to it.
const maxUnixSeconds = 1 << 40 // the year 36812

// parseUnix reads a non-negative decimal Unix time counted in unit (a
// second or a millisecond) and returns it as seconds and nanoseconds.
// Times beyond maxUnixSeconds are returned as maxUnixSeconds.
func parseUnix(v string, unit time.Duration) (sec, nsec int64, ok bool) {
	d, ok := parseDecimalUnits(v, unit, maxUnixSeconds*int64(time.Second/unit))
	if !ok {
		return 0, 0, false
	}
	// d counts nanoseconds when it fits; parseDecimalUnits saturates.
	return d.whole, d.nanos, true
}

// untilUnix is untilClamped for a Unix time.
func untilUnix(now time.Time, sec, nsec int64) time.Duration {
	return untilClamped(now, time.Unix(sec, nsec))
}

// decimalUnits is a non-negative decimal number of some unit, split into
// whole seconds and nanoseconds.
type decimalUnits struct {
	whole int64 // seconds
	nanos int64 // [0, 1e9)
}

// parseDecimalUnits reads digits with an optional fraction in the given unit
// (at most a second), saturating the number of units at maxUnits.
func parseDecimalUnits(v string, unit time.Duration, maxUnits int64) (decimalUnits, bool) {
	if !isDecimal(v) || unit <= 0 || unit > time.Second {
		return decimalUnits{}, false
	}
	var units int64
	i := 0
	for ; i < len(v) && v[i] != '.'; i++ {
		if units > maxUnits/10 {
			units = maxUnits
			continue
		}
		units = min(units*10+int64(v[i]-'0'), maxUnits)
	}
	// The fraction of one unit, in nanoseconds, rounded down: a unit is at
	// most a second, so at most nine digits matter.
	var frac int64
	scale := int64(unit)
	for j := i + 1; j < len(v) && scale >= 10; j++ {
		scale /= 10
		frac += int64(v[j]-'0') * scale
	}
	perSecond := int64(time.Second / unit)
	return decimalUnits{
		whole: units / perSecond,
		nanos: (units%perSecond)*int64(unit) + frac,
	}, true
}

// parseGoDuration reads a Go-style duration ("1s", "6m0s", "20ms",
// "2m59.56s") as OpenAI and its imitators send; signs are rejected and
// overflowing values clamp to MaxDuration.
func parseGoDuration(v string) (time.Duration, bool) {
	if v == "" || v[0] < '0' || v[0] > '9' {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		// time.ParseDuration fails on overflow too; tell that apart from
		// garbage by checking the syntax with a tiny value of each unit.
		if isGoDurationSyntax(v) {
			return MaxDuration, true
		}
		return 0, false
	}
	return min(max(d, 0), MaxDuration), true
}

// isGoDurationSyntax reports whether v is a sequence of decimal numbers each
// followed by one of Go's duration units.
func isGoDurationSyntax(v string) bool {
	for v != "" {
		i := 0
		for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
			i++
		}
		if i == 0 || !isDecimal(v[:i]) {
			return false
		}
		v = v[i:]
		j := 0
		for j < len(v) && (v[j] < '0' || v[j] > '9') && v[j] != '.' {
			j++
		}
		switch v[:j] {
		case "ns", "us", "µs", "μs", "ms", "s", "m", "h":
		default:
			return false
		}
		v = v[j:]
	}
	return true
}

// isoLayouts are the ISO 8601 forms resets take: RFC 3339 (Anthropic) and
// the minute-precision form Jira sends ("2020-09-01T12:05Z").
var isoLayouts = [...]string{
	time.RFC3339Nano,
	"2006-01-02T15:04Z07:00",
	"2006-01-02 15:04:05Z07:00",
}

func parseISODate(v string) (time.Time, bool) {
	if len(v) > 64 {
		return time.Time{}, false
	}
	for _, layout := range isoLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// parseCount reads a limit or remaining count: a non-negative integer, or a
// non-negative decimal (Reddit's "598.0"), rounded down. Values beyond
// maxCount are clamped to it.
func parseCount(v string) (int64, bool) {
	v = trimOWS(v)
	if !isDecimal(v) {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v) && v[i] != '.'; i++ {
		if n > maxCount/10 {
			return maxCount, true
		}
		n = min(n*10+int64(v[i]-'0'), maxCount)
	}
	return n, true
}

// maxCount bounds limits and remaining counts: 2^53, the largest integer a
// JSON number holds exactly.
const maxCount = 1 << 53

// countFromFloat converts a structured-field number to a count; ok is false
// for a negative value or NaN, and +Inf is clamped like any huge value.
func countFromFloat(f float64) (int64, bool) {
	if math.IsNaN(f) || f < 0 {
		return 0, false
	}
	if f >= maxCount {
		return maxCount, true
	}
	return int64(f), true
}

// secondsFromFloat converts a structured-field number of seconds to a
// duration, clamped to MaxDuration (+Inf included); ok is false for a
// negative value or NaN.
func secondsFromFloat(f float64) (time.Duration, bool) {
	if math.IsNaN(f) || f < 0 {
		return 0, false
	}
	if f >= float64(MaxDuration/time.Second) {
		return MaxDuration, true
	}
	return time.Duration(math.Ceil(f * float64(time.Second))), true
}

// parseClockDuration reads a duration written as a clock, "hh:mm:ss" (the
// hours may have any number of digits, the seconds a fraction), as Azure
// Resource Graph sends its quota resets.
func parseClockDuration(v string) (time.Duration, bool) {
	v = trimOWS(v)
	h, rest, ok1 := strings.Cut(v, ":")
	m, s, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || len(m) != 2 || len(s) < 2 {
		return 0, false
	}
	hours, ok := parseCount(h)
	if !ok || !isDecimal(h) || strings.IndexByte(h, '.') >= 0 {
		return 0, false
	}
	mins, ok := parseCount(m)
	if !ok || mins > 59 || strings.IndexByte(m, '.') >= 0 {
		return 0, false
	}
	secs, ok := parseDecimalDuration(s, time.Second)
	if !ok || secs >= time.Minute {
		return 0, false
	}
	if hours > int64(MaxDuration/time.Hour) {
		return MaxDuration, true
	}
	return min(time.Duration(hours)*time.Hour+time.Duration(mins)*time.Minute+secs, MaxDuration), true
}

// trimOWS trims the optional white space (spaces and tabs) around a field
// value; unlike strings.Trim it builds no character set on each call.
func trimOWS(v string) string {
	for v != "" && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for v != "" && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

// parsePeriod reads a window: a number of seconds ("1"), a Go duration
// ("1m", "1h0m0s") or a number of days ("1d").
func parsePeriod(v string) (time.Duration, bool) {
	v = trimOWS(v)
	if isDecimal(v) {
		return parseDecimalDuration(v, time.Second)
	}
	if n := len(v) - 1; n > 0 && (v[n] == 'd' || v[n] == 'D') && isDigits(v[:n]) {
		days, _ := parseCount(v[:n])
		return seconds(min(days, int64(MaxDuration/(24*time.Hour))) * 86400), true
	}
	return parseGoDuration(v)
}

// isDigits reports whether s is a non-empty run of ASCII digits.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// seconds converts a count of seconds to a duration, clamped.
func seconds(n int64) time.Duration {
	if n > int64(MaxDuration/time.Second) {
		return MaxDuration
	}
	return time.Duration(n) * time.Second
}

package ratelimit

import (
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hdrNow is the fixed "now" of the table tests: Wednesday 25 November 2026,
// 21:00:00 UTC, 32m42s before the dates in dialects.md.
var hdrNow = time.Date(2026, time.November, 25, 21, 0, 0, 0, time.UTC)

// hdrDate is hdrNow as an IMF-fixdate, as a server's Date header says it.
const hdrDate = "Wed, 25 Nov 2026 21:00:00 GMT"

func TestParseRetryAfterDelaySeconds(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"1", time.Second},
		{"2", 2 * time.Second},
		{"1000", 1000 * time.Second},
		{"\t42 ", 42 * time.Second},
		{"  7\t\t", 7 * time.Second},
		{"007", 7 * time.Second},
		// Fractional delay-seconds (Shopify sends "2.0"); exact, no float error.
		{"2.0", 2 * time.Second},
		{"0.5", 500 * time.Millisecond},
		{"1.25", 1250 * time.Millisecond},
		{"0.3", 300 * time.Millisecond},
		{"0.1", 100 * time.Millisecond},
		{"0.7", 700 * time.Millisecond},
		{"2.675", 2675 * time.Millisecond},
		{"12.345", 12345 * time.Millisecond},
		{"0.123456789", 123456789 * time.Nanosecond},
		{"9.999999999", 9999999999 * time.Nanosecond},
		{"0.000", 0},
		{"0.0000000000000", 0},
		// Sub-nanosecond remainders round up: a positive delay is never "now".
		{"0.0000000001", time.Nanosecond},
		{"0.0000000000000000001", time.Nanosecond},
		{"0.1234567891", 123456790 * time.Nanosecond},
		{"1.0000000000000000000", time.Second},
		// Huge values clamp to MaxDuration instead of overflowing.
		{"3153599999", MaxDuration - time.Second},
		{"3153599999.999999999", MaxDuration - time.Nanosecond},
		{"3153599999.9999999991", MaxDuration},
		{"3153600000", MaxDuration},
		{"3153600001", MaxDuration},
		{"9223372036", MaxDuration},
		{"9223372037", MaxDuration},
		{"99999999999", MaxDuration},
		{"999999999999999999999999999", MaxDuration},
		{"99999999999999999999999999999999999999999999999999.5", MaxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, ok := ParseRetryAfter(tt.in, hdrNow)
			require.True(t, ok)
			require.Equal(t, tt.want, d)
		})
	}
}

func TestParseRetryAfterRejects(t *testing.T) {
	for _, in := range []string{
		"",
		" ",
		"\t \t",
		"-1",
		"+1",
		"-2",
		"-0",
		"1e3",
		"0x10",
		"1.",
		".5",
		"1.2.3",
		"1..2",
		"1,5",
		"5, 10",
		"\xb2", // superscript two in Latin-1; urllib3's vector
		"²",
		"١", // Arabic-Indic digit one
		"abc",
		"2 3",
		"2s",
		"1_000",
		"\n5",
		"5\r",
		"NaN",
		"Inf",
		"Wed, 99 Nov 2026 00:00:00 GMT",
		"Wed, 25 Nov 2026 25:00:00 GMT",
		"Wed, 31 Nov 2026 21:32:42 GMT",
		"Wed, 25 Nov 2026 21:32:42 PST",
		"Wed, 25 Nov 2026 21:32:42",
		"25 Nov 2026 21:32:42 GMT",
		"2026-11-25T21:32:42Z",
		"Wed, 25 Nov 2026 21:32:42 GMT" + strings.Repeat(" x", 20),
	} {
		t.Run(in, func(t *testing.T) {
			d, ok := ParseRetryAfter(in, hdrNow)
			require.False(t, ok)
			require.Zero(t, d)
		})
	}
}

func TestParseRetryAfterHTTPDate(t *testing.T) {
	const want = 32*time.Minute + 42*time.Second
	nov5 := time.Date(2026, time.November, 5, 21, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   string
		now  time.Time
		want time.Duration
	}{
		{"IMF-fixdate", "Wed, 25 Nov 2026 21:32:42 GMT", hdrNow, want},
		{"IMF-fixdate padded", " \tWed, 25 Nov 2026 21:32:42 GMT\t ", hdrNow, want},
		{"RFC 850", "Wednesday, 25-Nov-26 21:32:42 GMT", hdrNow, want},
		{"RFC 850 four-digit year", "Wednesday, 25-Nov-2026 21:32:42 GMT", hdrNow, want},
		{"RFC 850 with UTC, as time.RFC850 writes it", "Wednesday, 25-Nov-26 21:32:42 UTC", hdrNow, want},
		{"RFC 850 four-digit year with UTC", "Wednesday, 25-Nov-2026 21:32:42 UTC", hdrNow, want},
		{"single-digit day with UTC", "Thu, 5 Nov 2026 21:32:42 UTC", nov5, want},
		{"asctime", "Wed Nov 25 21:32:42 2026", hdrNow, want},
		{"asctime single-digit day", "Thu Nov  5 21:32:42 2026", nov5, want},
		// The weekday is not checked against the date: 5 Nov 2026 is a Thursday.
		{"asctime wrong weekday", "Wed Nov  5 21:32:42 2026", nov5, want},
		{"UTC zone (go-limiter)", "Wed, 25 Nov 2026 21:32:42 UTC", hdrNow, want},
		{"numeric zone (RFC 1123 with RFC 822 offset)", "Wed, 25 Nov 2026 22:32:42 +0100", hdrNow, want},
		{"single-digit day", "Thu, 5 Nov 2026 21:32:42 GMT", nov5, want},
		{"one second ahead", "Wed, 25 Nov 2026 21:00:01 GMT", hdrNow, time.Second},
		{"next day", "Thu, 26 Nov 2026 21:00:00 GMT", hdrNow, 24 * time.Hour},
		{"next year", "Thu, 25 Nov 2027 21:00:00 GMT", hdrNow, 365 * 24 * time.Hour},
		{"now", hdrDate, hdrNow, 0},
		{"one second ago", "Wed, 25 Nov 2026 20:59:59 GMT", hdrNow, 0},
		{"RFC 850 past", "Wednesday, 25-Nov-26 20:00:00 GMT", hdrNow, 0},
		{"asctime past", "Wed Nov 25 20:00:00 2026", hdrNow, 0},
		{"RFC 9110 example", "Sun, 06 Nov 1994 08:49:37 GMT", hdrNow, 0},
		{"year zero", "Sat, 01 Jan 0000 00:00:00 GMT", hdrNow, 0},
		{"500 years ahead", "Wed, 25 Nov 2526 21:32:42 GMT", hdrNow, MaxDuration},
		{"year 9999", "Fri, 31 Dec 9999 23:59:59 GMT", hdrNow, MaxDuration},
		{"year 9999 from year 1", "Fri, 31 Dec 9999 23:59:59 GMT", time.Time{}, MaxDuration},
		{"now is not UTC", "Wed, 25 Nov 2026 21:32:42 GMT", hdrNow.In(time.FixedZone("X", -5*3600)), want},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := ParseRetryAfter(tt.in, tt.now)
			require.True(t, ok)
			require.Equal(t, tt.want, d)
		})
	}
}

func TestParseHTTPDate(t *testing.T) {
	want := time.Date(2026, time.November, 25, 21, 32, 42, 0, time.UTC)
	for _, in := range []string{
		"Wed, 25 Nov 2026 21:32:42 GMT",
		"Wed, 25 Nov 2026 21:32:42 UTC",
		"Wednesday, 25-Nov-26 21:32:42 GMT",
		"Wednesday, 25-Nov-2026 21:32:42 GMT",
		"Wed Nov 25 21:32:42 2026",
		"  Wed, 25 Nov 2026 21:32:42 GMT\t",
	} {
		t.Run(in, func(t *testing.T) {
			got, ok := parseHTTPDate(in)
			require.True(t, ok)
			require.Equal(t, want, got)
			require.Equal(t, time.UTC, got.Location())
		})
	}
	for _, in := range []string{
		"",
		"Wed Nov 25",
		"Wed, 25 Nov 2026 21:32:42 GMT" + strings.Repeat(" ", 40) + "x",
		"Wed, 25 Nov 2026 21:32:42 EST",
		"yesterday at noon, roughly.",
		"Wed, 25 Nov 2026 21:32:42 GMT garbage",
	} {
		t.Run("reject "+in, func(t *testing.T) {
			got, ok := parseHTTPDate(in)
			require.False(t, ok)
			require.True(t, got.IsZero())
		})
	}
}

func TestUntilClamped(t *testing.T) {
	tests := []struct {
		name   string
		now, t time.Time
		want   time.Duration
	}{
		{"equal", hdrNow, hdrNow, 0},
		{"past", hdrNow, hdrNow.Add(-time.Nanosecond), 0},
		{"far past", hdrNow, time.Time{}, 0},
		{"one ns", hdrNow, hdrNow.Add(time.Nanosecond), time.Nanosecond},
		{"just below cap", hdrNow, hdrNow.Add(MaxDuration - time.Nanosecond), MaxDuration - time.Nanosecond},
		{"at cap", hdrNow, hdrNow.Add(MaxDuration), MaxDuration},
		{"just above cap", hdrNow, hdrNow.Add(MaxDuration + time.Nanosecond), MaxDuration},
		{"beyond int64 nanoseconds", time.Time{}, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), MaxDuration},
		{"locations differ", hdrNow.In(time.FixedZone("X", 3600)), hdrNow.Add(time.Minute), time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, untilClamped(tt.now, tt.t))
		})
	}
}

func TestParseDecimalDurationMilliseconds(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1500", 1500 * time.Millisecond, true},
		{"0", 0, true},
		{"0.5", 500 * time.Microsecond, true},
		{"0.3", 300 * time.Microsecond, true},
		{"20.000001", 20*time.Millisecond + time.Nanosecond, true},
		{"0.0000001", time.Nanosecond, true}, // 0.1 ns rounds up
		{"3153600000000", MaxDuration, true},
		{"3153599999999", MaxDuration - time.Millisecond, true},
		{"18446744073709551616", MaxDuration, true},
		{"-1", 0, false},
		{"1.5ms", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, ok := parseDecimalDuration(tt.in, time.Millisecond)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, d)
		})
	}
}

// header builds a canonical http.Header from name/value pairs, as net/http
// would: Add canonicalises the name and keeps repeated field lines in order.
func mkHeader(kv ...string) http.Header {
	h := make(http.Header)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestParseHeadersRetryAfter(t *testing.T) {
	const retryAt = "Wed, 25 Nov 2026 21:02:00 GMT" // hdrNow + 2m
	tests := []struct {
		name     string
		h        http.Header
		received time.Time
		want     time.Duration
		from     string // RetryAfterHeader; "" means HasRetryAfter is false
	}{
		{"delay-seconds", mkHeader("Retry-After", "2"), hdrNow, 2 * time.Second, "Retry-After"},
		{"delay-seconds zero", mkHeader("Retry-After", "0"), hdrNow, 0, "Retry-After"},
		{"fractional", mkHeader("Retry-After", "2.0"), hdrNow, 2 * time.Second, "Retry-After"},
		{"huge", mkHeader("Retry-After", "99999999999"), hdrNow, MaxDuration, "Retry-After"},
		{"lower-case name via Set", mkHeader("retry-after", "3"), hdrNow, 3 * time.Second, "Retry-After"},

		// Date form, measured against the Date header: a client clock that is
		// an hour off either way still waits what the server meant.
		{"date, clocks agree", mkHeader("Date", hdrDate, "Retry-After", retryAt), hdrNow, 2 * time.Minute, "Retry-After"},
		{"date, client clock 1h ahead", mkHeader("Date", hdrDate, "Retry-After", retryAt), hdrNow.Add(time.Hour), 2 * time.Minute, "Retry-After"},
		{"date, client clock 1h behind", mkHeader("Date", hdrDate, "Retry-After", retryAt), hdrNow.Add(-time.Hour), 2 * time.Minute, "Retry-After"},
		{"date in the past by Date header", mkHeader("Date", "Wed, 25 Nov 2026 21:05:00 GMT", "Retry-After", retryAt), hdrNow, 0, "Retry-After"},
		{"Date header in asctime", mkHeader("Date", "Wed Nov 25 21:00:00 2026", "Retry-After", retryAt), hdrNow.Add(time.Hour), 2 * time.Minute, "Retry-After"},
		{"Date header with UTC zone", mkHeader("Date", "Wed, 25 Nov 2026 21:00:00 UTC", "Retry-After", retryAt), hdrNow.Add(time.Hour), 2 * time.Minute, "Retry-After"},
		{"padded date still uses Date header", mkHeader("Date", hdrDate, "Retry-After", " \t"+retryAt+" "), hdrNow.Add(time.Hour), 2 * time.Minute, "Retry-After"},
		{"first Date line wins", mkHeader("Date", hdrDate, "Date", "Wed, 25 Nov 2026 20:00:00 GMT", "Retry-After", retryAt), hdrNow, 2 * time.Minute, "Retry-After"},

		// No or invalid Date header: measured from the received time.
		{"date, no Date header", mkHeader("Retry-After", retryAt), hdrNow.Add(30 * time.Second), 90 * time.Second, "Retry-After"},
		{"date, invalid Date header", mkHeader("Date", "yesterday", "Retry-After", retryAt), hdrNow.Add(30 * time.Second), 90 * time.Second, "Retry-After"},
		{"date, empty Date header", mkHeader("Date", "", "Retry-After", retryAt), hdrNow.Add(30 * time.Second), 90 * time.Second, "Retry-After"},
		{"date, past by received", mkHeader("Retry-After", retryAt), hdrNow.Add(time.Hour), 0, "Retry-After"},
		{"Date header does not affect delay-seconds", mkHeader("Date", "Sun, 06 Nov 1994 08:49:37 GMT", "Retry-After", "5"), hdrNow, 5 * time.Second, "Retry-After"},

		// Millisecond variants win over Retry-After.
		{"retry-after-ms", mkHeader("Retry-After-Ms", "1500"), hdrNow, 1500 * time.Millisecond, "Retry-After-Ms"},
		{"retry-after-ms wins", mkHeader("Retry-After", "30", "Retry-After-Ms", "1500"), hdrNow, 1500 * time.Millisecond, "Retry-After-Ms"},
		{"retry-after-ms lower-case via Set", mkHeader("retry-after-ms", "250", "retry-after", "30"), hdrNow, 250 * time.Millisecond, "Retry-After-Ms"},
		{"retry-after-ms fractional", mkHeader("Retry-After-Ms", "0.5"), hdrNow, 500 * time.Microsecond, "Retry-After-Ms"},
		{"retry-after-ms zero", mkHeader("Retry-After-Ms", "0", "Retry-After", "30"), hdrNow, 0, "Retry-After-Ms"},
		{"retry-after-ms huge", mkHeader("Retry-After-Ms", "99999999999999999"), hdrNow, MaxDuration, "Retry-After-Ms"},
		{"x-ms-retry-after-ms", mkHeader("X-Ms-Retry-After-Ms", "20", "Retry-After", "1"), hdrNow, 20 * time.Millisecond, "X-Ms-Retry-After-Ms"},
		{"retry-after-ms before x-ms-retry-after-ms", mkHeader("X-Ms-Retry-After-Ms", "20", "Retry-After-Ms", "30"), hdrNow, 30 * time.Millisecond, "Retry-After-Ms"},
		{"garbage retry-after-ms falls through", mkHeader("Retry-After-Ms", "garbage", "Retry-After", "7"), hdrNow, 7 * time.Second, "Retry-After"},
		{"negative retry-after-ms falls through", mkHeader("Retry-After-Ms", "-5", "X-Ms-Retry-After-Ms", "40"), hdrNow, 40 * time.Millisecond, "X-Ms-Retry-After-Ms"},
		{"empty retry-after-ms falls through", mkHeader("Retry-After-Ms", "", "Retry-After", retryAt, "Date", hdrDate), hdrNow, 2 * time.Minute, "Retry-After"},
		{"invalid ms variants, no Retry-After", mkHeader("Retry-After-Ms", "x", "X-Ms-Retry-After-Ms", "1e3"), hdrNow, 0, ""},

		// Repeated field lines: the first one wins, even when it is invalid.
		{"two lines, first wins", mkHeader("Retry-After", "1", "Retry-After", "100"), hdrNow, time.Second, "Retry-After"},
		{"two lines, first invalid", mkHeader("Retry-After", "soon", "Retry-After", "100"), hdrNow, 0, ""},
		{"two ms lines, first wins", mkHeader("Retry-After-Ms", "10", "Retry-After-Ms", "20"), hdrNow, 10 * time.Millisecond, "Retry-After-Ms"},

		// Absent or invalid: HasRetryAfter is false and RetryAfter is 0.
		{"absent", mkHeader("Content-Type", "text/plain", "Date", hdrDate), hdrNow, 0, ""},
		{"invalid", mkHeader("Retry-After", "soon"), hdrNow, 0, ""},
		{"negative", mkHeader("Retry-After", "-1"), hdrNow, 0, ""},
		{"empty", mkHeader("Retry-After", ""), hdrNow, 0, ""},
		{"bad date", mkHeader("Retry-After", "Wed, 99 Nov 2026 00:00:00 GMT", "Date", hdrDate), hdrNow, 0, ""},
		{"present with no value", http.Header{"Retry-After": {}}, hdrNow, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := ParseHeaders(tt.h, http.StatusTooManyRequests, tt.received)
			v := strings.TrimSpace(tt.h.Get("Retry-After"))
			require.Equal(t, Observation{
				Status:           http.StatusTooManyRequests,
				RetryAfter:       tt.want,
				HasRetryAfter:    tt.from != "",
				RetryAfterHeader: tt.from,
				RetryAfterDate:   tt.from == "Retry-After" && (v[0] < '0' || v[0] > '9'),
			}, obs)
		})
	}
}

// TestRetryAfterDate: RetryAfterDate tells an HTTP-date (an instant) from
// delay-seconds and the millisecond variants (waits).
func TestRetryAfterDate(t *testing.T) {
	for _, tt := range []struct {
		h    http.Header
		date bool
	}{
		{mkHeader("Retry-After", "1"), false},
		{mkHeader("Retry-After", "Wed, 25 Nov 2026 21:00:01 GMT", "Date", hdrDate), true},
		{mkHeader("Retry-After-Ms", "20", "Retry-After", "Wed, 25 Nov 2026 21:00:01 GMT"), false},
		{mkHeader("Retry-After", "soon", "X-Retry-In", "2s"), false},
	} {
		obs := ParseHeaders(tt.h, http.StatusTooManyRequests, hdrNow)
		require.True(t, obs.HasRetryAfter, "%v", tt.h)
		require.Equal(t, tt.date, obs.RetryAfterDate, "%v", tt.h)
	}
}

// TestParseHeadersAnyCase: header names are matched without regard to case,
// as HTTP/2 lower-cases them and hand-built header maps may not be
// canonical. net/http's own Get would not see these keys.
func TestParseHeadersAnyCase(t *testing.T) {
	h := http.Header{
		"retry-after":         {"5"},
		"retry-after-ms":      {"1500"},
		"x-ms-retry-after-ms": {"20"},
		"stripe-should-retry": {"true"},
		"x-should-retry":      {"false"},
	}
	require.Equal(t, "", h.Get("Retry-After"))
	obs := ParseHeaders(h, 429, hdrNow)
	require.True(t, obs.HasRetryAfter)
	require.Equal(t, 1500*time.Millisecond, obs.RetryAfter)
	require.Equal(t, "Retry-After-Ms", obs.RetryAfterHeader)
	require.Equal(t, VerdictRetry, obs.ShouldRetry)

	// The same field under two spellings: the lines of the key that sorts
	// first come first, whatever the map's iteration order.
	for range 20 {
		obs := ParseHeaders(http.Header{"retry-after": {"9"}, "RETRY-AFTER": {"3"}}, 429, hdrNow)
		require.Equal(t, 3*time.Second, obs.RetryAfter)
	}
}

func TestParseHeadersVerdict(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
		want Verdict
	}{
		{"absent", mkHeader("Content-Type", "application/json"), VerdictNone},
		{"stripe true", mkHeader("Stripe-Should-Retry", "true"), VerdictRetry},
		{"stripe false", mkHeader("Stripe-Should-Retry", "false"), VerdictDoNotRetry},
		{"stripe TRUE", mkHeader("Stripe-Should-Retry", "TRUE"), VerdictRetry},
		{"stripe padded false", mkHeader("Stripe-Should-Retry", " false "), VerdictDoNotRetry},
		{"stripe tab-padded True", mkHeader("Stripe-Should-Retry", "\tTrue\t"), VerdictRetry},
		{"stripe garbage", mkHeader("Stripe-Should-Retry", "maybe"), VerdictNone},
		{"stripe empty", mkHeader("Stripe-Should-Retry", ""), VerdictNone},
		{"stripe 1 is not true", mkHeader("Stripe-Should-Retry", "1"), VerdictNone},
		{"stripe yes is not true", mkHeader("Stripe-Should-Retry", "yes"), VerdictNone},
		{"stripe truthy prefix", mkHeader("Stripe-Should-Retry", "true, false"), VerdictNone},
		{"x-should-retry true", mkHeader("X-Should-Retry", "true"), VerdictRetry},
		{"x-should-retry false", mkHeader("X-Should-Retry", "false"), VerdictDoNotRetry},
		{"x-should-retry FALSE", mkHeader("X-Should-Retry", "FALSE"), VerdictDoNotRetry},
		{"x-should-retry garbage", mkHeader("X-Should-Retry", "garbage"), VerdictNone},
		{"lower-case name via Set", mkHeader("x-should-retry", "true"), VerdictRetry},
		{"stripe wins", mkHeader("Stripe-Should-Retry", "false", "X-Should-Retry", "true"), VerdictDoNotRetry},
		{"stripe garbage falls through", mkHeader("Stripe-Should-Retry", "garbage", "X-Should-Retry", "true"), VerdictRetry},
		{"first line wins", mkHeader("X-Should-Retry", "false", "X-Should-Retry", "true"), VerdictDoNotRetry},
		{"first line garbage", mkHeader("X-Should-Retry", "garbage", "X-Should-Retry", "true"), VerdictNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f fieldSet
			f.read(tt.h)
			require.Equal(t, tt.want, f.verdict())
			want := Observation{Status: http.StatusServiceUnavailable, ShouldRetry: tt.want}
			if tt.h.Get("Stripe-Should-Retry") != "" || len(tt.h["Stripe-Should-Retry"]) > 0 {
				want.Dialects = want.Dialects.With(DialectStripe)
			}
			obs := ParseHeaders(tt.h, http.StatusServiceUnavailable, hdrNow)
			require.Equal(t, want, obs)
		})
	}
}

func TestParseHeadersStatusAndEmpty(t *testing.T) {
	for _, status := range []int{0, 200, 429, 503, 999} {
		require.Equal(t, Observation{Status: status}, ParseHeaders(nil, status, hdrNow))
		require.Equal(t, Observation{Status: status}, ParseHeaders(http.Header{}, status, hdrNow))
		require.Equal(t, Observation{Status: status}, ParseHeaders(mkHeader("Content-Length", "2"), status, time.Time{}))
	}

	// Everything at once.
	h := mkHeader(
		"Date", hdrDate,
		"Retry-After", "Wed, 25 Nov 2026 21:00:10 GMT",
		"Stripe-Should-Retry", "true",
	)
	require.Equal(t, Observation{
		Status:           429,
		RetryAfter:       10 * time.Second,
		HasRetryAfter:    true,
		RetryAfterHeader: "Retry-After",
		RetryAfterDate:   true,
		ShouldRetry:      VerdictRetry,
		Dialects:         DialectSet(0).With(DialectStripe),
	}, ParseHeaders(h, 429, hdrNow.Add(-3*time.Hour)))
}

func TestParseHeadersDoesNotMutate(t *testing.T) {
	h := mkHeader("Retry-After", " 5 ", "Date", hdrDate, "X-Should-Retry", " TRUE ")
	before := h.Clone()
	_ = ParseHeaders(h, 429, hdrNow)
	require.Equal(t, before, h)
}

func TestVerdictString(t *testing.T) {
	require.Equal(t, "none", VerdictNone.String())
	require.Equal(t, "retry", VerdictRetry.String())
	require.Equal(t, "do-not-retry", VerdictDoNotRetry.String())
	require.Equal(t, "none", Verdict(42).String())
	require.Equal(t, "none", Verdict(-1).String())
}

// decimalOracle computes what parseDecimalDuration must return for a value
// that is a plain decimal number, with exact rational arithmetic.
func decimalOracle(t testing.TB, v string, unit time.Duration) time.Duration {
	r, ok := new(big.Rat).SetString(v)
	require.True(t, ok, "oracle cannot read %q", v)
	r.Mul(r, new(big.Rat).SetInt64(int64(unit)))
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if q.Cmp(big.NewInt(int64(MaxDuration))) >= 0 {
		return MaxDuration
	}
	return time.Duration(q.Int64())
}

// isPlainDecimal reports whether v matches [0-9]+(\.[0-9]+)?.
func isPlainDecimal(v string) bool {
	whole, frac, dot := strings.Cut(v, ".")
	allDigits := func(s string) bool {
		if s == "" {
			return false
		}
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	return allDigits(whole) && (!dot || allDigits(frac))
}

func TestParseDecimalDurationMatchesOracle(t *testing.T) {
	for _, v := range []string{
		"0", "1", "0.3", "0.1", "2.675", "0.123456789", "0.1234567891", "1.999999999999",
		"3153599999.9999999999", "3153600000.0000000001", "3153599999999.99999",
		"18446744073709551615", "9223372036854775807", "9223372036.854775807",
		"0.000000001", "0.0000000005", "42.42", "1000000.000001",
	} {
		for _, unit := range []time.Duration{time.Second, time.Millisecond} {
			got, ok := parseDecimalDuration(v, unit)
			require.True(t, ok, v)
			require.Equal(t, decimalOracle(t, v, unit), got, "%q in %v", v, unit)
		}
	}
}

// retryAfterSeeds are the table values, used as fuzz seeds.
var retryAfterSeeds = []string{
	"", " ", "0", "1000", "\t42 ", "2.0", "0.5", "1.25", "0.3", "-1", "+1", "1e3", "0x10",
	"1.", ".5", "1,5", "\xb2", "abc", "2 3", "99999999999", "999999999999999999999999999",
	"3153599999.9999999999", "0.0000000001",
	"Wed, 25 Nov 2026 21:32:42 GMT", "Wednesday, 25-Nov-26 21:32:42 GMT",
	"Wed Nov 25 21:32:42 2026", "Wed Nov  5 21:32:42 2026", "Wed, 25 Nov 2026 21:32:42 UTC",
	"Wed, 99 Nov 2026 00:00:00 GMT", "Wed, 25 Nov 2526 21:32:42 GMT", "Sun, 06 Nov 1994 08:49:37 GMT",
	"Fri, 31 Dec 9999 23:59:59 GMT", "Sat, 01 Jan 0000 00:00:00 GMT",
}

// checkRetryAfterBounds asserts the invariants every parse keeps.
func checkRetryAfterBounds(t *testing.T, v string, d time.Duration, ok bool) {
	t.Helper()
	if d < 0 || d > MaxDuration {
		t.Fatalf("ParseRetryAfter(%q) = %v, outside [0, MaxDuration]", v, d)
	}
	if !ok && d != 0 {
		t.Fatalf("ParseRetryAfter(%q) = %v, false; want 0 when not ok", v, d)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range retryAfterSeeds {
		f.Add(s, hdrNow.Unix())
	}
	f.Add("Wed, 25 Nov 2026 21:32:42 GMT", int64(0))
	f.Add("Fri, 31 Dec 9999 23:59:59 GMT", int64(-1<<62))
	f.Add("Sat, 01 Jan 0000 00:00:00 GMT", int64(1<<62))
	f.Fuzz(func(t *testing.T, v string, nowUnix int64) {
		now := time.Unix(nowUnix, 0)
		d, ok := ParseRetryAfter(v, now)
		checkRetryAfterBounds(t, v, d, ok)

		trimmed := strings.Trim(v, " \t")
		if isPlainDecimal(trimmed) {
			// Delay-seconds are exact and do not depend on now.
			if !ok {
				t.Fatalf("ParseRetryAfter(%q) rejected a plain decimal", v)
			}
			if want := decimalOracle(t, trimmed, time.Second); d != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, want %v", v, d, want)
			}
			ms, ok := parseDecimalDuration(trimmed, time.Millisecond)
			if want := decimalOracle(t, trimmed, time.Millisecond); !ok || ms != want {
				t.Fatalf("parseDecimalDuration(%q, ms) = %v, %v; want %v", v, ms, ok, want)
			}
			return
		}
		if trimmed != "" && trimmed[0] >= '0' && trimmed[0] <= '9' && ok {
			t.Fatalf("ParseRetryAfter(%q) accepted a malformed number as %v", v, d)
		}
		// Otherwise it is a date or nothing: ok exactly when the date parses,
		// and then the delay is the clamped distance from now.
		at, isDate := parseHTTPDate(v)
		if ok != isDate {
			t.Fatalf("ParseRetryAfter(%q) ok=%v, parseHTTPDate ok=%v", v, ok, isDate)
		}
		if isDate && d != untilClamped(now, at) {
			t.Fatalf("ParseRetryAfter(%q) = %v, want %v", v, d, untilClamped(now, at))
		}
	})
}

func FuzzParseHeaders(f *testing.F) {
	for _, s := range retryAfterSeeds {
		f.Add(s, "", hdrDate, "")
	}
	f.Add("30", "1500", hdrDate, "true")
	f.Add("30", "garbage", "", " false ")
	f.Add("Wed, 25 Nov 2026 21:02:00 GMT", "", "Wed, 25 Nov 2026 21:00:00 GMT", "TRUE")
	f.Add("Wed, 25 Nov 2026 21:02:00 GMT", "", "yesterday", "garbage")
	f.Add("Wed, 25 Nov 2026 21:02:00 GMT", "-1", "Sat, 01 Jan 0000 00:00:00 GMT", "false")
	f.Add("Sat, 01 Jan 0000 00:00:00 GMT", "0.0000001", "Fri, 31 Dec 9999 23:59:59 GMT", "")
	f.Add("", "99999999999999999999", "", "")
	f.Fuzz(func(t *testing.T, retryAfter, retryAfterMs, date, shouldRetry string) {
		h := make(http.Header)
		// An empty fuzz string means the header is absent; "\x00" means
		// present but empty.
		set := func(name, v string) {
			switch v {
			case "":
			case "\x00":
				h[name] = []string{""}
			default:
				h[name] = []string{v}
			}
		}
		set("Retry-After", retryAfter)
		set("Retry-After-Ms", retryAfterMs)
		set("Date", date)
		set("X-Should-Retry", shouldRetry)
		before := h.Clone()

		obs := ParseHeaders(h, 429, hdrNow)
		if obs.RetryAfter < 0 || obs.RetryAfter > MaxDuration {
			t.Fatalf("RetryAfter %v outside [0, MaxDuration]", obs.RetryAfter)
		}
		if !obs.HasRetryAfter && (obs.RetryAfter != 0 || obs.RetryAfterHeader != "") {
			t.Fatalf("no Retry-After, yet RetryAfter=%v from %q", obs.RetryAfter, obs.RetryAfterHeader)
		}
		if obs.Status != 429 {
			t.Fatalf("Status %d", obs.Status)
		}
		if obs.ShouldRetry < VerdictNone || obs.ShouldRetry > VerdictDoNotRetry {
			t.Fatalf("ShouldRetry %d", obs.ShouldRetry)
		}
		if !equalHeaders(before, h) {
			t.Fatalf("ParseHeaders mutated the header: %v -> %v", before, h)
		}

		// Cross-check against the single-value parsers.
		if v, present := h["Retry-After-Ms"]; present {
			if d, ok := parseDecimalDuration(v[0], time.Millisecond); ok {
				if !obs.HasRetryAfter || obs.RetryAfterHeader != "Retry-After-Ms" || obs.RetryAfter != d {
					t.Fatalf("valid Retry-After-Ms %q (%v) not used: %+v", v[0], d, obs)
				}
				return
			}
		}
		v, present := h["Retry-After"]
		if !present {
			if obs.HasRetryAfter {
				t.Fatalf("HasRetryAfter with no Retry-After: %+v", obs)
			}
			return
		}
		now := hdrNow
		if dv, present := h["Date"]; present {
			if at, ok := parseHTTPDate(dv[0]); ok {
				now = at
			}
		}
		d, ok := ParseRetryAfter(v[0], now)
		if obs.HasRetryAfter != ok || obs.RetryAfter != d || (ok && obs.RetryAfterHeader != "Retry-After") {
			t.Fatalf("Retry-After %q: ParseHeaders %+v, ParseRetryAfter %v, %v", v[0], obs, d, ok)
		}
	})
}

// equalHeaders compares two headers without allocating much; used by the
// fuzz target (require would be slower on the fuzzing hot loop).
func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if av[i] != bv[i] {
				return false
			}
		}
	}
	return true
}

func BenchmarkParseHeaders(b *testing.B) {
	received := hdrNow
	benchmarks := []struct {
		name   string
		status int
		h      http.Header
	}{
		{"no-rate-limit-headers", http.StatusOK, mkHeader(
			"Content-Type", "application/json; charset=utf-8",
			"Content-Length", "1234",
			"Date", hdrDate,
			"Server", "nginx/1.27.0",
			"Cache-Control", "no-cache",
			"Vary", "Accept-Encoding",
		)},
		{"typical-ietf-draft-08+x-ratelimit+retry-after", http.StatusTooManyRequests, mkHeader(
			"Content-Type", "application/json; charset=utf-8",
			"Content-Length", "87",
			"Date", hdrDate,
			"Server", "nginx/1.27.0",
			"RateLimit-Policy", `"default";q=100;w=60`,
			"RateLimit", `"default";r=0;t=30`,
			"X-RateLimit-Limit", "100",
			"X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", "1795641630",
			"Retry-After", "30",
		)},
		{"typical-ietf-draft-07+x-ratelimit+retry-after", http.StatusTooManyRequests, mkHeader(
			"Content-Type", "application/json; charset=utf-8",
			"Date", hdrDate,
			"RateLimit-Policy", `100;w=60`,
			"RateLimit", `limit=100, remaining=0, reset=30`,
			"X-RateLimit-Limit", "100",
			"X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", "1795641630",
			"Retry-After", "30",
		)},
		{"openai", http.StatusOK, mkHeader(
			"Content-Type", "application/json",
			"Date", hdrDate,
			"X-Ratelimit-Limit-Requests", "10000",
			"X-Ratelimit-Limit-Tokens", "2000000",
			"X-Ratelimit-Remaining-Requests", "9999",
			"X-Ratelimit-Remaining-Tokens", "1999980",
			"X-Ratelimit-Reset-Requests", "6ms",
			"X-Ratelimit-Reset-Tokens", "0s",
		)},
		{"429-delay-seconds", http.StatusTooManyRequests, mkHeader(
			"Content-Type", "text/plain; charset=utf-8",
			"Content-Length", "42",
			"Date", hdrDate,
			"Server", "nginx/1.27.0",
			"Retry-After", "2",
		)},
		{"429-http-date", http.StatusTooManyRequests, mkHeader(
			"Content-Type", "text/plain; charset=utf-8",
			"Content-Length", "42",
			"Date", hdrDate,
			"Server", "nginx/1.27.0",
			"Retry-After", "Wed, 25 Nov 2026 21:00:30 GMT",
		)},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			var obs Observation
			for b.Loop() {
				obs = ParseHeaders(bm.h, bm.status, received)
			}
			if bm.status == http.StatusTooManyRequests && !obs.HasRetryAfter {
				b.Fatalf("%s: no Retry-After read", bm.name)
			}
		})
	}
}

// TestParseHeadersNoRateLimitHeadersDoesNotAllocate guards the hot path: a
// response without rate-limit headers costs no allocation.
func TestParseHeadersNoRateLimitHeadersDoesNotAllocate(t *testing.T) {
	h := mkHeader("Content-Type", "application/json", "Content-Length", "2", "Date", hdrDate, "Server", "x")
	allocs := testing.AllocsPerRun(100, func() { _ = ParseHeaders(h, 200, hdrNow) })
	require.Zero(t, allocs)
	h.Set("Retry-After", "2")
	allocs = testing.AllocsPerRun(100, func() { _ = ParseHeaders(h, 429, hdrNow) })
	require.Zero(t, allocs)
	h.Set("Retry-After", "Wed, 25 Nov 2026 21:00:30 GMT")
	allocs = testing.AllocsPerRun(100, func() { _ = ParseHeaders(h, 429, hdrNow) })
	require.Zero(t, allocs)
}

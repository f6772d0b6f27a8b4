package ratelimit

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/stretchr/testify/require"
)

// The golden captures in testdata/dialects cover each dialect end to end
// (headers_golden_test.go); the tests here pin the rules underneath.

func TestParseResetRule(t *testing.T) {
	date := "Wed, 25 Nov 2026 21:00:00 GMT" // Unix 1795640400
	received := hdrNow.Add(-time.Hour)      // a client clock an hour slow
	tests := []struct {
		value string
		f     resetFormat
		want  time.Duration
		ok    bool
	}{
		// The rule: >= 1e12 epoch ms, >= 1e9 epoch s, else delta seconds.
		{"30", resetAuto, 30 * time.Second, true},
		{"0", resetAuto, 0, true},
		{"1.5", resetAuto, 1500 * time.Millisecond, true},
		{"999999999", resetAuto, 999999999 * time.Second, true}, // the largest delay
		{"1795640430", resetAuto, 30 * time.Second, true},       // epoch seconds, against Date
		{"1795640430.25", resetAuto, 30250 * time.Millisecond, true},
		{"1795640430250", resetAuto, 30250 * time.Millisecond, true}, // epoch milliseconds
		{"001795640430", resetAuto, 30 * time.Second, true},          // leading zeros do not count
		{"1795640000", resetAuto, 0, true},                           // in the past
		{"99999999999", resetAuto, MaxDuration, true},                // the year 5138
		{"99999999999999999999999999", resetAuto, MaxDuration, true},
		// Strings by layout.
		{"Wed, 25 Nov 2026 21:00:42 GMT", resetAuto, 42 * time.Second, true},
		{"Wed, 25 Nov 2026 21:00:42 UTC", resetAuto, 42 * time.Second, true}, // go-limiter
		{"2026-11-25T21:05Z", resetAuto, 5 * time.Minute, true},              // Jira
		{"2026-11-25T21:00:07Z", resetAuto, 7 * time.Second, true},           // Anthropic
		{"2026-11-25T22:00:07+01:00", resetAuto, 7 * time.Second, true},
		{"2026-11-25T21:00:07.5Z", resetAuto, 7500 * time.Millisecond, true},
		{"2026-11-24T21:00:07Z", resetAuto, 0, true},
		{"6m0s", resetAuto, 6 * time.Minute, true}, // OpenAI
		{"20ms", resetAuto, 20 * time.Millisecond, true},
		{"2m59.56s", resetAuto, 2*time.Minute + 59560*time.Millisecond, true},
		{"9999999999h", resetAuto, MaxDuration, true},
		// Garbage.
		{"", resetAuto, 0, false},
		{"-5", resetAuto, 0, false},
		{"+5", resetAuto, 0, false},
		{"5s5", resetAuto, 0, false},
		{"1e9", resetAuto, 0, false},
		{"soon", resetAuto, 0, false},
		{"2026-13-45T99:00Z", resetAuto, 0, false},
		{"1.", resetAuto, 0, false},
		// Each dialect's documented format wins.
		{"1795640430", resetDelta, 1795640430 * time.Second, true},
		{"17956404300", resetDelta, MaxDuration, true},
		{"30", resetEpoch, 0, true}, // 1970: long past
		{"1795640430.5", resetEpoch, 30500 * time.Millisecond, true},
		{"1.5", resetDelta, 1500 * time.Millisecond, true},
		// Old captures: a Unix time near the Date is one, whatever its size.
		{"784111837", resetAuto, 784111837 * time.Second, true}, // far from this Date: a delay
		{"99999999", resetAuto, 99999999 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%d", tt.value, tt.f), func(t *testing.T) {
			c := dateBase{date: date, received: received}
			got, ok := parseReset(tt.value, tt.f, &c)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestResetRuleOldCaptures: a Unix time is recognised by its nearness to the
// response's Date, so captures from before 2001 (Unix times below 1e9) and
// milliseconds before 2001 (below 1e12) read right.
func TestResetRuleOldCaptures(t *testing.T) {
	for _, tt := range []struct {
		date, reset string
		want        time.Duration
	}{
		{"Sun, 06 Nov 1994 08:49:37 GMT", "784111837", time.Minute},    // seconds
		{"Fri, 31 Dec 1999 23:59:00 GMT", "946684800000", time.Minute}, // milliseconds
		{"Fri, 31 Dec 1999 23:59:00 GMT", "946684799.5", 59500 * time.Millisecond},
		{"Sun, 06 Nov 1994 08:49:37 GMT", "60", time.Minute},                    // still a delay
		{"Sun, 06 Nov 1994 08:49:37 GMT", "600000000", 600000000 * time.Second}, // 6 years off: not near
		{"Wed, 25 Nov 2026 21:00:00 GMT", "1795640460", time.Minute},
		{"Wed, 25 Nov 2026 21:00:00 GMT", "1795640460000", time.Minute},
		{"Wed, 25 Nov 2026 21:00:00 GMT", "99999999999", MaxDuration}, // far ahead: by size
	} {
		c := dateBase{date: tt.date, received: hdrNow}
		got, ok := parseReset(tt.reset, resetAuto, &c)
		require.True(t, ok, tt.reset)
		require.Equal(t, tt.want, got, "%s against %s", tt.reset, tt.date)
	}
	// Without a Date, the receive time is the base; a zero one leaves the
	// size rule alone.
	c := dateBase{received: time.Unix(784111777, 0)}
	got, _ := parseReset("784111837", resetAuto, &c)
	require.Equal(t, time.Minute, got)
	c = dateBase{}
	got, _ = parseReset("784111837", resetAuto, &c)
	require.Equal(t, 784111837*time.Second, got)
}

// TestResetsAgainstDate: absolute resets are measured against the Date
// header, so a capture from years ago (or a client clock that is off) gives
// the wait the server meant; without Date, against the receive time.
func TestResetsAgainstDate(t *testing.T) {
	h := http.Header{
		"X-Ratelimit-Limit":     {"60"},
		"X-Ratelimit-Remaining": {"0"},
		"X-Ratelimit-Reset":     {"1234567920"}, // Date + 30 s
		"Date":                  {"Fri, 13 Feb 2009 23:31:30 GMT"},
	}
	obs := ParseHeaders(h, 429, hdrNow) // received 17 years after Date
	require.Len(t, obs.Policies, 1)
	require.Equal(t, 30*time.Second, obs.Policies[0].Reset)

	h.Del("Date")
	obs = ParseHeaders(h, 429, time.Unix(1234567900, 0))
	require.Equal(t, 20*time.Second, obs.Policies[0].Reset)

	h.Set("Date", "not a date") // an invalid Date falls back to the receive time
	obs = ParseHeaders(h, 429, time.Unix(1234567910, 0))
	require.Equal(t, 10*time.Second, obs.Policies[0].Reset)
}

func TestParseCount(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"42", 42, true}, {" 42\t", 42, true},
		{"598.0", 598, true}, {"423.7", 423, true}, // Reddit: rounded down
		{"9007199254740993", maxCount, true}, {"99999999999999999999999", maxCount, true},
		{"-1", 0, false}, {"+1", 0, false}, {"", 0, false}, {"1e3", 0, false}, {"1,000", 0, false}, {".5", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseCount(tt.in)
		require.Equal(t, tt.ok, ok, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
}

func TestIsDictionary(t *testing.T) {
	for v, want := range map[string]bool{
		`limit=100, remaining=50, reset=5`: true,
		`limit = 100`:                      true,
		` remaining=5`:                     true,
		`"burst";r=5;t=2`:                  false,
		`burst;r=5`:                        false,
		`default`:                          false,
		`100;w=60`:                         false,
		``:                                 false,
		`=5`:                               false,
	} {
		require.Equal(t, want, isDictionary([]string{v}), v)
	}
	require.False(t, isDictionary(nil))
}

// TestParseHeadersAnyCaseDialects: dialects are recognised by name, never by
// letter case, so HTTP/2's lower-case names and odd spellings read alike.
func TestParseHeadersAnyCaseDialects(t *testing.T) {
	canonical := http.Header{}
	for k, v := range map[string]string{
		"RateLimit-Policy":                            `"burst";q=100;w=60`,
		"RateLimit":                                   `"burst";r=10;t=5`,
		"X-RateLimit-Limit":                           "5000",
		"X-RateLimit-Remaining":                       "4999",
		"X-RateLimit-Resource":                        "core",
		"X-RateLimit-Reset":                           "1795640460",
		"X-Ratelimit-Limit-Tokens":                    "1000",
		"Anthropic-Ratelimit-Tokens-Limit":            "7",
		"X-Ms-Ratelimit-Remaining-Subscription-Reads": "11999",
		"Date": "Wed, 25 Nov 2026 21:00:00 GMT",
	} {
		canonical.Set(k, v)
	}
	want := ParseHeaders(canonical, 200, hdrNow)
	require.Len(t, want.Policies, 5)
	for name, spell := range map[string]func(string) string{
		"lower": strings.ToLower,
		"upper": strings.ToUpper,
		"mixed": func(s string) string {
			b := []byte(strings.ToLower(s))
			for i := 0; i < len(b); i += 2 {
				if b[i] >= 'a' && b[i] <= 'z' {
					b[i] -= 'a' - 'A'
				}
			}
			return string(b)
		},
	} {
		h := http.Header{}
		for k, v := range canonical {
			h[spell(k)] = v
		}
		require.Equal(t, want, ParseHeaders(h, 200, hdrNow), name)
	}
}

// TestParseHeadersOrderIsStable: the header map's iteration order is random;
// the policies must not be.
func TestParseHeadersOrderIsStable(t *testing.T) {
	h := http.Header{}
	for _, unit := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		for _, kind := range []string{"limit", "remaining", "reset"} {
			h.Set("anthropic-ratelimit-"+unit+"-"+kind, "5")
		}
	}
	for _, s := range []string{"requests", "tokens", "requests-day", "tokens-minute", "images"} {
		h.Set("x-ratelimit-limit-"+s, "9")
	}
	for _, s := range []string{"subscription-reads", "subscription-writes", "tenant-reads"} {
		h.Set("x-ms-ratelimit-remaining-"+s, "3")
	}
	h.Set("zendesk-ratelimit-tickets-index", "total=100; remaining=99; resets=41")
	h.Set("zendesk-ratelimit-search-index", "total=10; remaining=9; resets=4")
	first := ParseHeaders(h, 200, hdrNow)
	require.Len(t, first.Policies, 4+5+3+2)
	var units []string
	for _, p := range first.Policies[:9] {
		units = append(units, fmt.Sprintf("%s/%s/%v", p.Unit, p.Name, p.Window))
	}
	require.Equal(t, []string{
		"requests//0s", "requests//24h0m0s", "tokens//0s", "tokens//1m0s", "requests/images/0s", // OpenAI
		"requests//0s", "tokens//0s", "input-tokens//0s", "output-tokens//0s", // Anthropic
	}, units)
	for range 50 {
		require.Equal(t, first, ParseHeaders(h, 200, hdrNow))
	}
}

// TestLegacyAndIETFMerge: express-rate-limit sends its legacy X-RateLimit-*
// beside the draft fields; the same quota is listed once.
func TestLegacyAndIETFMerge(t *testing.T) {
	h := http.Header{
		"Ratelimit-Policy":      {"50;w=60"},
		"Ratelimit":             {"limit=50, remaining=49, reset=60"},
		"X-Ratelimit-Limit":     {"50"},
		"X-Ratelimit-Remaining": {"49"},
		"X-Ratelimit-Reset":     {"1795640460"},
		"Date":                  {"Wed, 25 Nov 2026 21:00:00 GMT"},
	}
	obs := ParseHeaders(h, 200, hdrNow)
	require.Equal(t, []Policy{{
		Unit: UnitRequests, Limit: 50, HasLimit: true, Remaining: 49, HasRemaining: true,
		Window: time.Minute, Reset: time.Minute, HasReset: true, Dialect: DialectIETFDraft07,
	}}, obs.Policies)
	require.Equal(t, "ietf-draft-07,x-ratelimit", obs.Dialects.String())

	// A different quota is a different policy.
	h.Set("X-Ratelimit-Limit", "1000")
	require.Len(t, ParseHeaders(h, 200, hdrNow).Policies, 2)
}

// TestStructuredFieldsLenient: what deployed servers send that RFC 9651
// rejects is still read.
func TestStructuredFieldsLenient(t *testing.T) {
	tests := []struct {
		name, policy, current string
		want                  []Policy
	}{
		{"express spacing", `"burst"; q=3; w=2; pk=:YTRkMjY4NjgwMTdj:`, `"burst"; r=2; t=2`, []Policy{{
			Name: "burst", Unit: UnitRequests, Limit: 3, HasLimit: true, Remaining: 2, HasRemaining: true,
			Window: 2 * time.Second, Reset: 2 * time.Second, HasReset: true, Partition: "a4d26868017c", Dialect: DialectIETFDraft08,
		}}},
		{"space before semicolon, upper-case keys, trailing comma", `"burst" ; Q=3 ; W=2,`, `"burst" ;R=1; T = 2 ,`, []Policy{{
			Name: "burst", Unit: UnitRequests, Limit: 3, HasLimit: true, Remaining: 1, HasRemaining: true,
			Window: 2 * time.Second, Reset: 2 * time.Second, HasReset: true, Dialect: DialectIETFDraft08,
		}}},
		{"token names and unit", `default;q=10;w=1;qu="content-bytes"`, `default;r=0;t=1`, []Policy{{
			Name: "default", Unit: UnitContentBytes, Limit: 10, HasLimit: true, Remaining: 0, HasRemaining: true,
			Window: time.Second, Reset: time.Second, HasReset: true, Dialect: DialectIETFDraft08,
		}}},
		{"escaped name goes through httpsfv", `"a\"b";q=5`, `"a\"b";r=4`, []Policy{{
			Name: `a"b`, Unit: UnitRequests, Limit: 5, HasLimit: true, Remaining: 4, HasRemaining: true, Dialect: DialectIETFDraft08,
		}}},
		{"negative and fractional values", `"x";q=-5;w=0.5`, `"x";r=-1;t=2.5`, []Policy{{
			Name: "x", Unit: UnitRequests, Window: 500 * time.Millisecond, Reset: 2500 * time.Millisecond, HasReset: true, Dialect: DialectIETFDraft08,
		}}},
		{"unknown parameters ignored", `"x";q=5;foo=?1;bar="baz"`, `"x";r=1;zz=:AAAA:`, []Policy{{
			Name: "x", Unit: UnitRequests, Limit: 5, HasLimit: true, Remaining: 1, HasRemaining: true, Dialect: DialectIETFDraft08,
		}}},
		{"stray line ends", "\"a\";q=5\r\n", `"a";r=1`, []Policy{{
			Name: "a", Unit: UnitRequests, Limit: 5, HasLimit: true, Remaining: 1, HasRemaining: true, Dialect: DialectIETFDraft08,
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := ParseHeaders(http.Header{"Ratelimit-Policy": {tt.policy}, "Ratelimit": {tt.current}}, 200, hdrNow)
			require.Equal(t, tt.want, obs.Policies)
		})
	}

	// One bad field line does not hide the others.
	obs := ParseHeaders(http.Header{
		"Ratelimit-Policy": {`"a";q=5`, `((((`, `"b";q=7;w=1`},
		"Ratelimit":        {`"b";r=6`},
	}, 200, hdrNow)
	require.Len(t, obs.Policies, 2)
	require.Equal(t, "a", obs.Policies[0].Name)
	require.Equal(t, int64(6), obs.Policies[1].Remaining)
}

// TestParseHeadersPolicyAllocations guards the cost of a typical rate-limited
// response: one allocation, for the policies.
func TestParseHeadersPolicyAllocations(t *testing.T) {
	h := http.Header{
		"Date":                  {hdrDate},
		"Ratelimit-Policy":      {`"default";q=100;w=60`},
		"Ratelimit":             {`"default";r=0;t=30`},
		"X-Ratelimit-Limit":     {"100"},
		"X-Ratelimit-Remaining": {"0"},
		"X-Ratelimit-Reset":     {"1795641630"},
		"Retry-After":           {"30"},
	}
	require.Len(t, ParseHeaders(h, 429, hdrNow).Policies, 1)
	require.LessOrEqual(t, testing.AllocsPerRun(100, func() { _ = ParseHeaders(h, 429, hdrNow) }), 1.0)
}

// fuzzFieldNames are the header names FuzzPolicies draws from.
var fuzzFieldNames = func() []string {
	names := []string{
		"x-ratelimit-limit-requests", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-requests",
		"anthropic-ratelimit-requests-limit", "anthropic-ratelimit-tokens-reset", "anthropic-priority-input-tokens-remaining",
		"x-ms-ratelimit-remaining-resource", "x-ms-ratelimit-remaining-subscription-reads", "zendesk-ratelimit-tickets-index",
		"x-ratelimit-limit-minute", "x-ratelimit-requests-reset", "x-ratelimit-complexity-limit", "x-user-limit-24hour-reset",
		"x-app-limit-24hour-limit",
	}
	for _, fn := range fieldsByLen {
		for _, n := range fn {
			names = append(names, n.name)
		}
	}
	slices.Sort(names[9:]) // a stable order, so that a corpus entry means the same every run
	return names
}()

// FuzzPolicies: whatever the headers, ParseHeaders never panics, never
// returns a negative or unbounded duration or count, keeps its own
// invariants, and gives the same result for the same input.
func FuzzPolicies(f *testing.F) {
	f.Add(uint8(0), `"burst";q=100;w=60`, uint8(1), `"burst";r=0;t=30`, uint8(2), "1795641630", hdrDate, uint8(0))
	f.Add(uint8(8), `"p";q=10;w=60`, uint8(16), `"x";r=1`, uint8(20), "10, 10;w=60", hdrDate, uint8(90))
	f.Add(uint8(10), `10, 10;w=1, 50;w=60`, uint8(11), "-3", uint8(12), "99999999999999", "", uint8(0))
	f.Add(uint8(3), "6m0s", uint8(4), "2026-11-25T21:05Z", uint8(5), "32/40", "Sat, 01 Jan 0000 00:00:00 GMT", uint8(0))
	f.Add(uint8(6), "Microsoft.Compute/A;5,B;x", uint8(8), "total=1; remaining=-1; resets=1e9", uint8(7), "598.7", "junk", uint8(0))
	f.Fuzz(func(t *testing.T, i1 uint8, v1 string, i2 uint8, v2 string, i3 uint8, v3, date string, repeat uint8) {
		h := http.Header{}
		if repeat > 1 && len(v1) < 64 {
			// Many items in one field: the bound on policies and the groups
			// after it.
			v1 = strings.Repeat(v1+", ", int(repeat)%100) + v1
		}
		for _, kv := range []struct {
			i uint8
			v string
		}{{i1, v1}, {i2, v2}, {i3, v3}} {
			name := fuzzFieldNames[int(kv.i)%len(fuzzFieldNames)]
			if kv.i >= 128 {
				name = strings.ToUpper(name)
			}
			h[name] = append(h[name], kv.v)
		}
		if date != "" {
			h["Date"] = []string{date}
		}
		before := h.Clone()
		obs := ParseHeaders(h, 429, hdrNow)
		if !reflect.DeepEqual(obs, ParseHeaders(h, 429, hdrNow)) {
			t.Fatal("two parses of the same headers differ")
		}
		if !equalHeaders(before, h) {
			t.Fatal("ParseHeaders mutated the header")
		}
		if obs.RetryAfter < 0 || obs.RetryAfter > MaxDuration {
			t.Fatalf("RetryAfter %v", obs.RetryAfter)
		}
		for _, p := range obs.Policies {
			switch {
			case p.Limit < 0 || p.Limit > maxCount || !p.HasLimit && p.Limit != 0:
				t.Fatalf("limit %+v", p)
			case p.Remaining < 0 || p.Remaining > maxCount || !p.HasRemaining && p.Remaining != 0:
				t.Fatalf("remaining %+v", p)
			case p.Reset < 0 || p.Reset > MaxDuration || !p.HasReset && p.Reset != 0:
				t.Fatalf("reset %+v", p)
			case p.Window < 0 || p.Window > MaxDuration:
				t.Fatalf("window %+v", p)
			case p.Unit == "":
				t.Fatalf("no unit %+v", p)
			case !obs.Dialects.Has(p.Dialect):
				t.Fatalf("policy of dialect %v not in %v", p.Dialect, obs.Dialects)
			case !p.HasLimit && !p.HasRemaining && !p.HasReset && p.Window == 0:
				t.Fatalf("empty policy %+v", p)
			}
		}
	})
}

// BenchmarkParseTypical sets headway's whole parse of a typical rate-limited
// response beside what peers spend on parts of it: httpsfv on the two IETF
// fields alone, and time.Parse on the Date alone.
func BenchmarkParseTypical(b *testing.B) {
	h := http.Header{
		"Content-Type":          {"application/json; charset=utf-8"},
		"Content-Length":        {"87"},
		"Date":                  {hdrDate},
		"Server":                {"nginx/1.27.0"},
		"Ratelimit-Policy":      {`"default";q=100;w=60`},
		"Ratelimit":             {`"default";r=0;t=30`},
		"X-Ratelimit-Limit":     {"100"},
		"X-Ratelimit-Remaining": {"0"},
		"X-Ratelimit-Reset":     {"1795641630"},
		"Retry-After":           {"30"},
	}
	b.Run("headway-ParseHeaders", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if obs := ParseHeaders(h, 429, hdrNow); len(obs.Policies) != 1 {
				b.Fatal(obs)
			}
		}
	})
	b.Run("httpsfv-two-fields-only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := httpsfv.UnmarshalList(h["Ratelimit-Policy"]); err != nil {
				b.Fatal(err)
			}
			if _, err := httpsfv.UnmarshalList(h["Ratelimit"]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("time.Parse-Date-only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := time.Parse(http.TimeFormat, hdrDate); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestParseHeadersBoundsPolicies: a hostile response with thousands of
// items and headers yields at most maxPolicies policies (and, with them,
// linear work).
func TestParseHeadersBoundsPolicies(t *testing.T) {
	var b strings.Builder
	b.WriteString("1")
	for i := range 5000 {
		fmt.Fprintf(&b, ", %d;w=1", i+2)
	}
	h := http.Header{"Ratelimit-Limit": {b.String()}, "Ratelimit-Remaining": {"1"}}
	for i := range 5000 {
		h[fmt.Sprintf("X-Ratelimit-Limit-U%d", i)] = []string{"5"}
	}
	obs := ParseHeaders(h, 200, hdrNow)
	require.Len(t, obs.Policies, maxPolicies)
	require.Equal(t, obs, ParseHeaders(h, 200, hdrNow))
}

func TestParseClockDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"00:00:05": 5 * time.Second, "01:02:03": time.Hour + 2*time.Minute + 3*time.Second,
		" 100:00:00.5 ": 100*time.Hour + 500*time.Millisecond, "99999999999:00:00": MaxDuration,
	} {
		got, ok := parseClockDuration(in)
		require.True(t, ok, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "5", "00:05", "00:60:00", "00:00:60", "-1:00:00", "a:00:00", "00:0:05", "1.5:00:00", "00:00:5"} {
		_, ok := parseClockDuration(in)
		require.False(t, ok, in)
	}
}

func TestSplitUnit(t *testing.T) {
	for _, tt := range []struct {
		suffix string
		unit   Unit
		window time.Duration
		base   string
		known  bool
	}{
		{"requests", UnitRequests, 0, "requests", true},
		{"Tokens", UnitTokens, 0, "Tokens", true},
		{"requests-day", UnitRequests, 24 * time.Hour, "requests", true},
		{"tokens_minute", UnitTokens, time.Minute, "tokens", true},
		{"Minute", UnitRequests, time.Minute, "", true},                  // Kong
		{"30", UnitRequests, 30 * time.Second, "", true},                 // Kong Enterprise
		{"Req-60-Second", UnitRequests, time.Minute, "Req", true},        // Mistral
		{"tokens-5-minute", UnitTokens, 5 * time.Minute, "tokens", true}, // a counted window
		{"videos-hour", UnitRequests, time.Hour, "videos", false},        // Kong response rate limiting
		{"tokens-prompt", UnitInputTokens, 0, "tokens-prompt", true},     // Fireworks
		{"images", UnitRequests, 0, "images", false},
		{"xminute", UnitRequests, 0, "xminute", false},
		{"0", UnitRequests, 0, "0", false},
		{"99999999999999999999-day", UnitRequests, MaxDuration, "", true},
	} {
		u, w, base, known, _ := splitUnit(tt.suffix)
		require.Equal(t, []any{tt.unit, tt.window, tt.base, tt.known}, []any{u, w, base, known}, tt.suffix)
	}
}

func TestParsePeriod(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"1": time.Second, "1.5": 1500 * time.Millisecond, "1m": time.Minute, "1h0m0s": time.Hour, "2d": 48 * time.Hour,
		"99999999999999d": MaxDuration,
	} {
		got, ok := parsePeriod(in)
		require.True(t, ok, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "d", "-1", "1w", "m"} {
		_, ok := parsePeriod(in)
		require.False(t, ok, in)
	}
}

// TestParseHeadersFullGroups: once maxPolicies are read, the current state
// of a later group has nowhere to go; that is no reason to fail.
func TestParseHeadersFullGroups(t *testing.T) {
	var b strings.Builder
	for i := range 70 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"p%d";q=10;w=60`, i)
	}
	for _, extra := range []http.Header{
		{"Beta-Ratelimit": {`"x";r=1`}},
		{"X-Ratelimit-Limit": {"10, 10;w=60"}, "X-Ratelimit-Remaining": {"3"}},
		{"Ratelimit": {`"zz";r=1`}},
		{"Ratelimit": {`limit=5, remaining=1`}},
	} {
		h := http.Header{"Ratelimit-Policy": {b.String()}}
		for k, v := range extra {
			h[k] = v
		}
		require.NotPanics(t, func() {
			obs := ParseHeaders(h, 429, hdrNow)
			require.Len(t, obs.Policies, maxPolicies)
		})
	}
}

// TestParseHeadersManySpellings: one header under thousands of spellings
// of its name is merged once, in the order of the keys.
func TestParseHeadersManySpellings(t *testing.T) {
	h := http.Header{}
	name := "x-ms-retry-after-ms"
	for i := range 4096 {
		b := []byte(name)
		for j := range b {
			if i&(1<<(j%12)) != 0 && b[j] >= 'a' && b[j] <= 'z' {
				b[j] -= 'a' - 'A'
			}
		}
		h[string(b)] = []string{fmt.Sprint(i + 1)}
	}
	obs := ParseHeaders(h, 429, hdrNow)
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want, _ := strconv.Atoi(h[keys[0]][0])
	require.Equal(t, time.Duration(want)*time.Millisecond, obs.RetryAfter)
}

// TestNoDialectWithoutValue: a dialect is reported only when something in
// it could be read (a count, a reset, or a flag that says something).
func TestNoDialectWithoutValue(t *testing.T) {
	for _, h := range []http.Header{
		{"X-Ratelimit-Limit": {"abc"}},
		{"X-Rate-Limit-Limit": {"abc"}},
		{"Ratelimit-Name": {"throttle"}},
		{"Ratelimit-Limit": {"abc"}},
		{"Ratelimit": {"limit=abc"}},
		{"Ratelimit": {`"a";foo=1`}},
		{"Ratelimit-Policy": {`"a"`}},
		{"X-Shopify-Shop-Api-Call-Limit": {"x/y"}},
		{"Sforce-Limit-Info": {"garbage"}},
		{"X-Ratelimit-Over-Limit": {"yes"}},
		{"X-Ratelimit-Limit-Tokens": {"-1"}, "X-Ratelimit-Remaining-Tokens": {"-1"}, "X-Ratelimit-Reset-Tokens": {"0"}},
	} {
		obs := ParseHeaders(h, 429, hdrNow)
		require.Zero(t, obs.Dialects, "%v: %v", h, obs.Dialects)
		require.Empty(t, obs.Policies, "%v", h)
	}
	// Flags say something on their own.
	for h, d := range map[*http.Header]Dialect{
		{"X-Ratelimit-Global": {"true"}}:                                     DialectDiscord,
		{"X-Envoy-Ratelimited": {"true"}}:                                    DialectEnvoy,
		{"X-Ratelimit-Resource": {"api"}, "X-Ratelimit-Nearlimit": {"true"}}: DialectBitbucket,
	} {
		require.Equal(t, DialectSet(0).With(d), ParseHeaders(*h, 429, hdrNow).Dialects, "%v", *h)
	}
}

func TestDialectSet(t *testing.T) {
	var s DialectSet
	require.Zero(t, s.Len())
	require.Nil(t, s.List())
	require.Equal(t, "", s.String())
	require.Equal(t, s, s.With(0))
	require.Equal(t, s, s.With(Dialect(numDialects+1)))
	require.False(t, s.Has(40))
	s = s.With(DialectGitHub).With(DialectIETFDraft08).With(DialectGitHub)
	require.Equal(t, 2, s.Len())
	require.Equal(t, []Dialect{DialectIETFDraft08, DialectGitHub}, s.List())
	require.Equal(t, "ietf-draft-08,github", s.String())
	require.True(t, s.Has(DialectGitHub))
	require.False(t, s.Has(DialectReddit))

	require.Equal(t, "unknown", Dialect(0).String())
	require.Equal(t, "unknown", Dialect(numDialects+1).String())
	seen := map[string]bool{}
	for d := Dialect(1); int(d) <= numDialects; d++ {
		name := d.String()
		require.NotEqual(t, "unknown", name, "dialect %d has no name", d)
		require.False(t, seen[name], "two dialects named %q", name)
		seen[name] = true
	}
}

// TestPolicyFieldsBeyondJSON pins what the -explain JSON does not show:
// each policy's Dialect, Scope and Partition.
func TestPolicyFieldsBeyondJSON(t *testing.T) {
	for _, tt := range []struct {
		name string
		h    http.Header
		want []Policy
	}{
		{"discord", http.Header{
			"X-Ratelimit-Limit": {"5"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset-After": {"1.5"},
			"X-Ratelimit-Bucket": {"abcd1234"}, "X-Ratelimit-Scope": {"shared"},
		}, []Policy{{Unit: UnitRequests, Limit: 5, HasLimit: true, HasRemaining: true, Reset: 1500 * time.Millisecond, HasReset: true,
			Scope: "shared", Partition: "abcd1234", Dialect: DialectDiscord}}},
		{"azure resource", http.Header{"X-Ms-Ratelimit-Remaining-Resource": {"Microsoft.Compute/GetVM3Min;99"}},
			[]Policy{{Name: "Microsoft.Compute/GetVM3Min", Unit: UnitRequests, Remaining: 99, HasRemaining: true, Scope: "resource", Dialect: DialectAzure}}},
		{"ietf -06", http.Header{"Ratelimit-Limit": {"10"}, "Ratelimit-Remaining": {"9"}, "Ratelimit-Policy": {"10;w=1"}},
			[]Policy{{Unit: UnitRequests, Limit: 10, HasLimit: true, Remaining: 9, HasRemaining: true, Window: time.Second, Dialect: DialectIETFDraft04}}},
		{"ietf -03", http.Header{"Ratelimit-Limit": {"10"}, "Ratelimit-Remaining": {"9"}},
			[]Policy{{Unit: UnitRequests, Limit: 10, HasLimit: true, Remaining: 9, HasRemaining: true, Dialect: DialectIETFDraft00}}},
		{"ietf -08 partition", http.Header{"Ratelimit-Policy": {`"a";q=5;pk=:YWJj:`}, "Ratelimit": {`"a";r=4;pk=:YWJj:`}},
			[]Policy{{Name: "a", Unit: UnitRequests, Limit: 5, HasLimit: true, Remaining: 4, HasRemaining: true, Partition: "abc", Dialect: DialectIETFDraft08}}},
		{"kong and openai apart", http.Header{"X-Ratelimit-Limit-Minute": {"5"}, "X-Ratelimit-Limit-Tokens": {"7"}},
			[]Policy{
				{Unit: UnitRequests, Limit: 5, HasLimit: true, Window: time.Minute, Dialect: DialectKong},
				{Unit: UnitTokens, Limit: 7, HasLimit: true, Dialect: DialectOpenAI},
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ParseHeaders(tt.h, 200, hdrNow).Policies)
		})
	}
}

// TestDictionaryWithoutValues: a -07 policy field beside a RateLimit
// dictionary with nothing readable is still -07.
func TestDictionaryWithoutValues(t *testing.T) {
	obs := ParseHeaders(http.Header{"Ratelimit-Policy": {"10;w=1"}, "Ratelimit": {"limit=x, foo=1"}}, 200, hdrNow)
	require.Equal(t, []Policy{{Unit: UnitRequests, Limit: 10, HasLimit: true, Window: time.Second, Dialect: DialectIETFDraft07}}, obs.Policies)
	require.Equal(t, DialectSet(0).With(DialectIETFDraft07), obs.Dialects)
}

func TestPolicyString(t *testing.T) {
	for want, p := range map[string]Policy{
		`"burst" 0 of 100 requests left per 1m0s, resets in 30s`: {Name: "burst", Unit: UnitRequests, Limit: 100, HasLimit: true, HasRemaining: true, Window: time.Minute, Reset: 30 * time.Second, HasReset: true},
		`5 tokens left`:          {Unit: UnitTokens, Remaining: 5, HasRemaining: true},
		`limit 7 requests`:       {Limit: 7, HasLimit: true},
		`requests, resets in 0s`: {HasReset: true},
	} {
		require.Equal(t, want, p.String())
	}
}

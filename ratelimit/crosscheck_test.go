package ratelimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/ratelimit"
	"github.com/headway-go/headway/ratelimittest"
)

// The cross-check drives ratelimittest's emulated server and reads every
// response back with ratelimit.ParseHeaders. The two were written
// independently from the formats' definitions, so each checks the other.
//
// The test does not trust either side for the numbers: every scenario states
// by hand (or with a loop as simple as the algorithm's definition) what each
// policy's state is after each request, on a ManualClock that starts a
// quarter of a second into a second, so that every rounding shows. The
// dialect table then says what each format can carry of that state, to its
// precision:
//
//   - delay-seconds (IETF t, RateLimit-Reset, reset=): the reset rounded up
//     to a whole second;
//   - milliseconds (OpenAI's Go durations, Discord's Reset-After): rounded up
//     to the millisecond;
//   - absolute times (epoch seconds, RFC 3339, HTTP-date Retry-After): the
//     server writes wall+delay rounded up to the second, and the client
//     measures it against the Date header, which is wall truncated to the
//     second; so the delay read is ceil(wall+delay) - floor(wall).
//
// Every scenario runs in every dialect, with each Retry-After form and with
// the server's wall clock skewed (WithDateSkew), while ParseHeaders is given
// the client's true receive time: absolute times must be measured against
// the response's Date, not against the client's clock.

// xcStart is the ManualClock's start: 250ms into a second, at the start of
// an (aligned) minute, so that the 1s and 1m fixed windows are easy to
// follow.
var xcStart = time.Date(2026, 5, 25, 12, 0, 0, 250*int(time.Millisecond), time.UTC)

// xcNever is the wait of a request that costs more than a policy can ever
// admit: the server answers 429 without a Retry-After.
const xcNever = time.Duration(-1)

// xcState is what the server knows of one policy after one request.
type xcState struct {
	remaining int64
	reset     time.Duration // until the quota is fully restored
	refused   bool          // this policy refused the request
}

// xcStep is one request and what it should get.
type xcStep struct {
	advance time.Duration     // the clock moves by this first
	header  map[string]string // request headers (cost, partition key)
	status  int
	wait    time.Duration // on a 429: time until it would be admitted, or xcNever
	want    []xcState     // one per policy of the scenario, in its order
}

func (s xcStep) with(k, v string) xcStep {
	h := make(map[string]string, len(s.header)+1)
	for name, value := range s.header {
		h[name] = value
	}
	h[k] = v
	s.header = h
	return s
}

type xcScenario struct {
	name      string
	policies  []ratelimittest.Quota
	partition string // the request header that partitions the quota, if any
	steps     []xcStep
}

// xcMeta is what the policy definition says, independent of its state.
type xcMeta struct {
	name     string // as the IETF dialect names it
	named    bool
	unit     ratelimit.Unit
	capacity int64         // the most a key can have left (the burst for buckets)
	window   time.Duration // the IETF w: the window, or for buckets the time to refill a burst (q/w is the rate)
}

func xcMetaOf(p ratelimittest.Quota) xcMeta {
	m := xcMeta{name: p.Name, named: p.Name != "", unit: ratelimit.UnitRequests, capacity: int64(p.Limit), window: p.Window}
	if !m.named {
		// Policy.Name: "Empty means a name made from the numbers, such as
		// "10-per-1s"".
		m.name = fmt.Sprintf("%d-per-%s", p.Limit, p.Window)
	}
	if p.Unit != "" {
		m.unit = ratelimit.Unit(p.Unit)
	}
	switch p.Algorithm {
	case ratelimittest.TokenBucket, ratelimittest.LeakyBucket, ratelimittest.GCRA:
		if p.Burst > 0 {
			m.capacity = int64(p.Burst)
		}
	}
	// w is whole seconds, at least 1, rounded up: capacity units take
	// capacity*Window/Limit to come back (the window itself for the
	// window algorithms). The scenarios' numbers are small enough for
	// int64.
	m.window = time.Duration(max(1, (m.capacity*int64(p.Window)+int64(p.Limit)*int64(time.Second)-1)/(int64(p.Limit)*int64(time.Second)))) * time.Second
	return m
}

// xcView is one response as the server means it.
type xcView struct {
	metas       []xcMeta
	states      []xcState
	wall        time.Time // the server's (skewed) clock
	refused     bool
	partitioned bool
}

// binding is the policy of unit u that the single-policy dialects report:
// the one that refused, else the one with the fewest units left, ties going
// to the later reset (ratelimittest's documented rule); -1 if none. A
// refusal's reset is the policy's own wait, so that it agrees with
// Retry-After (draft-07 section 4).
func (x *xcView) binding(u ratelimit.Unit) int {
	b := -1
	for i, m := range x.metas {
		if m.unit != u {
			continue
		}
		if b < 0 {
			b = i
			continue
		}
		s, bs := x.states[i], x.states[b]
		switch {
		case s.refused != bs.refused:
			if s.refused {
				b = i
			}
		case s.refused && s.reset != bs.reset:
			// Between refusals, the one Retry-After comes from.
			if s.reset > bs.reset {
				b = i
			}
		case s.remaining != bs.remaining:
			if s.remaining < bs.remaining {
				b = i
			}
		case s.reset > bs.reset:
			b = i
		}
	}
	return b
}

// xcCeil rounds d up to a multiple of unit.
func xcCeil(d, unit time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + unit - 1) / unit * unit
}

// xcAbsolute is what a client reads from an absolute time written as
// wall+d rounded up to unit, measured against the Date header (wall
// truncated to the second).
func xcAbsolute(wall time.Time, d, unit time.Duration) time.Duration {
	t := wall.Add(d)
	if tr := t.Truncate(unit); !tr.Equal(t) {
		t = tr.Add(unit)
	}
	return max(0, t.Sub(wall.Truncate(time.Second)))
}

// xcDialect is one row of the dialect table: what ParseHeaders should
// detect, and which policies it should read.
type xcDialect struct {
	d      ratelimittest.Dialect
	detect ratelimit.Dialect // 0: nothing
	expect func(x *xcView) []ratelimit.Policy
}

func xcIETFLegacy(d ratelimit.Dialect) func(x *xcView) []ratelimit.Policy {
	return func(x *xcView) []ratelimit.Policy {
		// RateLimit-Policy lists every request quota; the current state
		// (RateLimit-Limit/-Remaining/-Reset, or RateLimit: limit=...)
		// belongs to the binding one, found by its limit.
		// Drafts -04..-07 forbid two policies with the same quota, so a
		// policy repeating another's quota is left out, except the binding
		// one.
		var out []ratelimit.Policy
		b := x.binding(ratelimit.UnitRequests)
		var seen []int64
		for i, m := range x.metas {
			if m.unit != ratelimit.UnitRequests || (b >= 0 && i != b && m.capacity == x.metas[b].capacity) || slices.Contains(seen, m.capacity) {
				continue
			}
			seen = append(seen, m.capacity)
			p := ratelimit.Policy{Unit: ratelimit.UnitRequests, Limit: m.capacity, HasLimit: true, Window: m.window, Dialect: d}
			if i == b {
				s := x.states[i]
				p.Remaining, p.HasRemaining = s.remaining, true
				p.Reset, p.HasReset = xcCeil(s.reset, time.Second), true
			}
			out = append(out, p)
		}
		return out
	}
}

func xcXRateLimit(d ratelimit.Dialect) func(x *xcView) []ratelimit.Policy {
	return func(x *xcView) []ratelimit.Policy {
		b := x.binding(ratelimit.UnitRequests)
		if b < 0 {
			return nil
		}
		m, s := x.metas[b], x.states[b]
		p := ratelimit.Policy{Unit: ratelimit.UnitRequests, Limit: m.capacity, HasLimit: true,
			Remaining: s.remaining, HasRemaining: true,
			Reset: xcAbsolute(x.wall, s.reset, time.Second), HasReset: true, ResetAbsolute: true, Dialect: d}
		if d == ratelimit.DialectGitHub {
			p.Name = "core"
			if m.named {
				p.Name = m.name
			}
		}
		return []ratelimit.Policy{p}
	}
}

func xcPerUnit(d ratelimit.Dialect, units []ratelimit.Unit, absolute bool, reset func(x *xcView, s xcState) time.Duration) func(x *xcView) []ratelimit.Policy {
	return func(x *xcView) []ratelimit.Policy {
		var out []ratelimit.Policy
		for _, u := range units {
			b := x.binding(u)
			if b < 0 {
				continue
			}
			m, s := x.metas[b], x.states[b]
			out = append(out, ratelimit.Policy{Unit: u, Limit: m.capacity, HasLimit: true,
				Remaining: s.remaining, HasRemaining: true,
				Reset: reset(x, s), HasReset: true, ResetAbsolute: absolute, Dialect: d})
		}
		return out
	}
}

var xcDialects = []xcDialect{
	{ratelimittest.IETF, ratelimit.DialectIETFDraft08, func(x *xcView) []ratelimit.Policy {
		// One named item per request policy, in both fields.
		var out []ratelimit.Policy
		for i, m := range x.metas {
			if m.unit != ratelimit.UnitRequests {
				continue
			}
			s := x.states[i]
			out = append(out, ratelimit.Policy{Name: m.name, Unit: ratelimit.UnitRequests,
				Limit: m.capacity, HasLimit: true, Remaining: s.remaining, HasRemaining: true,
				Window: m.window, Reset: xcCeil(s.reset, time.Second), HasReset: true,
				Dialect: ratelimit.DialectIETFDraft08})
		}
		return out
	}},
	{ratelimittest.IETFDraft07, ratelimit.DialectIETFDraft07, xcIETFLegacy(ratelimit.DialectIETFDraft07)},
	{ratelimittest.IETFDraft04, ratelimit.DialectIETFDraft04, xcIETFLegacy(ratelimit.DialectIETFDraft04)},
	{ratelimittest.XRateLimit, ratelimit.DialectXRateLimit, xcXRateLimit(ratelimit.DialectXRateLimit)},
	{ratelimittest.GitHub, ratelimit.DialectGitHub, xcXRateLimit(ratelimit.DialectGitHub)},
	{ratelimittest.OpenAI, ratelimit.DialectOpenAI, xcPerUnit(ratelimit.DialectOpenAI,
		[]ratelimit.Unit{ratelimit.UnitRequests, ratelimit.UnitTokens}, false,
		func(_ *xcView, s xcState) time.Duration { return xcCeil(s.reset, time.Millisecond) })},
	{ratelimittest.Anthropic, ratelimit.DialectAnthropic, xcPerUnit(ratelimit.DialectAnthropic,
		[]ratelimit.Unit{ratelimit.UnitRequests, ratelimit.UnitTokens, ratelimit.UnitInputTokens, ratelimit.UnitOutputTokens}, true,
		func(x *xcView, s xcState) time.Duration { return xcAbsolute(x.wall, s.reset, time.Second) })},
	{ratelimittest.Discord, ratelimit.DialectDiscord, func(x *xcView) []ratelimit.Policy {
		b := x.binding(ratelimit.UnitRequests)
		if b < 0 {
			return nil
		}
		m, s := x.metas[b], x.states[b]
		p := ratelimit.Policy{Unit: ratelimit.UnitRequests, Limit: m.capacity, HasLimit: true,
			Remaining: s.remaining, HasRemaining: true,
			Reset: xcCeil(s.reset, time.Millisecond), HasReset: true, Dialect: ratelimit.DialectDiscord}
		if x.refused {
			p.Scope = "shared"
			if x.partitioned {
				p.Scope = "user"
			}
		}
		return []ratelimit.Policy{p} // Partition (the bucket) is checked on its own
	}},
	{ratelimittest.Shopify, ratelimit.DialectShopify, func(x *xcView) []ratelimit.Policy {
		b := x.binding(ratelimit.UnitRequests)
		if b < 0 {
			return nil
		}
		m, s := x.metas[b], x.states[b]
		return []ratelimit.Policy{{Unit: ratelimit.UnitRequests, Limit: m.capacity, HasLimit: true,
			Remaining: s.remaining, HasRemaining: true, Dialect: ratelimit.DialectShopify}}
	}},
	{ratelimittest.None, 0, func(*xcView) []ratelimit.Policy { return nil }},
}

func TestCrossCheckDialectTableIsComplete(t *testing.T) {
	var got []ratelimittest.Dialect
	for _, d := range xcDialects {
		got = append(got, d.d)
	}
	require.Equal(t, ratelimittest.Dialects(), got, "the cross-check must cover every dialect the server writes")
}

func xcScenarios() []xcScenario {
	const ms = time.Millisecond
	ok := func(adv time.Duration, want ...xcState) xcStep {
		return xcStep{advance: adv, status: http.StatusOK, want: want}
	}
	no := func(adv, wait time.Duration, want ...xcState) xcStep {
		return xcStep{advance: adv, status: http.StatusTooManyRequests, wait: wait, want: want}
	}
	tooLarge := func(st xcStep) xcStep { st.status = http.StatusRequestEntityTooLarge; return st }
	s := func(rem int64, reset time.Duration) xcState { return xcState{remaining: rem, reset: reset} }
	r := func(rem int64, reset time.Duration) xcState {
		return xcState{remaining: rem, reset: reset, refused: true}
	}

	var out []xcScenario

	// One unnamed fixed window of 5 per second, from 250ms into a second.
	out = append(out, xcScenario{
		name:     "single",
		policies: []ratelimittest.Quota{{Limit: 5, Window: time.Second}},
		steps: []xcStep{
			ok(0, s(4, 750*ms)),
			ok(100*ms, s(3, 650*ms)),
			ok(0, s(2, 650*ms)),
			ok(0, s(1, 650*ms)),
			ok(0, s(0, 650*ms)),
			no(300*ms, 350*ms, r(0, 350*ms)),
			no(349*ms, 1*ms, r(0, 1*ms)),   // 1ms before the window ends
			ok(1*ms, s(4, time.Second)),    // exactly on a second
			ok(1500*ms, s(4, 500*ms)),      // a window later, half-way
			ok(7500*ms, s(4, time.Second)), // several windows later
			ok(999*ms, s(3, 1*ms)),         // 1ms before the end
		},
	})

	// Two stacked fixed windows: 5 per second and 100 per minute. Five
	// requests and one more each second: the sixth is refused by the burst
	// policy, until the minute's 100 are spent in second 19; then every
	// request is refused by the minute policy until the next minute.
	{
		var steps []xcStep
		var minuteUsed int64
		for sec := 0; sec <= 20; sec++ {
			var secUsed int64
			elapsed := 250*ms + time.Duration(sec)*time.Second // into the minute
			for k := 0; k < 6; k++ {
				st := xcStep{status: http.StatusOK}
				if k == 0 && sec > 0 {
					st.advance = time.Second
				}
				burstRefused, minuteRefused := secUsed >= 5, minuteUsed >= 100
				if burstRefused || minuteRefused {
					st.status = http.StatusTooManyRequests
					if burstRefused {
						st.wait = max(st.wait, time.Second-250*ms)
					}
					if minuteRefused {
						st.wait = max(st.wait, time.Minute-elapsed)
					}
				} else {
					secUsed++
					minuteUsed++
				}
				var burstReset, minuteReset time.Duration
				if secUsed > 0 {
					burstReset = time.Second - 250*ms
				}
				if minuteUsed > 0 {
					minuteReset = time.Minute - elapsed
				}
				st.want = []xcState{
					{remaining: 5 - secUsed, reset: burstReset, refused: burstRefused},
					{remaining: 100 - minuteUsed, reset: minuteReset, refused: minuteRefused},
				}
				steps = append(steps, st)
			}
		}
		// The next minute, 250ms into it: both quotas are back.
		steps = append(steps, ok(40*time.Second, s(4, 750*ms), s(99, time.Minute-250*ms)))
		out = append(out, xcScenario{
			name: "stacked",
			policies: []ratelimittest.Quota{
				{Name: "burst", Limit: 5, Window: time.Second},
				{Name: "sustained", Limit: 100, Window: time.Minute},
			},
			steps: steps,
		})
	}

	// A token bucket of 20 that refills at 10 per second.
	{
		var steps []xcStep
		for k := int64(1); k <= 20; k++ {
			steps = append(steps, ok(0, s(20-k, time.Duration(k)*100*ms)))
		}
		steps = append(steps,
			no(0, 100*ms, r(0, 100*ms)),
			ok(250*ms, s(1, 1850*ms)), // 2.5 tokens back, 1.5 left
			ok(0, s(0, 1950*ms)),      // 0.5 left
			no(0, 50*ms, r(0, 50*ms)),
			ok(5*time.Second, s(19, 100*ms)),
		)
		out = append(out, xcScenario{
			name:     "token-bucket",
			policies: []ratelimittest.Quota{{Name: "bucket", Algorithm: ratelimittest.TokenBucket, Limit: 10, Window: time.Second, Burst: 20}},
			steps:    steps,
		})
	}

	// Shopify's REST bucket: a leaky bucket of 40 that drains 2 per second.
	{
		var steps []xcStep
		for k := int64(1); k <= 40; k++ {
			steps = append(steps, ok(0, s(40-k, time.Duration(k)*500*ms)))
		}
		steps = append(steps,
			no(0, 500*ms, r(0, 500*ms)),
			ok(1200*ms, s(1, 19300*ms)), // 37.6 in the bucket, then 38.6
			ok(0, s(0, 19800*ms)),       // 39.6
			no(0, 300*ms, r(0, 300*ms)),
		)
		out = append(out, xcScenario{
			name:     "leaky-bucket",
			policies: []ratelimittest.Quota{{Name: "rest", Algorithm: ratelimittest.LeakyBucket, Limit: 2, Window: time.Second, Burst: 40}},
			steps:    steps,
		})
	}

	// Requests and tokens per minute, the tokens stated by the request.
	{
		const cost = "X-Tokens"
		left := 59750 * ms // until the minute ends, from the start
		out = append(out, xcScenario{
			name: "tokens",
			policies: []ratelimittest.Quota{
				{Name: "rpm", Limit: 50, Window: time.Minute},
				{Name: "tpm", Limit: 1000, Window: time.Minute, Unit: ratelimittest.UnitTokens, Cost: ratelimittest.CostFromHeader(cost, 100)},
			},
			steps: []xcStep{
				ok(0, s(49, left), s(600, left)).with(cost, "400"),
				ok(250*ms, s(48, left-250*ms), s(200, left-250*ms)).with(cost, "400"),
				no(0, left-250*ms, s(48, left-250*ms), r(200, left-250*ms)).with(cost, "300"),
				ok(0, s(47, left-250*ms), s(100, left-250*ms)), // the default cost, 100
				ok(0, s(46, left-250*ms), s(100, left-250*ms)).with(cost, "0"),
				ok(0, s(45, left-250*ms), s(0, left-250*ms)).with(cost, "many"), // not a number: 100
				no(0, left-250*ms, s(45, left-250*ms), r(0, left-250*ms)).with(cost, "1"),
				ok(left-250*ms, s(49, time.Minute), s(750, time.Minute)).with(cost, "250"),           // exactly on the minute
				tooLarge(no(0, xcNever, s(49, time.Minute), r(750, time.Minute)).with(cost, "5000")), // can never fit: 413
			},
		})
	}

	// A quota per API key.
	{
		const key = "X-Api-Key"
		out = append(out, xcScenario{
			name:      "partitioned",
			policies:  []ratelimittest.Quota{{Name: "per-key", Limit: 3, Window: time.Second}},
			partition: key,
			steps: []xcStep{
				ok(0, s(2, 750*ms)).with(key, "alice"),
				ok(0, s(1, 750*ms)).with(key, "alice"),
				ok(0, s(0, 750*ms)).with(key, "alice"),
				no(0, 750*ms, r(0, 750*ms)).with(key, "alice"),
				ok(0, s(2, 750*ms)).with(key, "bob"),
				ok(100*ms, s(1, 650*ms)).with(key, "bob"),
				no(0, 650*ms, r(0, 650*ms)).with(key, "alice"),
			},
		})
	}
	// A GCRA of 10 per second with a burst of 3: the time to refill the
	// burst (300ms) is below the IETF w's precision, so w is rounded up.
	out = append(out, xcScenario{
		name:     "gcra",
		policies: []ratelimittest.Quota{{Name: "gcra", Algorithm: ratelimittest.GCRA, Limit: 10, Window: time.Second, Burst: 3}},
		steps: []xcStep{
			ok(0, s(2, 100*ms)),
			ok(0, s(1, 200*ms)),
			ok(0, s(0, 300*ms)),
			no(0, 100*ms, r(0, 100*ms)),
			ok(150*ms, s(0, 250*ms)), // 1.5 cells back, 0.5 left
			no(0, 50*ms, r(0, 50*ms)),
		},
	})

	// A window shorter than a second, which the IETF w rounds up.
	out = append(out, xcScenario{
		name:     "subsecond",
		policies: []ratelimittest.Quota{{Limit: 2, Window: 500 * ms}},
		steps: []xcStep{
			ok(0, s(1, 250*ms)),
			ok(0, s(0, 250*ms)),
			no(0, 250*ms, r(0, 250*ms)),
			ok(250*ms, s(1, 500*ms)),
		},
	})

	// Two stacked policies with the same limit and different windows. The
	// single-policy dialects report the binding one (equal remaining: the
	// later reset, the minute); the -08 list names both.
	{
		left := 59750 * ms
		out = append(out, xcScenario{
			name: "stacked-same-limit",
			policies: []ratelimittest.Quota{
				{Name: "second", Limit: 10, Window: time.Second},
				{Name: "minute", Limit: 10, Window: time.Minute},
			},
			steps: []xcStep{
				ok(0, s(9, 750*ms), s(9, left)),
				ok(0, s(8, 750*ms), s(8, left)),
				ok(time.Second, s(9, 750*ms), s(7, left-time.Second)),
			},
		})
	}
	return out
}

// xcSkews are the server's clock errors: none, an hour ahead, behind by a
// fraction of a second, and ahead by a fraction of a millisecond (which
// Discord's millisecond epoch resets must round).
var xcSkews = []time.Duration{0, time.Hour, -2500 * time.Millisecond, time.Minute + 123456789*time.Nanosecond}

func TestCrossCheckDialects(t *testing.T) {
	for _, sc := range xcScenarios() {
		for _, dl := range xcDialects {
			for _, ra := range []ratelimittest.RetryAfterForm{ratelimittest.RetryAfterSeconds, ratelimittest.RetryAfterDate, ratelimittest.RetryAfterNone} {
				for _, skew := range xcSkews {
					name := fmt.Sprintf("%s/%s/retry-after=%s/skew=%v", sc.name, dl.d, ra, skew)
					t.Run(name, func(t *testing.T) { xcRun(t, sc, dl, ra, skew) })
				}
			}
		}
	}
}

func xcRun(t *testing.T, sc xcScenario, dl xcDialect, ra ratelimittest.RetryAfterForm, skew time.Duration) {
	clock := ratelimittest.NewManualClock(xcStart)
	opts := []ratelimittest.Option{
		ratelimittest.WithClock(clock),
		ratelimittest.WithDialect(dl.d),
		ratelimittest.WithRetryAfter(ra),
		ratelimittest.WithDateSkew(skew),
	}
	for _, p := range sc.policies {
		opts = append(opts, ratelimittest.WithQuota(p))
	}
	if sc.partition != "" {
		opts = append(opts, ratelimittest.WithPartition(ratelimittest.ByHeader(sc.partition)))
	}
	h, err := ratelimittest.NewHandler(nil, opts...)
	require.NoError(t, err)

	metas := make([]xcMeta, len(sc.policies))
	for i, p := range sc.policies {
		metas[i] = xcMetaOf(p)
	}
	pkByKey := map[string]string{}      // IETF pk seen per partition key
	bucketByName := map[string]string{} // Discord bucket seen per binding policy

	for i, st := range sc.steps {
		require.Len(t, st.want, len(sc.policies), "step %d: bad scenario", i+1)
		clock.Advance(st.advance)
		req := httptest.NewRequest(http.MethodGet, "http://api.example/v1/things", nil)
		for k, v := range st.header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		require.NoError(t, res.Body.Close())

		now := clock.Now()
		wall := now.Add(skew)
		msg := fmt.Sprintf("step %d at start+%v, request %v\nresponse %d\n%s", i+1, now.Sub(xcStart), st.header, res.StatusCode, xcDump(res.Header))
		require.Equal(t, st.status, res.StatusCode, msg)
		require.Equal(t, wall.UTC().Format(http.TimeFormat), res.Header.Get("Date"), msg)

		// The client's clock is the true one: only the Date header knows
		// the server's skew.
		obs := ratelimit.ParseHeaders(res.Header, res.StatusCode, now)
		require.Equal(t, res.StatusCode, obs.Status, msg)

		// Retry-After, on refusals only.
		wantRA, hasRA := xcRetryAfter(ra, st, wall)
		require.Equal(t, hasRA, obs.HasRetryAfter, "Retry-After presence\n%s", msg)
		if hasRA {
			require.Equal(t, "Retry-After", obs.RetryAfterHeader, msg)
			require.Equal(t, wantRA, obs.RetryAfter, "Retry-After\n%s", msg)
			require.GreaterOrEqual(t, obs.RetryAfter, st.wait, "a client that waits as told must not be early\n%s", msg)
		}

		x := &xcView{metas: metas, states: st.want, wall: wall, refused: st.status != http.StatusOK, partitioned: sc.partition != ""}
		want := dl.expect(x)
		got, partitions := xcSplitPartitions(obs.Policies)
		require.Equal(t, want, got, "policies\n%s", msg)
		var wantSet ratelimit.DialectSet
		if dl.detect != 0 {
			wantSet = wantSet.With(dl.detect)
		}
		require.Equal(t, wantSet.String(), obs.Dialects.String(), "dialects\n%s", msg)
		xcCheckResetBounds(t, dl.d, x, got, msg)

		// Partitions: the IETF pk identifies the key's quota, Discord's
		// bucket the policy; neither is otherwise defined, so check that
		// they tell quotas apart.
		switch dl.d {
		case ratelimittest.IETF:
			key := st.header[sc.partition]
			for _, pk := range partitions {
				if sc.partition == "" {
					require.Empty(t, pk, "pk without partitioning\n%s", msg)
					continue
				}
				require.NotEmpty(t, pk, "pk missing\n%s", msg)
				xcSameForSame(t, pkByKey, key, pk, msg)
			}
		case ratelimittest.Discord:
			require.Len(t, partitions, 1, msg)
			require.NotEmpty(t, partitions[0], "bucket missing\n%s", msg)
			xcSameForSame(t, bucketByName, metas[x.binding(ratelimit.UnitRequests)].name, partitions[0], msg)
		default:
			for _, p := range partitions {
				require.Empty(t, p, msg)
			}
		}

		// The same responses with a field left out, which the dialect
		// defines another way to read.
		switch dl.d {
		case ratelimittest.GitHub:
			// X-RateLimit-Used is limit - remaining.
			h2 := res.Header.Clone()
			h2.Del("X-RateLimit-Remaining")
			got2, _ := xcSplitPartitions(ratelimit.ParseHeaders(h2, res.StatusCode, now).Policies)
			require.Equal(t, want, got2, "policies from X-RateLimit-Used\n%s", msg)
		case ratelimittest.Discord:
			// Without Reset-After, X-RateLimit-Reset (epoch seconds with
			// milliseconds) against Date.
			h2 := res.Header.Clone()
			h2.Del("X-RateLimit-Reset-After")
			got2, _ := xcSplitPartitions(ratelimit.ParseHeaders(h2, res.StatusCode, now).Policies)
			b := x.binding(ratelimit.UnitRequests)
			want2 := slices.Clone(want)
			want2[0].Reset = xcAbsolute(wall, st.want[b].reset, time.Millisecond)
			want2[0].ResetAbsolute = true
			require.Equal(t, want2, got2, "policies from X-RateLimit-Reset\n%s", msg)
			require.GreaterOrEqual(t, got2[0].Reset, st.want[b].reset, msg)
		}
	}
}

// xcRetryAfter is the delay a client should read from a refusal's
// Retry-After.
func xcRetryAfter(ra ratelimittest.RetryAfterForm, st xcStep, wall time.Time) (time.Duration, bool) {
	if st.status == http.StatusOK || st.wait == xcNever {
		return 0, false
	}
	switch ra {
	case ratelimittest.RetryAfterSeconds:
		return max(time.Second, xcCeil(st.wait, time.Second)), true
	case ratelimittest.RetryAfterDate:
		return xcAbsolute(wall, st.wait, time.Second), true
	}
	return 0, false
}

// xcCheckResetBounds restates the exact expectations as what a client
// relies on: a reset is never read as earlier than it is, and is late by
// less than the format's precision (two seconds for absolute times measured
// against a Date truncated to the second).
func xcCheckResetBounds(t *testing.T, d ratelimittest.Dialect, x *xcView, got []ratelimit.Policy, msg string) {
	t.Helper()
	slack := time.Second
	switch d {
	case ratelimittest.XRateLimit, ratelimittest.GitHub, ratelimittest.Anthropic:
		slack = 2 * time.Second
	case ratelimittest.OpenAI, ratelimittest.Discord:
		slack = time.Millisecond
	}
	for _, p := range got {
		if !p.HasReset {
			continue
		}
		// The -08 list names every policy; the other dialects describe
		// the binding one of each unit.
		i := x.binding(p.Unit)
		if d == ratelimittest.IETF {
			i = slices.IndexFunc(x.metas, func(m xcMeta) bool { return m.name == p.Name })
		}
		require.GreaterOrEqual(t, i, 0, "no policy for %v\n%s", p, msg)
		truth := x.states[i].reset
		require.GreaterOrEqual(t, p.Reset, truth, "reset read early: %v\n%s", p, msg)
		require.Less(t, p.Reset, truth+slack, "reset read too late: %v\n%s", p, msg)
	}
}

// xcSplitPartitions returns the policies with their Partition cleared, and
// the partitions.
func xcSplitPartitions(ps []ratelimit.Policy) ([]ratelimit.Policy, []string) {
	ps = slices.Clone(ps)
	var parts []string
	for i := range ps {
		parts = append(parts, ps[i].Partition)
		ps[i].Partition = ""
	}
	return ps, parts
}

// xcSameForSame checks that id is the same every time for the same owner,
// and different for different owners.
func xcSameForSame(t *testing.T, seen map[string]string, owner, id, msg string) {
	t.Helper()
	if prev, ok := seen[owner]; ok {
		require.Equal(t, prev, id, "%q changed for %q\n%s", id, owner, msg)
		return
	}
	for o, other := range seen {
		require.NotEqual(t, other, id, "%q and %q share %q\n%s", o, owner, id, msg)
	}
	seen[owner] = id
}

func xcDump(h http.Header) string {
	var lines []string
	for k, vs := range h {
		for _, v := range vs {
			lines = append(lines, "  "+k+": "+v)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

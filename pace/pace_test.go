package pace

import (
	"fmt"
	"math"
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

// t0 is the instant every story starts at.
var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func ms(n int) time.Duration  { return time.Duration(n) * time.Millisecond }
func sec(n int) time.Duration { return time.Duration(n) * time.Second }

// ---------------------------------------------------------------------------
// Header sets, as servers write them.

// hdr builds a header from name, value pairs.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// ietf is the IETF draft -08+ pair for one policy named "default": q per w
// seconds, r left, resetting in t seconds.
func ietf(q, w, r, t int) http.Header {
	return hdr("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, q, w),
		"RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, r, t))
}

// with adds name, value pairs to a copy of h.
func with(h http.Header, kv ...string) http.Header {
	c := h.Clone()
	if c == nil {
		c = http.Header{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Add(kv[i], kv[i+1])
	}
	return c
}

// openAI is OpenAI's pair of policies: requests and tokens, resetting in
// Go durations.
func openAI(reqLimit, reqLeft int, reqReset string, tokLimit, tokLeft int, tokReset string) http.Header {
	return hdr(
		"x-ratelimit-limit-requests", fmt.Sprint(reqLimit),
		"x-ratelimit-remaining-requests", fmt.Sprint(reqLeft),
		"x-ratelimit-reset-requests", reqReset,
		"x-ratelimit-limit-tokens", fmt.Sprint(tokLimit),
		"x-ratelimit-remaining-tokens", fmt.Sprint(tokLeft),
		"x-ratelimit-reset-tokens", tokReset,
	)
}

// github is GitHub's X-RateLimit-* for one resource, resetting at reset
// (Unix seconds).
func github(resource string, limit, remaining int, reset time.Time) http.Header {
	return hdr(
		"X-RateLimit-Limit", fmt.Sprint(limit),
		"X-RateLimit-Remaining", fmt.Sprint(remaining),
		"X-RateLimit-Used", fmt.Sprint(limit-remaining),
		"X-RateLimit-Reset", fmt.Sprint(reset.Unix()),
		"X-RateLimit-Resource", resource,
	)
}

// discord is Discord's X-RateLimit-* for one bucket.
func discord(bucket string, limit, remaining int, resetAfter string) http.Header {
	return hdr(
		"X-RateLimit-Limit", fmt.Sprint(limit),
		"X-RateLimit-Remaining", fmt.Sprint(remaining),
		"X-RateLimit-Reset-After", resetAfter,
		"X-RateLimit-Bucket", bucket,
	)
}

// ---------------------------------------------------------------------------
// Stories: tables of (instant, event, expected) played on one key's State.

type stepKind uint8

const (
	doReserve stepKind = iota + 1
	doComplete
	doCancel
	doCheck
)

// step is one event of a story at t0+at: a Reserve and what it must decide,
// a Complete with the answer's status and headers, a Cancel, or a check of
// the state.
type step struct {
	at   time.Duration
	kind stepKind
	name string // the lease's name in the story
	req  Request

	// Complete: the answer. status 0 is a transport error (zero Answer).
	status int
	h      http.Header
	date   time.Time // the response's Date header (zero: none)

	// Reserve: what it must decide.
	ok       bool
	probe    bool
	anyProbe bool // do not check the lease's Probe flag
	why      Why
	until    time.Duration // At - t0 of a refusal
	slack    time.Duration // At may be up to slack after until
	definite bool

	check func(t *testing.T, s *State, now time.Time)
}

func (s step) String() string {
	switch s.kind {
	case doReserve:
		if s.ok {
			return fmt.Sprintf("+%v reserve %q (want OK probe=%v)", s.at, s.name, s.probe)
		}
		return fmt.Sprintf("+%v reserve (want wait %v until +%v definite=%v)", s.at, s.why, s.until, s.definite)
	case doComplete:
		return fmt.Sprintf("+%v complete %q status %d", s.at, s.name, s.status)
	case doCancel:
		return fmt.Sprintf("+%v cancel %q", s.at, s.name)
	}
	return fmt.Sprintf("+%v check", s.at)
}

// send: the request named name may go at t0+at, and does not go first.
func send(at time.Duration, name string) step {
	return step{at: at, kind: doReserve, name: name, ok: true}
}

// first: the request named name goes at t0+at, alone, to learn (Probe).
func first(at time.Duration, name string) step {
	return step{at: at, kind: doReserve, name: name, ok: true, probe: true}
}

// goesFirst: the request named name goes at t0+at, the first after a reset
// (whether its lease says Probe is checked by TestProbeAfterReset).
func goesFirst(at time.Duration, name string) step {
	return step{at: at, kind: doReserve, name: name, ok: true, anyProbe: true}
}

// waitsForAnswer: a request asking at t0+at waits for the answer of one in
// flight: not definite, asking again within pollStep (why is checked by
// TestProbeAfterReset).
func waitsForAnswer(at time.Duration) step {
	return step{at: at, kind: doReserve, until: at + pollStep}
}

// wait: a request asking at t0+at must wait for why until t0+until.
func wait(at time.Duration, why Why, until time.Duration, definite bool) step {
	return step{at: at, kind: doReserve, why: why, until: until, definite: definite}
}

// answer: the response to name arrives at t0+at.
func answer(at time.Duration, name string, status int, h http.Header) step {
	return step{at: at, kind: doComplete, name: name, status: status, h: h}
}

// answerDated: the response to name arrives at t0+at with a Date header.
func answerDated(at time.Duration, name string, status int, h http.Header, date time.Time) step {
	return step{at: at, kind: doComplete, name: name, status: status, h: h, date: date}
}

// lost: the request named name failed without a response at t0+at.
func lost(at time.Duration, name string) step {
	return step{at: at, kind: doComplete, name: name}
}

func cancel(at time.Duration, name string) step {
	return step{at: at, kind: doCancel, name: name}
}

func check(at time.Duration, f func(t *testing.T, s *State, now time.Time)) step {
	return step{at: at, kind: doCheck, check: f}
}

// named records l under the step's name in y, so that it can be answered.
func (s step) named(l Lease, y *story) step {
	y.leases[s.name] = l
	return s
}

// within lets a refusal's At be up to d after the step's until.
func (s step) within(d time.Duration) step { s.slack = d; return s }

// asking sets the request of a Reserve step.
func (s step) asking(r Request) step { s.req = r; return s }

// story is one key's state played through steps.
type story struct {
	t      *testing.T
	cfg    *Config
	st     State
	leases map[string]Lease
}

func newStory(t *testing.T, cfg *Config) *story {
	return &story{t: t, cfg: cfg, leases: map[string]Lease{}}
}

// play runs the steps in order, failing at the first that does not decide
// as expected.
func (y *story) play(steps ...step) {
	t := y.t
	t.Helper()
	for i, s := range steps {
		now := t0.Add(s.at)
		msg := fmt.Sprintf("step %d: %v", i, s)
		switch s.kind {
		case doReserve:
			seq := y.st.Seq
			d := y.st.Reserve(now, s.req, y.cfg)
			if !s.ok {
				require.Falsef(t, d.OK, "%s: granted (lease %d) %s", msg, d.Lease.Seq, y.describe(now))
				if s.why != 0 {
					require.Equalf(t, s.why, d.Why, "%s: why (%s)", msg, d.Detail)
				}
				if s.slack > 0 {
					require.Truef(t, !d.At.Before(t0.Add(s.until)) && !d.At.After(t0.Add(s.until+s.slack)),
						"%s: at +%v, not within %v of +%v (%v: %s)", msg, d.At.Sub(t0), s.slack, s.until, d.Why, d.Detail)
				} else {
					require.Equalf(t, t0.Add(s.until), d.At, "%s: at (+%v, %v: %s)", msg, d.At.Sub(t0), d.Why, d.Detail)
				}
				require.Equalf(t, s.definite, d.Definite, "%s: definite (%v: %s)", msg, d.Why, d.Detail)
				require.Equalf(t, seq, y.st.Seq, "%s: a refusal granted a lease", msg)
				continue
			}
			require.Truef(t, d.OK, "%s: refused: %v until +%v definite=%v (%s)", msg, d.Why, d.At.Sub(t0), d.Definite, d.Detail)
			require.Equalf(t, seq+1, d.Lease.Seq, "%s: lease seq", msg)
			if !s.anyProbe {
				require.Equalf(t, s.probe, d.Lease.Probe, "%s: probe", msg)
			}
			require.Equalf(t, now, d.Lease.At, "%s: lease at", msg)
			if s.name != "" {
				y.leases[s.name] = d.Lease
			}
		case doComplete:
			l, ok := y.leases[s.name]
			require.Truef(t, ok, "%s: no lease named %q", msg, s.name)
			var a Answer
			if s.status != 0 {
				h := s.h
				if !s.date.IsZero() {
					h = with(h, "Date", s.date.Format(http.TimeFormat))
					a.Date = s.date
				}
				a.Obs = ratelimit.ParseHeaders(h, s.status, now)
			}
			y.st.Complete(now, l, a, y.cfg)
		case doCancel:
			l, ok := y.leases[s.name]
			require.Truef(t, ok, "%s: no lease named %q", msg, s.name)
			y.st.Cancel(l, y.cfg)
		case doCheck:
			s.check(t, &y.st, now)
		}
	}
}

func (y *story) describe(now time.Time) string {
	var b strings.Builder
	for _, p := range y.st.Policies {
		fmt.Fprintf(&b, "[%s] ", p.describe(&y.st, now))
	}
	return b.String()
}

// grants asks n requests at t0+at and returns how many were granted
// (naming them prefix0, prefix1, ...), and the last refusal.
func (y *story) grants(at time.Duration, n int, prefix string, req Request) (int, Decision) {
	now := t0.Add(at)
	got := 0
	var last Decision
	for i := range n {
		d := y.st.Reserve(now, req, y.cfg)
		if d.OK {
			y.leases[fmt.Sprint(prefix, i)] = d.Lease
			got++
		} else {
			last = d
		}
	}
	return got, last
}

// clone returns a copy of the story, to ask what-ifs.
func clone(y *story) *story {
	c := *y
	c.st = y.st.Clone()
	c.leases = map[string]Lease{}
	for k, v := range y.leases {
		c.leases[k] = v
	}
	return &c
}

// grantsAt returns how many requests asking at once at t0+at are granted
// (at most 1000).
func (y *story) grantsAt(at time.Duration) int {
	n, _ := y.grants(at, 1000, "g", Request{})
	return n
}

// answered is a story whose key has answered once, at t0+100ms, with h,
// to a first request sent at t0.
func answered(t *testing.T, cfg *Config, h http.Header) *story {
	y := newStory(t, cfg)
	y.play(first(0, "first"), answer(ms(100), "first", 200, h))
	return y
}

// ---------------------------------------------------------------------------
// 1. A key that never answered.

// TestFirstRequestGoesAlone: a key that never answered lets one request go
// first; the rest wait for its answer (not definite), then go.
func TestFirstRequestGoesAlone(t *testing.T) {
	poll := pollStep
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "the rest wait for the first answer, then go",
		steps: []step{
			first(0, "a"),
			wait(0, WhyFirstAnswer, poll, false),
			wait(ms(10), WhyFirstAnswer, ms(10)+poll, false),
			answer(ms(80), "a", 200, ietf(50, 1, 49, 1)),
			send(ms(80), "b"),
			send(ms(80), "c"),
			send(ms(81), "d"),
		},
	}, {
		name: "an answer without rate-limit headers releases them too",
		steps: []step{
			first(0, "a"),
			wait(ms(5), WhyFirstAnswer, ms(5)+poll, false),
			answer(ms(50), "a", 200, nil),
			send(ms(50), "b"),
			send(ms(50), "c"),
		},
	}, {
		name: "a first request that failed without a response lets another go first",
		steps: []step{
			first(0, "a"),
			wait(ms(5), WhyFirstAnswer, ms(5)+poll, false),
			lost(ms(30), "a"),
			first(ms(30), "b"),
			wait(ms(30), WhyFirstAnswer, ms(30)+poll, false),
			answer(ms(60), "b", 200, ietf(50, 1, 49, 1)),
			send(ms(60), "c"),
		},
	}, {
		name: "a first request cancelled before it left lets another go first",
		steps: []step{
			first(0, "a"),
			cancel(ms(1), "a"),
			first(ms(1), "b"),
			wait(ms(2), WhyFirstAnswer, ms(2)+poll, false),
		},
	}, {
		name: "the first answer is a 200 whatever its quota: the first request's is the only one before it",
		steps: []step{
			first(0, "a"),
			wait(ms(1), WhyFirstAnswer, ms(1)+poll, false),
			wait(ms(2), WhyFirstAnswer, ms(2)+poll, false),
			answer(ms(40), "a", 200, ietf(3, 1, 2, 1)),
			send(ms(40), "b"),
			send(ms(40), "c"),
			wait(ms(40), WhyQuota, ms(40)+sec(1), true), // the reset: +40ms, plus t=1
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newStory(t, nil).play(tt.steps...)
		})
	}
}

// ---------------------------------------------------------------------------
// 2-3. Requests in flight count against remaining.

// TestInFlightCountsAgainstRemaining: requests granted and not yet answered
// count against what the last answer said was left.
func TestInFlightCountsAgainstRemaining(t *testing.T) {
	tests := []struct {
		name      string
		base      http.Header // the first answer, at +100ms
		ask       int         // asking at once at +200ms
		want      int         // granted before any answer returns
		wantWhy   Why
		wantUntil time.Duration
	}{
		{"remaining 5, sixteen workers", ietf(100, 60, 5, 60), 16, 5, WhyQuota, ms(100) + sec(60)},
		{"remaining 1", ietf(100, 60, 1, 60), 4, 1, WhyQuota, ms(100) + sec(60)},
		{"remaining 0", ietf(100, 60, 0, 60), 3, 0, WhyQuota, ms(100) + sec(60)},
		{"X-RateLimit remaining 5", hdr("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "5",
			"X-RateLimit-Reset", fmt.Sprint(t0.Unix()+30)), 16, 5, WhyQuota, sec(30)},
		{"the tightest of two policies", hdr(
			"RateLimit-Policy", `"burst";q=10;w=1, "daily";q=1000;w=86400`,
			"RateLimit", `"burst";r=7;t=1, "daily";r=3;t=40000`), 16, 3, WhyQuota, ms(100) + sec(40000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := answered(t, nil, tt.base)
			got, last := y.grants(ms(200), tt.ask, "w", Request{})
			require.Equal(t, tt.want, got, "granted before any answer")
			require.Equal(t, tt.wantWhy, last.Why, last.Detail)
			require.True(t, last.Definite)
			require.Equal(t, t0.Add(tt.wantUntil), last.At)
			require.Len(t, y.st.Leases, tt.want)
			// The answers, as the server counts them, leave nothing more.
			for i := range got {
				y.play(answer(ms(300), fmt.Sprint("w", i), 200, nil))
			}
			got, _ = y.grants(ms(300), tt.ask, "x", Request{})
			require.Zero(t, got, "granted once the answers (without headers) are in")
		})
	}
}

// TestLateAnswers: answers to requests in flight together arrive in any
// order; the least remaining is the last counted, and an older, larger
// remaining does not inflate the budget.
func TestLateAnswers(t *testing.T) {
	t.Run("an answer counted before the base does not inflate it", func(t *testing.T) {
		// b and c leave together; the server counts b (9 left), then c (8
		// left), but c's answer arrives first: it is the base. b's late 9
		// is older: 8 are left, none in flight.
		y := answered(t, nil, ietf(20, 60, 10, 60))
		y.play(
			send(ms(200), "b"),
			send(ms(200), "c"),
			answer(ms(300), "c", 200, ietf(20, 60, 8, 60)),
			answer(ms(400), "b", 200, ietf(20, 60, 9, 60)),
		)
		got, last := y.grants(ms(500), 20, "x", Request{})
		require.Equal(t, 8, got)
		require.Equal(t, WhyQuota, last.Why)
	})
	t.Run("answers in the order counted", func(t *testing.T) {
		// The same two, answered in the order the server counted them:
		// the 9 with c in flight leaves 8, then c's 8.
		y := answered(t, nil, ietf(20, 60, 10, 60))
		y.play(
			send(ms(200), "b"),
			send(ms(200), "c"),
			answer(ms(300), "b", 200, ietf(20, 60, 9, 60)),
			answer(ms(400), "c", 200, ietf(20, 60, 8, 60)),
		)
		got, _ := y.grants(ms(500), 20, "x", Request{})
		require.Equal(t, 8, got)
	})
	t.Run("a late answer while others are still in flight", func(t *testing.T) {
		// b, c, d leave together and are counted b (9), c (8), d (7).
		// d's answer comes first (7 left, b and c in flight: 5 sure),
		// then b's older 9: b was counted before d, so it is no longer
		// in flight and 6 are sure; then c's 8: 7.
		y := answered(t, nil, ietf(20, 60, 10, 60))
		y.play(
			send(ms(200), "b"),
			send(ms(200), "c"),
			send(ms(200), "d"),
			answer(ms(300), "d", 200, ietf(20, 60, 7, 60)),
		)
		require.Equal(t, 5, clone(y).grantsAt(ms(310)))
		y.play(answer(ms(320), "b", 200, ietf(20, 60, 9, 60)))
		require.Equal(t, 6, clone(y).grantsAt(ms(330)))
		y.play(answer(ms(340), "c", 200, ietf(20, 60, 8, 60)))
		require.Equal(t, 7, clone(y).grantsAt(ms(350)))
	})
	orders := [][]int{
		{0, 1, 2, 3, 4},
		{4, 3, 2, 1, 0},
		{2, 4, 0, 3, 1},
		{1, 3, 4, 0, 2},
		{3, 0, 4, 1, 2},
	}
	for _, order := range orders {
		t.Run(fmt.Sprintf("five in flight together, answered in order %v", order), func(t *testing.T) {
			// The server counts the five in the order they were sent: the
			// i-th found 19-i left. Their answers arrive scrambled; once
			// all are in, exactly 15 are left.
			y := answered(t, nil, ietf(20, 60, 20, 60))
			got, _ := y.grants(ms(200), 5, "w", Request{})
			require.Equal(t, 5, got)
			for k, i := range order {
				y.play(answer(ms(300+10*k), fmt.Sprint("w", i), 200, ietf(20, 60, 19-i, 60)))
			}
			require.Empty(t, y.st.Leases)
			got, last := y.grants(ms(400), 20, "x", Request{})
			require.Equal(t, 15, got)
			require.Equal(t, WhyQuota, last.Why)
			require.Equal(t, t0.Add(ms(100)+sec(60)), last.At)
		})
	}
}

// ---------------------------------------------------------------------------
// 4-5. Exhausted quotas: windows and refills.

func modelIs(m Model) func(t *testing.T, s *State, now time.Time) {
	return func(t *testing.T, s *State, now time.Time) {
		t.Helper()
		require.Len(t, s.Policies, 1)
		require.Equal(t, m, s.Policies[0].Model, "model")
	}
}

// refillWithin checks the only policy is a refill at a rate within [lo, hi].
func refillWithin(lo, hi float64) func(t *testing.T, s *State, now time.Time) {
	return func(t *testing.T, s *State, now time.Time) {
		t.Helper()
		require.Len(t, s.Policies, 1)
		p := s.Policies[0]
		require.Equal(t, ModelRefill, p.Model)
		require.GreaterOrEqual(t, p.Refill, lo)
		require.LessOrEqual(t, p.Refill, hi)
	}
}

// waitsOneUnit checks that a request asking now waits, for the refill, until
// one unit at the measured rate has returned since t0+base.
func waitsOneUnit(base time.Duration) func(t *testing.T, s *State, now time.Time) {
	return func(t *testing.T, s *State, now time.Time) {
		t.Helper()
		c := s.Clone()
		d := c.Reserve(now, Request{}, nil)
		require.False(t, d.OK)
		require.Equal(t, WhyRefill, d.Why, d.Detail)
		require.True(t, d.Definite)
		unit := time.Duration(float64(time.Second) / s.Policies[0].rate()) // the measured rate, less its margin
		require.WithinDuration(t, t0.Add(base+unit), d.At, time.Millisecond)
	}
}

// TestExhaustedQuota: an exhausted quota waits for its reset; there, one
// request goes first and its answer decides the model.
func TestExhaustedQuota(t *testing.T) {
	// A window of 3 per 10s: the first answer (at +100ms) says 2 left,
	// resetting in 10s: at +10.1s at the latest.
	q3 := func(r int) http.Header { return ietf(3, 10, r, 10) }
	exhaust := []step{
		first(0, "a"),
		answer(ms(100), "a", 200, q3(2)),
		send(ms(200), "b"),
		send(ms(200), "c"),
		wait(ms(200), WhyQuota, ms(10100), true),
		answer(ms(300), "b", 200, q3(1)),
		answer(ms(300), "c", 200, q3(0)),
		wait(ms(300), WhyQuota, ms(10100), true),
		wait(sec(5), WhyQuota, ms(10100), true),
		wait(ms(10099), WhyQuota, ms(10100), true),
		check(ms(10099), modelIs(ModelUnknown)),
	}
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "the whole quota back: a window; the next reset releases it whole at once",
		steps: slices.Concat(exhaust, []step{
			goesFirst(ms(10100), "d"),
			waitsForAnswer(ms(10100)),
			waitsForAnswer(ms(10150)),
			answer(ms(10200), "d", 200, q3(2)),
			check(ms(10200), modelIs(ModelWindow)),
			send(ms(10200), "e"),
			send(ms(10200), "f"),
			wait(ms(10200), WhyQuota, ms(20200), true), // d's reset: +10.2s + 10s
			answer(ms(10300), "e", 200, q3(1)),
			answer(ms(10300), "f", 200, q3(0)),
			wait(ms(15000), WhyQuota, ms(20200), true),
			// The next reset: the whole quota at once, no request first.
			send(ms(20200), "g"),
			send(ms(20200), "h"),
			send(ms(20200), "i"),
			wait(ms(20200), WhyQuota, ms(30200), true), // a window later
		}),
	}, {
		name: "part of the quota back: a refill, paced at its rate",
		steps: slices.Concat(exhaust, []step{
			goesFirst(ms(10100), "d"),
			waitsForAnswer(ms(10100)),
			answer(ms(10200), "d", 200, q3(0)), // 0 + d < 3-1
			check(ms(10200), modelIs(ModelRefill)),
			// The level rose by one (d's) in the 9.9s since the answer
			// that found 0: a measured 0.101/s, blended with the quota's
			// average, 0.3/s; one unit returns every 1/rate from the
			// answer that found 0.
			check(ms(10200), refillWithin(0.1, 0.3)),
			check(ms(10200), waitsOneUnit(ms(10200))),
			check(ms(12000), waitsOneUnit(ms(10200))),
			// d's answer said the quota resets in 10s: at +20.2s only
			// what refilled goes, not the whole quota.
			check(ms(20200), func(t *testing.T, s *State, now time.Time) {
				want := int(math.Floor(s.Policies[0].rate() * 10))
				require.Less(t, want, 3)
				c := &story{t: t, st: s.Clone(), leases: map[string]Lease{}}
				require.Equal(t, want, c.grantsAt(ms(20200)))
			}),
		}),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newStory(t, nil).play(tt.steps...)
		})
	}
}

// TestRefusalAtReset: a 429 to the request that went first at a reset says
// the reset came too early (the server's window had not rolled), not what
// it brings back: the key pauses as the server asks, and the next request
// after the pause goes first.
func TestRefusalAtReset(t *testing.T) {
	q3 := func(r int) http.Header { return ietf(3, 10, r, 10) }
	newStory(t, nil).play(
		first(0, "a"),
		answer(ms(100), "a", 200, q3(2)),
		send(ms(200), "b"),
		send(ms(200), "c"),
		answer(ms(300), "b", 200, q3(1)),
		answer(ms(300), "c", 200, q3(0)),
		goesFirst(ms(10100), "d"),
		answer(ms(10200), "d", 429, with(q3(0), "Retry-After", "2")),
		wait(ms(10200), WhyPaused, ms(12200), true),
		first(ms(12200), "e"),
		wait(ms(12200), WhyProbe, ms(12200)+pollStep, false),
		answer(ms(12300), "e", 200, q3(2)),
		check(ms(12300), modelIs(ModelWindow)),
		send(ms(12300), "f"),
		send(ms(12300), "g"),
		wait(ms(12300), WhyQuota, ms(22300), true),
	)
}

// TestProbeAfterReset: the request that goes first at the reset of a quota
// whose model is unknown is a probe (Lease.Probe: "the first after a pause
// or a reset"), and the rest wait for its answer (WhyProbe: "after a pause
// or a reset, one request went first and the rest wait for what it says").
func TestProbeAfterReset(t *testing.T) {
	newStory(t, nil).play(
		first(0, "a"),
		answer(ms(100), "a", 200, ietf(1, 10, 0, 10)),
		wait(ms(200), WhyQuota, ms(10100), true),
		first(ms(10100), "b"),
		wait(ms(10100), WhyProbe, ms(10100)+pollStep, false),
		answer(ms(10200), "b", 200, ietf(1, 10, 0, 10)),
		check(ms(10200), modelIs(ModelWindow)),
	)
}

// TestDateDerivedResets: with the server's Date, a reset in whole seconds is
// the Date plus the reset (its windows are aligned to its clock), much
// sharper than the arrival plus the reset. The first such reset lets one
// request go first; once its answer confirmed it (the whole quota back),
// the next resets release the whole quota at once.
func TestDateDerivedResets(t *testing.T) {
	q3 := func(r int) http.Header { return ietf(3, 10, r, 10) }
	dated := func(at time.Duration, name string, r int) step {
		return answerDated(at, name, 200, q3(r), t0.Add(at).Truncate(time.Second))
	}
	m := dateMargin
	newStory(t, nil).play(
		first(0, "a"),
		dated(ms(100), "a", 2), // Date 12:00:00 + 10s: the reset at +10s (+margin), not +10.1s
		send(ms(200), "b"),
		send(ms(200), "c"),
		dated(ms(300), "b", 1),
		dated(ms(300), "c", 0),
		wait(ms(300), WhyQuota, sec(10)+m, true),
		goesFirst(sec(10)+m, "d"),
		waitsForAnswer(sec(10)+m),
		dated(ms(10100), "d", 2), // confirmed: the whole quota came back
		check(ms(10100), modelIs(ModelWindow)),
		check(ms(10100), func(t *testing.T, s *State, now time.Time) {
			require.True(t, s.Policies[0].DateTrusted)
		}),
		send(ms(10100), "e"),
		send(ms(10100), "f"),
		wait(ms(10100), WhyQuota, sec(20)+m, true),
		dated(ms(10200), "e", 1),
		dated(ms(10200), "f", 0),
		// The next reset: the whole quota at once.
		send(sec(20)+m, "g"),
		send(sec(20)+m, "h"),
		send(sec(20)+m, "i"),
		wait(sec(20)+m, WhyQuota, sec(30)+m, true),
	)
}

// TestDateDerivedResetNotTrustedYet: a quota known to be a window, whose
// first reset derived from the server's Date comes: one request goes first,
// since the Date's alignment is not confirmed; once it is, whole.
func TestDateDerivedResetNotTrustedYet(t *testing.T) {
	q2 := func(r int) http.Header { return ietf(2, 10, r, 10) }
	newStory(t, nil).play(
		first(0, "a"),
		answer(ms(100), "a", 200, q2(1)),
		send(ms(100), "b"),
		answer(ms(200), "b", 200, q2(0)),
		wait(ms(200), WhyQuota, ms(10100), true),
		goesFirst(ms(10100), "c"),
		waitsForAnswer(ms(10100)),
		answer(ms(10200), "c", 200, q2(1)),
		check(ms(10200), modelIs(ModelWindow)),
		// From now on the answers carry a Date: the reset is +20s, from it.
		send(ms(10200), "d"),
		answerDated(ms(10300), "d", 200, q2(0), t0.Add(sec(10))),
		wait(ms(10300), WhyQuota, sec(20)+dateMargin, true),
		goesFirst(sec(20)+dateMargin, "e"),
		waitsForAnswer(sec(20)+dateMargin),
		answerDated(ms(20100), "e", 200, q2(1), t0.Add(sec(20))),
		send(ms(20100), "f"),
		answerDated(ms(20200), "f", 200, q2(0), t0.Add(sec(20))),
		wait(ms(20200), WhyQuota, sec(30)+dateMargin, true),
		send(sec(30)+dateMargin, "g"),
		send(sec(30)+dateMargin, "h"),
		wait(sec(30)+dateMargin, WhyQuota, sec(40)+dateMargin, true),
	)
}

// ---------------------------------------------------------------------------
// 6. Refusals pause the key.

// TestPause: a 429, or a 503 with Retry-After, pauses the key; after the
// pause one request goes first.
func TestPause(t *testing.T) {
	// The first answer, at +100ms, leaves 2; b and c take them at +200ms,
	// and the server refuses b (its window's phase was not what the model
	// thought) and tells when to come back.
	base := ietf(100, 60, 2, 60)
	spend := []step{send(ms(200), "b"), send(ms(200), "c")}
	poll := pollStep
	tests := []struct {
		name  string
		cfg   *Config
		base  http.Header // instead of base
		steps []step
	}{{
		name: "a 429 with Retry-After pauses until it; then one goes first, the rest wait for its answer",
		steps: []step{
			answer(ms(300), "b", 429, with(ietf(100, 60, 0, 30), "Retry-After", "30")),
			wait(ms(300), WhyPaused, ms(30300), true),
			wait(sec(10), WhyPaused, ms(30300), true),
			// c, in flight meanwhile, is refused too: its Retry-After
			// counts from its own answer.
			answer(ms(400), "c", 429, with(ietf(100, 60, 0, 30), "Retry-After", "30")),
			wait(ms(400), WhyPaused, ms(30400), true),
			wait(ms(30399), WhyPaused, ms(30400), true),
			first(ms(30400), "d"),
			wait(ms(30400), WhyProbe, ms(30400)+poll, false),
			wait(ms(30410), WhyProbe, ms(30410)+poll, false),
			answer(ms(30500), "d", 200, ietf(100, 60, 99, 60)),
			send(ms(30500), "e"),
			send(ms(30500), "f"),
			send(ms(30500), "g"),
		},
	}, {
		name: "a Retry-After as an HTTP-date pauses until it",
		steps: []step{
			answer(ms(300), "b", 429, with(ietf(100, 60, 0, 30), "Retry-After", t0.Add(sec(31)).Format(http.TimeFormat))),
			wait(ms(300), WhyPaused, sec(31), true),
			answer(ms(400), "c", 200, ietf(100, 60, 0, 30)),
			wait(ms(400), WhyPaused, sec(31), true),
			first(sec(31), "d"),
			wait(sec(31), WhyProbe, sec(31)+poll, false),
		},
	}, {
		name: "an absurd Retry-After is bounded by DefaultMaxPause",
		steps: []step{
			answer(ms(300), "b", 429, with(ietf(100, 60, 0, 30), "Retry-After", "99999999999")),
			wait(ms(300), WhyPaused, ms(300)+DefaultMaxPause, true),
			answer(ms(400), "c", 200, ietf(100, 60, 0, 30)),
			wait(ms(400), WhyPaused, ms(300)+DefaultMaxPause, true),
			first(ms(300)+DefaultMaxPause, "d"),
		},
	}, {
		name: "an absurd Retry-After is bounded by Config.MaxPause",
		cfg:  &Config{MaxPause: time.Hour},
		steps: []step{
			answer(ms(300), "b", 429, with(ietf(100, 60, 0, 30), "Retry-After", "99999999999")),
			wait(ms(300), WhyPaused, ms(300)+time.Hour, true),
			first(ms(300)+time.Hour, "d"),
		},
	}, {
		name: "a 429 without Retry-After, its policy exhausted, pauses until the reset",
		steps: []step{
			answer(ms(300), "b", 429, ietf(100, 60, 0, 20)),
			wait(ms(300), WhyPaused, ms(20300), true),
			answer(ms(400), "c", 200, ietf(100, 60, 0, 20)),
			wait(ms(400), WhyPaused, ms(20300), true),
			first(ms(20300), "d"),
			wait(ms(20300), WhyProbe, ms(20300)+poll, false),
			answer(ms(20400), "d", 200, ietf(100, 60, 99, 60)),
			send(ms(20400), "e"),
			send(ms(20400), "f"),
		},
	}, {
		name: "a 429 with a Retry-After in the past and an exhausted policy pauses until the reset",
		steps: []step{
			answer(ms(300), "b", 429, with(ietf(100, 60, 0, 20), "Retry-After", t0.Add(-time.Hour).Format(http.TimeFormat))),
			wait(ms(300), WhyPaused, ms(20300), true),
		},
	}, {
		name: "a 503 with Retry-After pauses too",
		base: ietf(100, 60, 50, 60),
		steps: []step{
			answer(ms(300), "b", 503, with(ietf(100, 60, 49, 60), "Retry-After", "10")),
			wait(ms(300), WhyPaused, ms(10300), true),
			answer(ms(400), "c", 200, ietf(100, 60, 48, 60)),
			first(ms(10300), "d"),
			wait(ms(10300), WhyProbe, ms(10300)+poll, false),
		},
	}, {
		name: "a 503 without Retry-After does not pause",
		base: ietf(100, 60, 50, 60),
		steps: []step{
			answer(ms(300), "b", 503, ietf(100, 60, 49, 60)),
			send(ms(300), "d"),
			send(ms(300), "e"),
		},
	}, {
		name: "a 503 without Retry-After, its policy exhausted, does not pause: the quota holds",
		base: ietf(100, 60, 50, 60),
		steps: []step{
			answer(ms(300), "b", 503, ietf(100, 60, 0, 20)),
			wait(ms(300), WhyQuota, ms(20300), true),
		},
	}, {
		name: "a 503 without any header does not pause",
		base: ietf(100, 60, 50, 60),
		steps: []step{
			answer(ms(300), "b", 503, nil),
			answer(ms(300), "c", 200, ietf(100, 60, 48, 60)),
			send(ms(300), "d"),
			send(ms(300), "e"),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := base
			if tt.base != nil {
				b = tt.base
			}
			answered(t, tt.cfg, b).play(slices.Concat(spend, tt.steps)...)
		})
	}
}

// TestPauseSecondaryLimit: a 429 with Retry-After whose policy still has
// room (GitHub's secondary limits, a concurrency limit) pauses the key for
// the Retry-After, not until the policy's reset.
func TestPauseSecondaryLimit(t *testing.T) {
	answered(t, nil, ietf(100, 60, 50, 60)).play(
		send(ms(200), "b"),
		answer(ms(300), "b", 429, with(ietf(100, 60, 40, 50), "Retry-After", "5")),
		wait(ms(300), WhyPaused, ms(5300), true),
		first(ms(5300), "c"),
		wait(ms(5300), WhyProbe, ms(5300)+pollStep, false),
		answer(ms(5400), "c", 200, ietf(100, 60, 39, 45)),
		send(ms(5400), "d"),
		send(ms(5400), "e"),
	)
}

// TestPauseRetryAfterOnlyOnHeaderKey: a server that describes its quota on
// every 200 but sends only Retry-After on its 429 (express-rate-limit's
// stacked limiters, many gateways) is paused, not held until the quota's
// reset nor paced by the adaptive rate meant for servers that send no
// rate-limit headers.
func TestPauseRetryAfterOnlyOnHeaderKey(t *testing.T) {
	answered(t, nil, ietf(100, 60, 50, 60)).play(
		send(ms(200), "b"),
		answer(ms(300), "b", 429, hdr("Retry-After", "5")),
		wait(ms(300), WhyPaused, ms(5300), true),
		first(ms(5300), "c"),
		answer(ms(5400), "c", 200, ietf(100, 60, 49, 55)),
		send(ms(5400), "d"),
		send(ms(5400), "e"),
		send(ms(5400), "f"),
	)
}

// TestPauseOthersSpending: a 429 that finds the quota spent although the
// model said 49 were left teaches that others spend it (Policy.Foreign);
// the request that goes first at the end of the pause still goes at once,
// although what is kept back for others leaves less than one unit.
func TestPauseOthersSpending(t *testing.T) {
	answered(t, nil, ietf(100, 60, 50, 60)).play(
		send(ms(200), "b"),
		answer(ms(300), "b", 429, ietf(100, 60, 0, 20)),
		wait(ms(300), WhyPaused, ms(20300), true),
		first(ms(20300), "c"),
		wait(ms(20300), WhyProbe, ms(20300)+pollStep, false),
	)
}

// ---------------------------------------------------------------------------
// 7. Without headers: unlimited until the first 429, then adaptive.

// TestAdaptiveWithoutHeaders: a server without headers is unlimited until
// its first 429; then the adaptive rate spaces requests, cut once by a
// burst of 429s, and grows back.
func TestAdaptiveWithoutHeaders(t *testing.T) {
	y := newStory(t, nil)
	y.play(first(0, "a"), answer(ms(50), "a", 200, nil))
	got, _ := y.grants(ms(100), 100, "w", Request{})
	require.Equal(t, 100, got, "unlimited until the first 429")
	require.False(t, y.st.Adaptive.On)

	// The first 429, without headers: the rate applies, at 0.7 of the
	// rate at which the server refused (CUBIC's beta).
	y.play(answer(ms(200), "w0", 429, nil))
	ad := y.st.Adaptive
	require.True(t, ad.On)
	now := t0.Add(ms(200))
	r0 := ad.Rate(now)
	require.InDelta(t, cubicBeta*ad.Max, r0, 1e-9)
	require.GreaterOrEqual(t, r0, minRate)
	unit := time.Duration(math.Ceil(float64(time.Second) / r0))
	y.play(
		send(ms(200), "x"), // the refused request's retry
		wait(ms(200), WhyAdaptive, ms(200)+unit, true),
	)

	// The rest of the burst, sent before the first 429, is refused too:
	// it says nothing of the rate since, and cuts nothing more.
	for i := 1; i < 60; i++ {
		y.play(answer(ms(210+i), fmt.Sprint("w", i), 429, nil))
		require.Equal(t, ad.Max, y.st.Adaptive.Max, "429 %d of a burst cut the rate again", i)
		require.Equal(t, ad.Throttled, y.st.Adaptive.Throttled)
	}
	// The rate has grown a little since: the wait is no longer.
	y.play(check(ms(300), func(t *testing.T, s *State, now time.Time) {
		c := s.Clone()
		d := c.Reserve(now, Request{}, nil)
		require.False(t, d.OK)
		require.Equal(t, WhyAdaptive, d.Why)
		require.True(t, d.Definite)
		require.True(t, d.At.After(now))
		require.False(t, d.At.After(t0.Add(ms(200)+unit)), "at +%v", d.At.Sub(t0))
	}))

	// The rate grows back over time, along the cubic, past where it was
	// cut.
	r1, r5, r20 := ad.Rate(now.Add(sec(1))), ad.Rate(now.Add(sec(5))), ad.Rate(now.Add(sec(20)))
	require.Greater(t, r1, r0)
	require.Greater(t, r5, r1)
	require.Greater(t, r20, ad.Max)

	// Asking without pause for 20s: the grants follow the rate, closer
	// and closer.
	var sends []time.Duration
	at := ms(200) + unit
	for at < sec(20) {
		d := y.st.Reserve(t0.Add(at), Request{}, nil)
		if d.OK {
			sends = append(sends, at)
			y.play(answer(at, "answer-now", 200, nil).named(d.Lease, y))
			continue
		}
		require.Equal(t, WhyAdaptive, d.Why, d.Detail)
		require.True(t, d.At.After(t0.Add(at)))
		at = d.At.Sub(t0)
	}
	first5, last5 := 0, 0
	for _, s := range sends {
		if s < sec(5) {
			first5++
		}
		if s >= sec(15) {
			last5++
		}
	}
	require.Greater(t, last5, first5, "the rate grew back (%d sends in the first 5s, %d in the last)", first5, last5)
}

// TestAdaptiveCutsAgain: a 429 to a request sent after the last 429 cuts
// the rate again.
func TestAdaptiveCutsAgain(t *testing.T) {
	y := newStory(t, nil)
	y.play(first(0, "a"), answer(ms(50), "a", 200, nil))
	y.grants(ms(100), 10, "w", Request{})
	y.play(answer(ms(200), "w0", 429, nil))
	before := y.st.Adaptive
	y.play(
		send(sec(5), "b"),
		answer(ms(5100), "b", 429, nil),
	)
	after := y.st.Adaptive
	require.Equal(t, t0.Add(ms(5100)), after.Throttled)
	require.Less(t, after.Max, before.Rate(t0.Add(ms(5100)))+1e-9, "the new W_max is at most the rate when refused")
	require.Less(t, after.Rate(t0.Add(ms(5100))), before.Rate(t0.Add(ms(5100))))
}

// TestAdaptiveFirst429WithRetryAfter: a server that sends only Retry-After
// pauses the key for it, and its first 429 sets the rate from what it
// accepted until then and the wait it asked for.
func TestAdaptiveFirst429WithRetryAfter(t *testing.T) {
	y := newStory(t, nil)
	y.play(first(0, "a"), answer(ms(50), "a", 200, nil))
	got, _ := y.grants(ms(100), 9, "w", Request{})
	require.Equal(t, 9, got)
	for i := range 5 {
		y.play(answer(ms(150), fmt.Sprint("w", i), 200, nil))
	}
	y.play(
		answer(ms(200), "w5", 429, hdr("Retry-After", "2")),
		wait(ms(200), WhyPaused, ms(2200), true),
	)
	ad := y.st.Adaptive
	require.True(t, ad.On)
	// 6 accepted, from the first send (t0) to the 429 (+200ms) plus the
	// 2s asked for: 6/2.2s, the plateau the rate starts on.
	require.InDelta(t, 6/2.2, ad.Max, 1e-9)
	require.InDelta(t, 6/2.2, ad.Rate(t0.Add(ms(200))), 1e-6)
	y.play(
		answer(ms(210), "w6", 200, nil),
		answer(ms(210), "w7", 200, nil),
		answer(ms(210), "w8", 200, nil),
		wait(ms(2199), WhyPaused, ms(2200), true),
		first(ms(2200), "b"),
	)
	// The rest wait for its answer, and for the rate: Why says the one
	// that is definite.
	unit := time.Duration(math.Ceil(1e9 / y.st.Adaptive.Rate(t0.Add(ms(2200)))))
	y.play(
		wait(ms(2200), WhyAdaptive, ms(2200)+unit, true),
		answer(ms(2300), "b", 200, nil),
	)
	// Then spaced at the rate: b took the token of +2.2s.
	got, d := y.grants(ms(2300), 10, "x", Request{})
	require.Zero(t, got)
	require.Equal(t, WhyAdaptive, d.Why)
	got, d = y.grants(d.At.Sub(t0), 10, "y", Request{})
	require.Equal(t, 1, got)
	require.Equal(t, WhyAdaptive, d.Why)
}

// TestAdaptiveBurstAfterRetryAfterCutsOnce: the rest of a burst refused
// with the first 429 (sent before it) cuts nothing more, when the first
// 429 had a Retry-After too.
func TestAdaptiveBurstAfterRetryAfterCutsOnce(t *testing.T) {
	y := newStory(t, nil)
	y.play(first(0, "a"), answer(ms(50), "a", 200, nil))
	y.grants(ms(100), 9, "w", Request{})
	for i := range 5 {
		y.play(answer(ms(150), fmt.Sprint("w", i), 200, nil))
	}
	y.play(answer(ms(200), "w5", 429, hdr("Retry-After", "2")))
	now := t0.Add(ms(220))
	r := y.st.Adaptive.Rate(now)
	for i := 6; i < 9; i++ {
		y.play(answer(ms(210), fmt.Sprint("w", i), 429, hdr("Retry-After", "2")))
		require.InDelta(t, r, y.st.Adaptive.Rate(now), 1e-9, "429 of w%d", i)
	}
}

// ---------------------------------------------------------------------------
// 8. Declared quotas.

// TestDeclaredQuotas: Config.Quotas hold for the requests that name them.
func TestDeclaredQuotas(t *testing.T) {
	cfg := &Config{Quotas: []Quota{
		{Limit: 5, Window: time.Second},            // 0
		{Limit: 10, Window: time.Second, Burst: 2}, // 1: 2 at once, then one per 100ms
		{Limit: 1, Window: time.Minute},            // 2
	}}
	q0 := Request{Quotas: []int{0}}
	q1 := Request{Quotas: []int{1}}
	q2 := Request{Quotas: []int{2}}
	both := Request{Quotas: []int{0, 1}}
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "at most Limit in any Window, whatever its phase",
		steps: []step{
			send(ms(200), "a").asking(q0),
			send(ms(200), "b").asking(q0),
			send(ms(200), "c").asking(q0),
			send(ms(700), "d").asking(q0),
			send(ms(700), "e").asking(q0),
			wait(ms(700), WhyDeclared, ms(1200), true).asking(q0),
			wait(ms(1199), WhyDeclared, ms(1200), true).asking(q0),
			send(ms(1200), "f").asking(q0),
			send(ms(1200), "g").asking(q0),
			send(ms(1200), "h").asking(q0),
			wait(ms(1200), WhyDeclared, ms(1700), true).asking(q0),
			send(ms(1700), "i").asking(q0),
			send(ms(1700), "j").asking(q0),
			wait(ms(1700), WhyDeclared, ms(2200), true).asking(q0),
		},
	}, {
		name: "a burst, then spaced at Limit per Window",
		steps: []step{
			send(ms(200), "a").asking(q1),
			send(ms(200), "b").asking(q1),
			wait(ms(200), WhyDeclared, ms(300), true).asking(q1),
			wait(ms(250), WhyDeclared, ms(300), true).asking(q1),
			send(ms(300), "c").asking(q1),
			wait(ms(300), WhyDeclared, ms(400), true).asking(q1),
			send(ms(400), "d").asking(q1),
			// Idle for a second: the burst is back, not more.
			send(ms(1400), "e").asking(q1),
			send(ms(1400), "f").asking(q1),
			wait(ms(1400), WhyDeclared, ms(1500), true).asking(q1),
		},
	}, {
		name: "the tightest of the quotas a request names",
		steps: []step{
			send(ms(200), "a").asking(both),
			send(ms(200), "b").asking(both),
			wait(ms(200), WhyDeclared, ms(300), true).asking(both),
			send(ms(300), "c").asking(both),
			send(ms(400), "d").asking(both),
			send(ms(500), "e").asking(both),
			wait(ms(500), WhyDeclared, ms(1200), true).asking(both), // 5 per second
			send(ms(600), "f").asking(q1),                           // 1's own pace allows it
		},
	}, {
		name: "quotas apply only to requests that name them",
		steps: []step{
			send(ms(200), "a").asking(q2),
			wait(ms(200), WhyDeclared, ms(200)+time.Minute, true).asking(q2),
			send(ms(200), "b"),
			send(ms(200), "c").asking(q0),
			send(ms(200), "d").asking(q1),
			wait(sec(30), WhyDeclared, ms(200)+time.Minute, true).asking(q2),
			send(ms(200)+time.Minute, "e").asking(q2),
		},
	}, {
		name: "a quota index that is not declared is ignored",
		steps: []step{
			send(ms(200), "a").asking(Request{Quotas: []int{7, -1}}),
			send(ms(200), "b").asking(Request{Quotas: []int{7, -1}}),
		},
	}, {
		name: "a cancelled request gives its place back",
		steps: []step{
			send(ms(200), "a").asking(q2),
			wait(ms(200), WhyDeclared, ms(200)+time.Minute, true).asking(q2),
			cancel(ms(300), "a"),
			send(ms(300), "b").asking(q2),
			wait(ms(300), WhyDeclared, ms(300)+time.Minute, true).asking(q2),
		},
	}, {
		name: "an answer does not give its place back",
		steps: []step{
			send(ms(200), "a").asking(q2),
			answer(ms(300), "a", 200, nil),
			wait(ms(300), WhyDeclared, ms(200)+time.Minute, true).asking(q2),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answered(t, cfg, nil).play(tt.steps...)
		})
	}
}

// TestDeclaredQuotaBeforeAnyHeader: a declared quota holds from the first
// request, before the key answered.
func TestDeclaredQuotaBeforeAnyHeader(t *testing.T) {
	cfg := &Config{Quotas: []Quota{{Limit: 1, Window: time.Second}}}
	q := Request{Quotas: []int{0}}
	newStory(t, cfg).play(
		first(0, "a").asking(q),
		answer(ms(100), "a", 200, nil),
		wait(ms(100), WhyDeclared, sec(1), true).asking(q),
		send(sec(1), "b").asking(q),
	)
}

// ---------------------------------------------------------------------------
// 9. Costs.

// TestCosts: Request.Cost is drawn from the policies in its unit.
func TestCosts(t *testing.T) {
	tokens := func(n int64) Request { return Request{Cost: []Amount{{Unit: ratelimit.UnitTokens, N: n}}} }
	// 100 requests per second, 1000 tokens per minute.
	base := openAI(100, 99, "1s", 1000, 1000, "1m0s")
	reset := ms(100) + time.Minute
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "1000 tokens left admit a 600-token request, then make a second wait",
		steps: []step{
			send(ms(200), "a").asking(tokens(600)),
			wait(ms(200), WhyQuota, reset, true).asking(tokens(600)),
			send(ms(200), "b").asking(tokens(400)),
			wait(ms(200), WhyQuota, reset, true).asking(tokens(1)),
		},
	}, {
		name: "a request without a declared cost waits only when the tokens are exhausted",
		steps: []step{
			send(ms(200), "a").asking(tokens(999)),
			send(ms(200), "b"), // 1 token left: enough for an unknown cost
			send(ms(200), "c").asking(tokens(1)),
			wait(ms(200), WhyQuota, reset, true), // 0 left
		},
	}, {
		name: "the answers' tokens are the base; what is in flight counts against them",
		steps: []step{
			send(ms(200), "a").asking(tokens(600)),
			send(ms(200), "b").asking(tokens(300)),
			// a's answer: the server charged 600; b, in flight, 300 more.
			// Its reset, +59.3s, sharpens the bound.
			answer(ms(300), "a", 200, openAI(100, 98, "1s", 1000, 400, "59s")),
			send(ms(300), "c").asking(tokens(100)),
			wait(ms(300), WhyQuota, ms(59300), true).asking(tokens(1)),
			answer(ms(400), "b", 200, openAI(100, 97, "1s", 1000, 100, "59s")),
			wait(ms(400), WhyQuota, ms(59300), true).asking(tokens(1)),
			answer(ms(500), "c", 200, openAI(100, 96, "1s", 1000, 0, "59s")),
			wait(ms(500), WhyQuota, ms(59300), true),
		},
	}, {
		name: "the server says the tokens are exhausted: a request without a cost waits for their reset",
		steps: []step{
			send(ms(200), "a"),
			answer(ms(300), "a", 200, openAI(100, 98, "1s", 1000, 0, "30s")),
			wait(ms(300), WhyQuota, ms(30300), true),
			wait(ms(300), WhyQuota, ms(30300), true).asking(tokens(10)),
		},
	}, {
		name: "costs in a unit no policy counts are free",
		steps: []step{
			send(ms(200), "a").asking(Request{Cost: []Amount{{Unit: ratelimit.UnitContentBytes, N: 1 << 40}}}),
			send(ms(200), "b").asking(Request{Cost: []Amount{{Unit: ratelimit.UnitContentBytes, N: 1 << 40}}}),
		},
	}, {
		name: "a cost larger than the whole quota waits for the reset, not forever",
		steps: []step{
			wait(ms(200), WhyQuota, reset, true).asking(tokens(5000)),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answered(t, nil, base).play(tt.steps...)
		})
	}
}

// ---------------------------------------------------------------------------
// 10. Cancel and expired leases.

// TestCancel: a cancelled lease's request never left: its unit comes back.
func TestCancel(t *testing.T) {
	base := ietf(100, 60, 2, 60) // 2 left at +100ms, until +60.1s
	reset := ms(60100)
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "a cancelled lease gives its unit back",
		steps: []step{
			send(ms(200), "a"),
			send(ms(200), "b"),
			wait(ms(200), WhyQuota, reset, true),
			cancel(ms(210), "a"),
			send(ms(210), "c"),
			wait(ms(210), WhyQuota, reset, true),
		},
	}, {
		name: "cancelling twice gives it back once",
		steps: []step{
			send(ms(200), "a"),
			send(ms(200), "b"),
			cancel(ms(210), "a"),
			cancel(ms(210), "a"),
			send(ms(210), "c"),
			wait(ms(210), WhyQuota, reset, true),
		},
	}, {
		name: "cancelling an answered lease gives nothing back",
		steps: []step{
			send(ms(200), "a"),
			send(ms(200), "b"),
			answer(ms(300), "a", 200, ietf(100, 60, 1, 60)),
			cancel(ms(310), "a"),
			wait(ms(310), WhyQuota, reset, true),
		},
	}, {
		name: "a lost request (transport error) frees its lease but may have been counted",
		steps: []step{
			send(ms(200), "a"),
			send(ms(200), "b"),
			lost(ms(300), "a"),
			check(ms(300), func(t *testing.T, s *State, now time.Time) {
				require.Len(t, s.Leases, 1)
				require.Equal(t, uint64(3), s.Leases[0].Seq)
			}),
			wait(ms(310), WhyQuota, reset, true),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answered(t, nil, base).play(tt.steps...)
		})
	}
}

// TestCancelLeaseCountedInFlightByBase: a lease in flight when another's
// answer became the base was subtracted from that answer's remaining (the
// server may not have counted it yet); cancelled, the server never counts
// it: its unit comes back.
func TestCancelLeaseCountedInFlightByBase(t *testing.T) {
	y := answered(t, nil, ietf(100, 60, 3, 60))
	y.play(
		send(ms(200), "a"),
		send(ms(200), "b"),
		answer(ms(300), "a", 200, ietf(100, 60, 2, 60)),
		cancel(ms(310), "b"),
	)
	require.Equal(t, 2, y.grantsAt(ms(320)))
}

// TestCancelRefundsAdaptiveToken: a cancelled request gives its token of the
// adaptive rate back.
func TestCancelRefundsAdaptiveToken(t *testing.T) {
	y := newStory(t, nil)
	y.play(first(0, "a"), answer(ms(50), "a", 200, nil))
	y.grants(ms(100), 3, "w", Request{})
	y.play(answer(ms(200), "w0", 429, nil), send(ms(200), "b"))
	c := y.st.Clone()
	d := c.Reserve(t0.Add(ms(200)), Request{}, nil)
	require.Equal(t, WhyAdaptive, d.Why)
	y.play(cancel(ms(200), "b"), send(ms(200), "c"))
}

// TestLeaseTTL: a lease neither completed nor cancelled stops counting as
// in flight after Config.LeaseTTL (DefaultLeaseTTL).
func TestLeaseTTL(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  *Config
		ttl  time.Duration
	}{
		{"default", nil, DefaultLeaseTTL},
		{"Config.LeaseTTL", &Config{LeaseTTL: 5 * time.Second}, 5 * time.Second},
	} {
		t.Run(tt.name+": a first request never answered stops holding the rest", func(t *testing.T) {
			y := newStory(t, tt.cfg)
			y.play(first(0, "a"))
			require.Equal(t, t0.Add(tt.ttl), y.leases["a"].Expires)
			y.play(
				// Asks again a moment later: a's lease has expired by then.
				wait(tt.ttl-1, WhyFirstAnswer, tt.ttl-1+minStep, false),
				first(tt.ttl, "b"),
				wait(tt.ttl, WhyFirstAnswer, tt.ttl+pollStep, false),
				// a's answer, late, is taken in all the same.
				answer(tt.ttl+ms(1), "a", 200, ietf(100, 60, 98, 60)),
				send(tt.ttl+ms(1), "c"),
			)
			require.Len(t, y.st.Leases, 2) // b and c
		})
		t.Run(tt.name+": an expired lease no longer counts as in flight in an answer", func(t *testing.T) {
			y := answered(t, tt.cfg, ietf(100, 600, 50, 600))
			y.play(send(ms(200), "lost"))
			require.Len(t, y.st.Leases, 1)
			at := ms(200) + tt.ttl
			y.play(
				send(at, "b"),
				// b's answer says 48 left (lost and b were counted); lost is
				// no longer in flight: all 48 are sure.
				answer(at+ms(100), "b", 200, ietf(100, 600, 48, 500)),
			)
			require.Empty(t, y.st.Leases)
			require.Equal(t, 48, y.grantsAt(at+ms(200)))
		})
		t.Run(tt.name+": after a pause, a request gone first and never answered lets another go first", func(t *testing.T) {
			y := answered(t, tt.cfg, ietf(100, 60, 1, 60))
			y.play(
				send(ms(200), "a"),
				answer(ms(300), "a", 429, with(ietf(100, 60, 0, 5), "Retry-After", "5")),
				first(ms(5300), "b"),
				wait(ms(5300)+tt.ttl-1, WhyProbe, ms(5300)+tt.ttl-1+minStep, false),
				first(ms(5300)+tt.ttl, "c"),
			)
		})
	}
}

// ---------------------------------------------------------------------------
// 11. Server-named buckets.

// TestBuckets: a server-named bucket (GitHub's resource, Discord's bucket,
// an IETF pk) that is exhausted holds back only the routes learnt to be in
// it (State.Routes).
func TestBuckets(t *testing.T) {
	core, search := Request{Route: "GET /repos/o/r/issues"}, Request{Route: "GET /search/issues"}
	channel, guild := Request{Route: "POST /channels/1/messages"}, Request{Route: "GET /guilds/2"}
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "GitHub: search exhausted does not hold back core",
		steps: []step{
			first(0, "a").asking(core),
			answer(ms(100), "a", 200, github("core", 5000, 4999, t0.Add(time.Hour))),
			send(ms(200), "b").asking(search),
			answer(ms(300), "b", 200, github("search", 30, 0, t0.Add(sec(60)))),
			check(ms(300), func(t *testing.T, s *State, now time.Time) {
				b, ok := s.bucketOf(search.Route)
				require.True(t, ok)
				require.Equal(t, "search", b)
				b, ok = s.bucketOf(core.Route)
				require.True(t, ok)
				require.Equal(t, "core", b)
			}),
			wait(ms(400), WhyQuota, sec(60), true).asking(search),
			send(ms(400), "c").asking(core),
			send(ms(400), "d").asking(core),
			send(ms(400), "e").asking(Request{Route: "GET /user"}), // unknown: the key's first bucket
			wait(sec(59), WhyQuota, sec(60), true).asking(search),
		},
	}, {
		name: "GitHub: core exhausted does not hold back search",
		steps: []step{
			first(0, "a").asking(search),
			answer(ms(100), "a", 200, github("search", 30, 29, t0.Add(sec(60)))),
			send(ms(200), "b").asking(core),
			answer(ms(300), "b", 200, github("core", 5000, 0, t0.Add(time.Hour))),
			wait(ms(400), WhyQuota, time.Hour, true).asking(core),
			send(ms(400), "c").asking(search),
		},
	}, {
		name: "Discord: one bucket exhausted does not hold back another",
		steps: []step{
			first(0, "a").asking(guild),
			answer(ms(100), "a", 200, discord("guild-bucket", 5, 4, "2.5")),
			send(ms(200), "b").asking(channel),
			answer(ms(300), "b", 200, discord("channel-bucket", 5, 0, "2.5")),
			wait(ms(400), WhyQuota, ms(2800), true).asking(channel),
			// (b, granted before its route was known, counted against the
			// guild's 4: see TestBucketsAccountedApart.)
			send(ms(400), "c").asking(guild),
			send(ms(400), "d").asking(guild),
			send(ms(400), "e").asking(guild),
			wait(ms(400), WhyQuota, ms(2600), true).asking(guild),
			wait(ms(400), WhyQuota, ms(2800), true).asking(channel),
		},
	}, {
		name: "IETF partition keys are buckets too",
		steps: []step{
			first(0, "a").asking(core),
			answer(ms(100), "a", 200, hdr("RateLimit-Policy", `"default";q=10;w=10;pk=:Y29yZQ==:`,
				"RateLimit", `"default";r=9;t=10;pk=:Y29yZQ==:`)),
			send(ms(200), "b").asking(search),
			answer(ms(300), "b", 200, hdr("RateLimit-Policy", `"default";q=10;w=10;pk=:c2VhcmNo:`,
				"RateLimit", `"default";r=0;t=10;pk=:c2VhcmNo:`)),
			wait(ms(400), WhyQuota, ms(10300), true).asking(search),
			send(ms(400), "c").asking(core),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newStory(t, nil).play(tt.steps...)
		})
	}
}

// TestBucketsAccountedApart: requests counted in one server-named bucket
// do not spend another bucket's quota.
func TestBucketsAccountedApart(t *testing.T) {
	core, search := Request{Route: "GET /repos/o/r/issues"}, Request{Route: "GET /search/issues"}
	y := newStory(t, nil)
	y.play(
		first(0, "a").asking(core),
		answer(ms(100), "a", 200, github("core", 5000, 4995, t0.Add(time.Hour))),
		send(ms(200), "b").asking(search),
		answer(ms(300), "b", 200, github("search", 30, 2, t0.Add(sec(60)))),
	)
	for i := range 5 {
		name := fmt.Sprint("core", i)
		y.play(
			send(ms(400+10*i), name).asking(core),
			answer(ms(450+10*i), name, 200, github("core", 5000, 4994-i, t0.Add(time.Hour))),
		)
	}
	y.play(
		send(ms(500), "s1").asking(search),
		send(ms(500), "s2").asking(search),
		wait(ms(500), WhyQuota, sec(60), true).asking(search),
	)
}

// ---------------------------------------------------------------------------
// Against emulated servers (ratelimittest, on a manual clock): workers that
// always have a request to send, paced by one key's State, for a while.

// emulation is the outcome of a run.
type emulation struct {
	sends   []time.Duration // grants, since t0
	refused []time.Duration // 429s, by when they were sent
	whys    map[Why]int     // refusals of Reserve, by reason
}

// mostIn returns the most sends in any span of length w that starts at
// or after from.
func (e *emulation) mostIn(w, from time.Duration) int {
	most := 0
	for i, s := range e.sends {
		if s < from {
			continue
		}
		n := 0
		for _, u := range e.sends[i:] {
			if u >= s+w {
				break
			}
			n++
		}
		most = max(most, n)
	}
	return most
}

// emulate runs workers against a ratelimittest handler enforcing p and
// speaking dialect, for the given time: each request is counted by the
// server when it is sent and answered latency later. A worker refused by
// Reserve asks again at Decision.At, or as soon as an answer arrives.
func emulate(t *testing.T, p ratelimittest.Policy, dialect ratelimittest.Dialect, workers int, latency, span time.Duration) *emulation {
	t.Helper()
	clock := ratelimittest.NewManualClock(t0)
	h, err := ratelimittest.NewHandler(nil, ratelimittest.WithClock(clock),
		ratelimittest.WithPolicy(p), ratelimittest.WithDialect(dialect))
	require.NoError(t, err)
	type flight struct {
		lease  Lease
		status int
		header http.Header
		at     time.Time // the answer's arrival
		date   time.Time
	}
	var st State
	e := &emulation{whys: map[Why]int{}}
	ask := make([]time.Time, workers) // when an idle worker asks next
	fly := make([]*flight, workers)   // its request in flight, if any
	for i := range ask {
		ask[i] = t0
	}
	end := t0.Add(span)
	for steps := 0; ; steps++ {
		require.Less(t, steps, 1_000_000, "the emulation does not progress")
		// The next event: the earliest answer, else the earliest ask.
		w, at, isAnswer := -1, time.Time{}, false
		for i := range workers {
			if f := fly[i]; f != nil && (w < 0 || f.at.Before(at) || f.at.Equal(at) && !isAnswer) {
				w, at, isAnswer = i, f.at, true
			}
		}
		for i := range workers {
			if fly[i] == nil && (w < 0 || ask[i].Before(at)) {
				w, at, isAnswer = i, ask[i], false
			}
		}
		if at.After(end) {
			return e
		}
		if isAnswer {
			f := fly[w]
			fly[w] = nil
			st.Complete(at, f.lease, Answer{Obs: ratelimit.ParseHeaders(f.header, f.status, at), Date: f.date}, nil)
			if f.status == http.StatusTooManyRequests {
				e.refused = append(e.refused, f.lease.At.Sub(t0))
			}
			ask[w] = at
			for i := range workers {
				if fly[i] == nil && ask[i].After(at) {
					ask[i] = at // the state changed: ask again
				}
			}
			continue
		}
		d := st.Reserve(at, Request{}, nil)
		if !d.OK {
			require.True(t, d.At.After(at), "a refusal at %v to ask again at %v", at, d.At)
			e.whys[d.Why]++
			ask[w] = d.At
			continue
		}
		e.sends = append(e.sends, at.Sub(t0))
		clock.Set(at)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		date, _ := ratelimit.ParseDate(rec.Header().Get("Date"))
		fly[w] = &flight{lease: d.Lease, status: rec.Code, header: rec.Header(), at: at.Add(latency), date: date}
	}
}

// TestEmulatedServers: against servers that enforce their quota exactly
// (ratelimittest), pacing spends it without being refused.
func TestEmulatedServers(t *testing.T) {
	t.Run("token bucket: paced at its refill rate once its burst is spent, not bursted at its reset", func(t *testing.T) {
		// A burst of 10, refilling 5 per second; the IETF fields say
		// q=10, w=2 and, once spent, t = the time to refill it whole.
		e := emulate(t, ratelimittest.Policy{Algorithm: ratelimittest.TokenBucket, Limit: 5, Window: time.Second, Burst: 10},
			ratelimittest.IETF, 8, 50*time.Millisecond, 30*time.Second)
		t.Logf("%d sends, %d refused, waits %v, most in 1s after 5s: %d", len(e.sends), len(e.refused), e.whys, e.mostIn(time.Second, 5*time.Second))
		require.LessOrEqual(t, len(e.refused), 1, "refused: %v", e.refused)
		require.Positive(t, e.whys[WhyRefill], "paced to the refill")
		// 10 + 5/s for 30s at most; within 10% of it.
		require.LessOrEqual(t, len(e.sends), 10+150+1)
		require.GreaterOrEqual(t, len(e.sends), 10+135)
		// Never a burst once it is spent: 5 per second, and what the
		// bucket's granularity lets through (a reset's burst is 10).
		require.LessOrEqual(t, e.mostIn(time.Second, 5*time.Second), 7)
	})
	t.Run("token bucket with OpenAI's headers (resets: the time until full)", func(t *testing.T) {
		e := emulate(t, ratelimittest.Policy{Algorithm: ratelimittest.TokenBucket, Limit: 10, Window: time.Second},
			ratelimittest.OpenAI, 8, 50*time.Millisecond, 30*time.Second)
		t.Logf("%d sends, %d refused, waits %v", len(e.sends), len(e.refused), e.whys)
		require.LessOrEqual(t, len(e.refused), 1, "refused: %v", e.refused)
	})
	t.Run("sliding log with the IETF fields", func(t *testing.T) {
		e := emulate(t, ratelimittest.Policy{Algorithm: ratelimittest.SlidingLog, Limit: 10, Window: time.Second},
			ratelimittest.IETF, 8, 50*time.Millisecond, 30*time.Second)
		t.Logf("%d sends, %d refused, waits %v", len(e.sends), len(e.refused), e.whys)
		require.LessOrEqual(t, len(e.refused), 3, "refused: %v", e.refused)
	})
	t.Run("fixed window: the whole quota at each reset, nothing refused", func(t *testing.T) {
		e := emulate(t, ratelimittest.Policy{Algorithm: ratelimittest.FixedWindow, Limit: 10, Window: time.Second},
			ratelimittest.IETF, 16, 50*time.Millisecond, 30*time.Second)
		t.Logf("%d sends, %d refused, waits %v", len(e.sends), len(e.refused), e.whys)
		require.LessOrEqual(t, len(e.refused), 1, "refused: %v", e.refused)
		require.LessOrEqual(t, len(e.sends), 300)
		require.GreaterOrEqual(t, len(e.sends), 270)
	})
}

// ---------------------------------------------------------------------------
// 12. Robustness.

// maxWait bounds every wait: the longest pause, and a day (a daily quota's
// reset).
const maxWait = DefaultMaxPause + 24*time.Hour

// checkDecision checks what holds of every decision.
func checkDecision(t *testing.T, now time.Time, seq uint64, d Decision, s *State) {
	t.Helper()
	if d.OK {
		require.Equal(t, seq+1, d.Lease.Seq)
		require.Equal(t, d.Lease.Seq, s.Seq)
		require.Equal(t, now, d.Lease.At)
		require.True(t, d.Lease.Expires.After(now))
		return
	}
	require.Equal(t, seq, s.Seq, "a refusal granted a lease")
	require.NotZero(t, d.Why)
	require.True(t, d.At.After(now), "%v: ask again at %v, not after now %v (%s)", d.Why, d.At, now, d.Detail)
	require.LessOrEqual(t, d.At.Sub(now), maxWait, "%v: wait %v (%s)", d.Why, d.At.Sub(now), d.Detail)
}

// TestAbsurdNumbers: huge, zero, negative or garbage numbers never make a
// refusal ask again at or before now, nor wait longer than maxWait.
func TestAbsurdNumbers(t *testing.T) {
	huge := "99999999999999999999999"
	tests := []struct {
		name   string
		status int
		h      http.Header
		bug    string // what went wrong before it was fixed
	}{
		{"zero quota", 200, ietf(0, 0, 0, 0), ""},
		{"zero window", 200, ietf(10, 0, 0, 5), ""},
		{"zero reset", 200, ietf(10, 1, 0, 0), ""},
		{"remaining above the limit", 200, ietf(10, 1, 1<<40, 1), ""},
		{"huge remaining", 200, hdr("RateLimit-Policy", `"default";q=`+huge+`;w=1`, "RateLimit", `"default";r=`+huge+`;t=1`), ""},
		{"huge reset", 200, hdr("RateLimit-Policy", `"default";q=10;w=1`, "RateLimit", `"default";r=0;t=`+huge),
			"a policy's reset is not bounded: r=0 with t=99999999999999999999999 (clamped to ratelimit.MaxDuration, 100 years) makes Reserve wait WhyQuota 100 years"},
		{"far-future epoch reset", 200, hdr("X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "99999999999"),
			"a policy's reset is not bounded: X-RateLimit-Reset: 99999999999 (year 5138, clamped to ratelimit.MaxDuration) makes Reserve wait WhyQuota 100 years"},
		{"huge window, no reset", 200, hdr("RateLimit-Policy", `"default";q=1;w=`+huge, "RateLimit", `"default";r=0`),
			"a policy's window is not bounded: q=1, w=99999999999999999999999 (clamped to 100 years), r=0 and no t make " +
				"Reserve wait WhyProbe, Definite, Window/Limit = 100 years (guessStep) for a unit to return"},
		{"negative numbers", 200, hdr("X-RateLimit-Limit", "-10", "X-RateLimit-Remaining", "-1", "X-RateLimit-Reset", "-5"), ""},
		{"garbage", 200, hdr("X-RateLimit-Limit", "ten", "X-RateLimit-Remaining", "0x1", "X-RateLimit-Reset", "soon"), ""},
		{"429 with a huge Retry-After", 429, hdr("Retry-After", huge), ""},
		{"429 with a zero Retry-After", 429, hdr("Retry-After", "0"), ""},
		{"429 with a Retry-After in the past", 429, hdr("Retry-After", "Mon, 01 Jan 1990 00:00:00 GMT"), ""},
		{"429 with r=0 and a huge reset", 429, hdr("RateLimit-Policy", `"default";q=10;w=1`, "RateLimit", `"default";r=0;t=`+huge),
			"a 429 with r=0 and t=99999999999999999999999 pauses the key DefaultMaxPause (bounded), but the policy keeps " +
				"its 100-year ResetAt, so once the pause ends Reserve waits WhyQuota 100 years: Config.MaxPause is bypassed"},
		{"429 with everything zero", 429, ietf(0, 0, 0, 0), ""},
		{"503 with a huge Retry-After", 503, hdr("Retry-After", huge), ""},
		{"huge token costs", 200, openAI(10, 5, "1s", 1<<62, 1<<62, "1m0s"), ""},
		{"tokens exhausted with a huge reset", 200, openAI(10, 5, "1s", 100, 0, "876000h"),
			"a tokens policy's reset is not bounded: x-ratelimit-reset-tokens: 876000h (100 years) makes a request wait WhyQuota 100 years"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, start := range []http.Header{nil, ietf(10, 1, 5, 1)} {
				y := answered(t, nil, start)
				y.play(send(ms(200), "a"), send(ms(200), "b"))
				y.play(answer(ms(300), "a", tt.status, tt.h))
				y.play(answer(ms(300), "b", tt.status, tt.h))
				for _, at := range []time.Duration{ms(300), sec(1), time.Hour, maxWait} {
					now := t0.Add(at)
					for range 3 {
						seq := y.st.Seq
						d := y.st.Reserve(now, Request{Cost: []Amount{{Unit: ratelimit.UnitTokens, N: 1 << 61}}}, nil)
						checkDecision(t, now, seq, d, &y.st)
					}
				}
			}
		})
	}
}

// TestZeroAnswerFreesLease: a transport error (a zero Answer) frees the
// lease and teaches nothing.
func TestZeroAnswerFreesLease(t *testing.T) {
	y := answered(t, nil, ietf(100, 60, 50, 60))
	y.play(send(ms(200), "a"), send(ms(200), "b"))
	before := y.st.Clone()
	y.play(lost(ms(300), "a"))
	require.Len(t, y.st.Leases, 1)
	require.Equal(t, before.Policies, y.st.Policies)
	require.Equal(t, before.Adaptive, y.st.Adaptive)
	require.Equal(t, before.PauseUntil, y.st.PauseUntil)
	y.play(lost(ms(300), "b"))
	require.Empty(t, y.st.Leases)
	// Lost twice: nothing more happens.
	y.play(lost(ms(300), "b"))
	require.Empty(t, y.st.Leases)
	require.Equal(t, 48, y.grantsAt(ms(400)))
}

// TestZeroState: the zero State and a nil Config decide.
func TestZeroState(t *testing.T) {
	var s State
	d := s.Reserve(t0, Request{Route: "GET /", Quotas: []int{0}, Cost: []Amount{{Unit: ratelimit.UnitTokens, N: -5}}}, nil)
	require.True(t, d.OK)
	require.True(t, d.Lease.Probe)
	require.Empty(t, d.Lease.Cost, "a negative cost is none")
	s.Cancel(Lease{Seq: 42}, nil) // unknown: nothing
	s.Complete(t0, Lease{Seq: 43}, Answer{}, nil)
	require.Len(t, s.Leases, 1)
}

// fuzzBytes reads a fuzzer's input as a sequence of choices.
type fuzzBytes struct{ b []byte }

func (f *fuzzBytes) more() bool { return len(f.b) > 0 }

func (f *fuzzBytes) byte() byte {
	if len(f.b) == 0 {
		return 0
	}
	c := f.b[0]
	f.b = f.b[1:]
	return c
}

func (f *fuzzBytes) pick(n int) int { return int(f.byte()) % n }

// number returns a header value: small, boundary, huge, negative, or garbage.
func (f *fuzzBytes) number() string {
	switch c := f.byte(); c % 16 {
	case 0:
		return "0"
	case 1:
		return "1"
	case 2:
		return "-1"
	case 3:
		return "99999999999"
	case 4:
		return "99999999999999999999999"
	case 5:
		return "2147483648"
	case 6:
		return "1.5"
	case 7:
		return "x"
	case 8:
		return fmt.Sprint(t0.Unix() + int64(f.byte()))
	case 9:
		return fmt.Sprint(int(f.byte()) * 1000)
	default:
		return fmt.Sprint(int(c))
	}
}

// header returns a header set in one of the dialects, with fuzzed numbers.
func (f *fuzzBytes) header() http.Header {
	switch f.pick(9) {
	case 0:
		return nil
	case 1:
		return hdr("RateLimit-Policy", fmt.Sprintf(`"default";q=%s;w=%s`, f.number(), f.number()),
			"RateLimit", fmt.Sprintf(`"default";r=%s;t=%s`, f.number(), f.number()))
	case 2:
		return hdr("X-RateLimit-Limit", f.number(), "X-RateLimit-Remaining", f.number(), "X-RateLimit-Reset", f.number())
	case 3:
		return hdr("X-RateLimit-Limit", f.number(), "X-RateLimit-Remaining", f.number(), "X-RateLimit-Used", f.number(),
			"X-RateLimit-Reset", f.number(), "X-RateLimit-Resource", []string{"core", "search", "graphql"}[f.pick(3)])
	case 4:
		return hdr("X-RateLimit-Limit", f.number(), "X-RateLimit-Remaining", f.number(),
			"X-RateLimit-Reset-After", f.number(), "X-RateLimit-Bucket", []string{"b1", "b2"}[f.pick(2)])
	case 5:
		return hdr("x-ratelimit-limit-requests", f.number(), "x-ratelimit-remaining-requests", f.number(),
			"x-ratelimit-reset-requests", f.number()+"s", "x-ratelimit-limit-tokens", f.number(),
			"x-ratelimit-remaining-tokens", f.number(), "x-ratelimit-reset-tokens", f.number()+"ms")
	case 6:
		return hdr("Retry-After", f.number())
	case 7:
		return hdr("Retry-After", t0.Add(time.Duration(f.byte())*time.Second).Format(http.TimeFormat),
			"RateLimit-Policy", fmt.Sprintf(`"default";q=%s;w=%s`, f.number(), f.number()),
			"RateLimit", fmt.Sprintf(`"default";r=%s;t=%s`, f.number(), f.number()))
	default:
		return hdr("Retry-After-Ms", f.number())
	}
}

// step returns how far time moves.
func (f *fuzzBytes) step() time.Duration {
	switch c := f.byte(); c % 8 {
	case 0:
		return 0
	case 1:
		return time.Duration(c) * time.Millisecond
	case 2:
		return time.Duration(c) * 10 * time.Millisecond
	case 3:
		return time.Duration(c) * time.Second
	case 4:
		return time.Minute
	case 5:
		return time.Hour
	case 6:
		return 25 * time.Hour
	default:
		return time.Nanosecond
	}
}

// FuzzReserveComplete drives one key through random sequences of Reserve,
// Complete (with random headers in every dialect) and Cancel, and checks
// what must always hold: no panic; a grant's lease numbered one more than
// the last; a refusal asking again after now and within a pause and a day;
// never more leases in flight than granted and not yet answered.
func FuzzReserveComplete(f *testing.F) {
	f.Add([]byte{0, 0, 2, 0, 1, 10, 20, 30, 40, 0, 0, 0, 5, 3, 0, 0})
	f.Add([]byte{0, 0, 2, 0, 0, 6, 3, 200, 5, 3, 0, 0, 0, 0, 4, 0})
	f.Add([]byte{1, 0, 0, 2, 0, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 7, 1, 9, 3, 4, 5, 5, 0})
	f.Add([]byte{2, 0, 1, 0, 2, 0, 5, 9, 9, 9, 9, 9, 9, 0, 1, 0, 3, 1, 2, 0, 0, 1, 6, 5, 4})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, 0123456789 times"))
	configs := []*Config{
		nil,
		{LeaseTTL: 5 * time.Second, MaxPause: time.Hour},
		{Quotas: []Quota{{Limit: 3, Window: time.Second}, {Limit: 10, Window: time.Minute, Burst: 2}, {}}},
	}
	routes := []string{"", "GET /a", "GET /search", "POST /b"}
	statuses := []int{200, 200, 429, 503, 0, 403, 500}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data}
		cfg := configs[in.pick(len(configs))]
		var st State
		now := t0
		var open []Lease // granted, neither answered nor cancelled
		var unbounded string
		for ops := 0; ops < 300 && in.more(); ops++ {
			switch in.pick(6) {
			case 0, 1:
				req := Request{Route: routes[in.pick(len(routes))]}
				if c := in.byte(); c%3 == 0 {
					req.Quotas = []int{int(c % 4)}
				}
				if c := in.byte(); c%4 == 0 {
					req.Cost = []Amount{{Unit: ratelimit.UnitTokens, N: int64(c) * int64(c) * 100}}
				}
				seq := st.Seq
				d := st.Reserve(now, req, cfg)
				if !d.OK && d.At.Sub(now) > maxWait && d.At.After(now) && (d.Why == WhyQuota || d.Why == WhyRefill || d.Why == WhyProbe) {
					// The known bug of TestAbsurdNumbers: a wait derived
					// from a server's reset or window is not bounded.
					if unbounded == "" {
						unbounded = fmt.Sprintf("%v for %v (%s)", d.Why, d.At.Sub(now), d.Detail)
					}
				} else {
					checkDecision(t, now, seq, d, &st)
				}
				if d.OK {
					open = append(open, d.Lease)
				}
			case 2, 3:
				if len(open) == 0 {
					continue
				}
				i := in.pick(len(open))
				l := open[i]
				open = slices.Delete(open, i, i+1)
				status := statuses[in.pick(len(statuses))]
				var a Answer
				if status != 0 {
					h := in.header()
					if in.byte()%2 == 0 {
						a.Date = now.Add(-time.Duration(in.byte()) * 10 * time.Millisecond).Truncate(time.Second)
						h = with(h, "Date", a.Date.Format(http.TimeFormat))
					}
					a.Obs = ratelimit.ParseHeaders(h, status, now)
				}
				st.Complete(now, l, a, cfg)
			case 4:
				if len(open) == 0 {
					continue
				}
				i := in.pick(len(open))
				st.Cancel(open[i], cfg)
				open = slices.Delete(open, i, i+1)
			case 5:
				now = now.Add(in.step())
			}
			require.LessOrEqual(t, len(st.Leases), len(open), "leases in flight")
			for _, l := range st.Leases {
				require.True(t, slices.ContainsFunc(open, func(o Lease) bool { return o.Seq == l.Seq }), "lease %d was answered", l.Seq)
			}
			require.GreaterOrEqual(t, st.RTT, time.Duration(0))
		}
		if unbounded != "" {
			t.Fatalf("a refusal waits longer than DefaultMaxPause and a day: %s", unbounded)
		}
	})
}

// TestSlowAnswerAcrossReset: an answer to a request counted in a window
// that has since reset (a slow response: its headers were written when it
// was counted) does not take back the new window.
func TestSlowAnswerAcrossReset(t *testing.T) {
	q3 := func(r int) http.Header { return ietf(3, 10, r, 10) }
	// A window of 3 per 10s, known: the whole quota came back at +10.1s.
	setup := []step{
		first(0, "a"),
		answer(ms(100), "a", 200, q3(2)),
		send(ms(200), "b"),
		send(ms(200), "c"),
		answer(ms(300), "b", 200, q3(1)),
		answer(ms(300), "c", 200, q3(0)),
		goesFirst(ms(10100), "d"),
		answer(ms(10200), "d", 200, q3(2)),
		check(ms(10200), modelIs(ModelWindow)),
		send(ms(10200), "e"),
		send(ms(10200), "slow"), // counted at +10.2s: 0 left, resets in 10s
		answer(ms(10300), "e", 200, q3(1)),
		wait(ms(10300), WhyQuota, ms(20200), true),
	}
	t.Run("arriving after a request asked in the new window", func(t *testing.T) {
		newStory(t, nil).play(slices.Concat(setup, []step{
			send(ms(20200), "f"),
			send(ms(20200), "g"), // (slow, in flight, may count in the new window)
			wait(ms(20200), WhyQuota, ms(30200), true),
			answer(ms(20250), "slow", 200, q3(0)),
			// Written at +10.2s, it says nothing of the new window.
			answer(ms(20300), "f", 200, q3(2)),
			answer(ms(20300), "g", 200, q3(1)),
			send(ms(20300), "h"),
			// The next reset: a period after the last (+30.2s), or f's
			// bound (+30.3s).
			wait(ms(20300), WhyQuota, ms(30200), true).within(ms(100)),
		})...)
	})
	t.Run("arriving before any request asked in the new window", func(t *testing.T) {
		newStory(t, nil).play(slices.Concat(setup, []step{
			answer(ms(20250), "slow", 200, q3(0)),
			send(ms(20250), "f"),
			send(ms(20250), "g"),
			send(ms(20250), "h"),
			wait(ms(20250), WhyQuota, ms(30200), true),
		})...)
	})
}

// TestCostlyRequestsAfterTokensReset: when every request declares a cost,
// the reset of a tokens quota whose model is unknown still lets one
// request go first, to learn what came back.
func TestCostlyRequestsAfterTokensReset(t *testing.T) {
	tokens := func(n int64) Request { return Request{Cost: []Amount{{Unit: ratelimit.UnitTokens, N: n}}} }
	y := answered(t, nil, openAI(100, 99, "10s", 1000, 1000, "1s"))
	y.play(
		send(ms(200), "a").asking(tokens(600)),
		send(ms(200), "b").asking(tokens(400)),
		answer(ms(300), "a", 200, openAI(100, 98, "10s", 1000, 400, "1s")),
		answer(ms(300), "b", 200, openAI(100, 97, "10s", 1000, 0, "1s")),
		wait(ms(400), WhyQuota, ms(1100), true).asking(tokens(600)),
		goesFirst(ms(1100), "c").asking(tokens(600)),
		waitsForAnswer(ms(1100)).asking(tokens(600)),
		answer(ms(1200), "c", 200, openAI(100, 96, "10s", 1000, 400, "1s")),
		send(ms(1200), "d").asking(tokens(400)),
	)
}

// TestDeclaredBurstAfterCancel: a cancelled request's place in a declared
// quota's burst comes back, but never beyond the burst.
func TestDeclaredBurstAfterCancel(t *testing.T) {
	cfg := &Config{Quotas: []Quota{{Limit: 10, Window: time.Second, Burst: 2}, {Limit: 1, Window: time.Minute}}}
	q := Request{Quotas: []int{0}}
	answered(t, cfg, nil).play(
		send(ms(150), "z").asking(Request{Quotas: []int{1}}),
		send(ms(200), "a").asking(q),
		// Refused by quota 1; quota 0's bucket is full again (2).
		wait(ms(500), WhyDeclared, ms(60150), true).asking(Request{Quotas: []int{0, 1}}),
		cancel(ms(500), "a"),
		send(ms(500), "b").asking(q),
		send(ms(500), "c").asking(q),
		wait(ms(500), WhyDeclared, ms(600), true).asking(q),
	)
}

// TestLimitOnlyPolicy: a server that announces its quota but not what is
// left (RateLimit-Policy without RateLimit, X-RateLimit-Limit alone) says
// nothing that should hold a request back.
func TestLimitOnlyPolicy(t *testing.T) {
	for _, h := range []http.Header{
		hdr("RateLimit-Policy", `"default";q=100;w=60`),
		hdr("X-RateLimit-Limit", "100"),
		hdr("X-RateLimit-Limit", "100", "X-RateLimit-Reset", fmt.Sprint(t0.Unix()+30)),
	} {
		y := answered(t, nil, h)
		y.play(
			send(ms(200), "a"),
			send(ms(200), "b"),
			answer(ms(300), "a", 200, h),
			send(ms(300), "c"),
		)
	}
}

// TestResetMovedLater: a newer answer whose reset is later than the bound
// the key holds (a token bucket whose reset is the time until it is full,
// as OpenAI's x-ratelimit-reset-requests is) says the quota does not
// return whole at the earlier bound: the key does not release the whole
// quota there.
func TestResetMovedLater(t *testing.T) {
	req := func(left int, reset string) http.Header {
		return hdr("x-ratelimit-limit-requests", "10", "x-ratelimit-remaining-requests", fmt.Sprint(left),
			"x-ratelimit-reset-requests", reset)
	}
	y := newStory(t, nil)
	y.play(
		first(0, "a"),
		answer(ms(50), "a", 200, req(0, "100ms")),
		goesFirst(ms(150), "b"),
		answer(ms(200), "b", 200, req(9, "100ms")), // full at the reset: taken for a window
	)
	got, _ := y.grants(ms(200), 9, "c", Request{})
	require.Equal(t, 9, got)
	for i := range 9 {
		// Each found one less, the bucket full one 100ms later each time.
		y.play(answer(ms(250), fmt.Sprint("c", i), 200, req(8-i, fmt.Sprintf("%dms", 200+100*i))))
	}
	// The newest answer: 0 left, full at +1.25s. At +300ms the bucket has
	// refilled half a request.
	require.LessOrEqual(t, y.grantsAt(ms(300)), 1)
}

// TestDefiniteWaitIsWhenItGoes: a request that asks again at a definite
// At, nothing having changed, goes then; it is not told to ask again a
// millisecond later, over and over (each ask is a store update). A wake at
// the server's reset, when it comes before the refill wait, is one more.
func TestDefiniteWaitIsWhenItGoes(t *testing.T) {
	y := answered(t, nil, ietf(10, 1, 9, 1))
	// Others spent 8 between two of our answers: Foreign is learnt.
	y.play(send(ms(100), "x"), answer(ms(150), "x", 200, ietf(10, 1, 0, 1)))
	// Ask until granted: asks at definite instants, answered at once with
	// nothing left; count the asks for each grant.
	at := ms(150)
	for grant := range 4 {
		asks := 0
		for {
			asks++
			require.Less(t, asks, 1000)
			now := t0.Add(at)
			d := y.st.Reserve(now, Request{}, nil)
			if d.OK {
				y.leases["g"] = d.Lease
				y.play(answer(at+ms(50), "g", 200, ietf(10, 1, 0, 1)))
				at += ms(50)
				break
			}
			require.True(t, d.Definite, "%v: %s", d.Why, d.Detail)
			if d.Why == WhyQuota {
				// A wake at the server's reset, sooner than the refill
				// wait: the server said the quota returns then.
				asks--
			}
			at = d.At.Sub(t0)
		}
		require.LessOrEqual(t, asks, 2, "grant %d at +%v took %d asks at definite instants (not counting resets)", grant, at, asks)
	}
}

// TestAnswersAtOneInstant: on a clock that does not move between a
// request's sending and its answer (a coarse clock, a fake one, a very near
// server), an answer cannot be told newer than the base by its instants
// alone: answers that arrive in any order at the instant the base arrived
// must not raise what is left (an older, larger count adopted as newer let
// 11 requests go into a quota of 9).
func TestAnswersAtOneInstant(t *testing.T) {
	y := newStory(t, nil)
	y.play(first(ms(100), "a"), answer(ms(100), "a", 200, ietf(10, 1, 9, 1)))
	got, _ := y.grants(ms(100), 9, "b", Request{})
	require.Equal(t, 9, got)
	// The server counted b0..b8 in order (8 left .. 0 left); the answers
	// arrive last counted first, all at the same instant.
	for i := 8; i >= 0; i-- {
		y.play(answer(ms(100), fmt.Sprint("b", i), 200, ietf(10, 1, 8-i, 1)))
		require.Zero(t, clone(y).grantsAt(ms(100)), "after b%d's answer (%d left)", i, 8-i)
	}
}

// TestResetAtTheDatesSecond: a whole-second reset of 0 (an epoch second
// equal to the Date's, as go-chi/httprate sends at the start of a second)
// says the quota returns within the second, not now: taken as now, every
// answer restored the whole quota, and a 10/s limit saw 45 of 195 attempts
// refused.
func TestResetAtTheDatesSecond(t *testing.T) {
	date := t0 // a whole second
	h := func(r int) http.Header {
		return hdr("x-ratelimit-limit", "10", "x-ratelimit-remaining", fmt.Sprint(r),
			"x-ratelimit-reset", fmt.Sprint(date.Unix()), "Date", date.Format(http.TimeFormat))
	}
	y := newStory(t, nil)
	y.play(first(ms(10), "a"), answerDated(ms(11), "a", 200, h(8), date))
	got, _ := y.grants(ms(11), 20, "b", Request{})
	require.LessOrEqual(t, got, 8)
	for i := range got {
		y.play(answerDated(ms(12), fmt.Sprint("b", i), 200, h(got-1-i), date))
		require.Zero(t, clone(y).grantsAt(ms(13)), "after b%d's answer", i)
	}
	// Within the second (by the server's words, its reset is within
	// it), nothing more goes; after it, the quota is asked again.
	require.Zero(t, clone(y).grantsAt(ms(900)))
	require.Positive(t, clone(y).grantsAt(ms(1100)))
}

// TestAdaptiveBacksOffWhileRefused: without headers or Retry-After, a
// fixed window that has run out refuses everything until it rolls, which a
// rate cannot see. The first 429 cuts the rate; each further one, to a
// request sent after the last, pauses the key for a doubling time, with
// one request first after the pause; an accepted answer ends the streak.
func TestAdaptiveBacksOffWhileRefused(t *testing.T) {
	y := newStory(t, nil)
	y.play(first(0, "a"), answer(ms(50), "a", 200, nil))
	got, _ := y.grants(ms(100), 50, "w", Request{})
	require.Equal(t, 50, got)
	y.play(answer(ms(200), "w0", 429, nil))
	require.True(t, y.st.Adaptive.On)
	require.False(t, y.st.PauseUntil.After(t0.Add(ms(200))), "the first 429 only cuts the rate")
	// The rest of the burst was in flight before it: no pause either.
	y.play(answer(ms(201), "w1", 429, nil))
	require.False(t, y.st.PauseUntil.After(t0.Add(ms(201))))

	var pauses []time.Duration
	at := ms(300)
	for i := range 4 {
		d := y.st.Reserve(t0.Add(at), Request{}, nil)
		if !d.OK {
			at = d.At.Sub(t0)
			d = y.st.Reserve(t0.Add(at), Request{}, nil)
		}
		require.True(t, d.OK, "refusal %d: %v %s", i, d.Why, d.Detail)
		name := fmt.Sprint("r", i)
		y.leases[name] = d.Lease
		at += ms(10)
		y.play(answer(at, name, 429, nil))
		pause := y.st.PauseUntil.Sub(t0.Add(at))
		require.Positive(t, pause, "refusal %d pauses the key", i)
		require.Equal(t, y.st.PauseUntil, y.st.ProbeAfter, "one request first after the pause")
		pauses = append(pauses, pause)
		at += pause
	}
	for i := 1; i < len(pauses); i++ {
		require.Equal(t, 2*pauses[i-1], pauses[i], "pauses %v double", pauses)
	}
	require.LessOrEqual(t, pauses[0], ms(100))

	// An accepted answer ends the streak.
	d := y.st.Reserve(t0.Add(at), Request{}, nil)
	if !d.OK {
		at = d.At.Sub(t0)
		d = y.st.Reserve(t0.Add(at), Request{}, nil)
	}
	require.True(t, d.OK, "%v %s", d.Why, d.Detail)
	y.leases["ok"] = d.Lease
	at += ms(10)
	y.play(answer(at, "ok", 200, nil))
	require.Zero(t, y.st.Adaptive.Streak)
}

// TestAnchoredWindowGuessed: a server that starts a window at a client's
// first request after the last one ended, and writes its reset as a Unix
// second rounded up (express-rate-limit's X-RateLimit-Reset), puts each
// window's reset up to a second after its true end. Once a fresh window's
// first answer shows it, the key goes at the window's inferred end (one
// request first), not at the rounded second; a guess refused ends the
// guessing.
func TestAnchoredWindowGuessed(t *testing.T) {
	h := func(r int, reset time.Duration, date time.Time) http.Header {
		return hdr("x-ratelimit-limit", "3", "x-ratelimit-remaining", fmt.Sprint(r),
			"x-ratelimit-reset", fmt.Sprint(t0.Add(reset).Unix()), "Date", date.Format(http.TimeFormat))
	}
	dated := func(at time.Duration, name string, status, r int, reset time.Duration) step {
		date := t0.Add(at).Truncate(time.Second)
		return answerDated(at, name, status, h(r, reset, date), date)
	}
	// The first window starts at +0.4s and ends at +1.4s: reset 2.
	y := newStory(t, nil)
	y.play(first(ms(400), "a"), dated(ms(410), "a", 200, 2, sec(2)))
	got, _ := y.grants(ms(410), 5, "b", Request{})
	require.Equal(t, 2, got)
	y.play(dated(ms(420), "b0", 200, 1, sec(2)), dated(ms(420), "b1", 200, 0, sec(2)))
	// Nothing says yet that the window is anchored: the key waits for
	// the rounded second, and one request goes first.
	d := y.st.Reserve(t0.Add(ms(500)), Request{}, nil)
	require.False(t, d.OK)
	at := d.At.Sub(t0)
	require.InDelta(t, float64(sec(2)), float64(at), float64(ms(10)), "at +%v", at)
	d = y.st.Reserve(t0.Add(at), Request{}, nil)
	require.True(t, d.OK)
	y.leases["c"] = d.Lease
	// The fresh window began with c, just after +2s: it ends just after
	// +3s, which the server rounds up to 4.
	y.play(dated(at+ms(10), "c", 200, 2, sec(4)))
	require.True(t, y.st.Policies[0].Guessed)
	got, _ = y.grants(at+ms(10), 5, "e", Request{})
	require.Equal(t, 2, got)
	y.play(dated(at+ms(20), "e0", 200, 1, sec(4)), dated(at+ms(20), "e1", 200, 0, sec(4)))
	d = y.st.Reserve(t0.Add(at+ms(30)), Request{}, nil)
	require.False(t, d.OK)
	next := d.At.Sub(t0)
	require.InDelta(t, float64(at+sec(1)), float64(next), float64(ms(10)), "the window's end, at +%v, not +4s", next)

	// At the guess, one request goes first; refused, it ends the guessing.
	g := y.st.Reserve(t0.Add(next), Request{}, nil)
	require.True(t, g.OK)
	require.False(t, y.st.Reserve(t0.Add(next), Request{}, nil).OK, "one request first")
	y.leases["g"] = g.Lease
	y.play(answerDated(next+ms(10), "g", 429, with(h(0, sec(4), t0.Add(sec(3))), "Retry-After", "1"), t0.Add(sec(3))))
	require.True(t, y.st.Policies[0].GuessRefuted)
	require.False(t, y.st.Policies[0].Guessed)
}

// TestWholeQuotaRefusedAtReset: a quota taken for a window, whose whole
// quota restored at a reset is refused at once (a sliding window, which a
// pause makes look fresh), is no window: later answers that look fresh do
// not make it one again, and no reset restores the whole quota blindly.
func TestWholeQuotaRefusedAtReset(t *testing.T) {
	q3 := func(r int) http.Header { return ietf(3, 10, r, 10) }
	y := newStory(t, nil)
	y.play(
		first(0, "a"),
		answer(ms(100), "a", 200, q3(2)),
		send(ms(200), "b"), send(ms(200), "c"),
		answer(ms(300), "b", 200, q3(1)), answer(ms(300), "c", 200, q3(0)),
		goesFirst(ms(10100), "d"),
		answer(ms(10200), "d", 200, q3(2)),
		check(ms(10200), modelIs(ModelWindow)),
		send(ms(10200), "e"), send(ms(10200), "f"),
		answer(ms(10300), "e", 200, q3(1)), answer(ms(10300), "f", 200, q3(0)),
	)
	// The next reset restores the window whole, and it is refused at once.
	got, _ := y.grants(ms(20200), 3, "g", Request{})
	require.Equal(t, 3, got)
	for i := range 3 {
		y.play(answer(ms(20250), fmt.Sprint("g", i), 429, hdr("Retry-After", "1")))
	}
	require.True(t, y.st.Policies[0].NoWindow)
	// After the pause, one request goes first; its answer looks like a
	// fresh window's, and is not taken for one.
	y.play(goesFirst(ms(21250), "h"), answer(ms(21300), "h", 200, q3(2)))
	require.NotEqual(t, ModelWindow, y.st.Policies[0].Model)
}

// TestDateResetTooEarlyFallsBack: a server whose windows start at a
// client's first request and whose epoch reset is rounded down
// (ulule/limiter) makes the reset derived from its Date come early: the
// request sent then is refused with a reset of 0. The key then waits for
// the bound an earlier answer gave (its arrival plus its reset), not a
// whole second more.
func TestDateResetTooEarlyFallsBack(t *testing.T) {
	h := func(r int, reset time.Duration, date time.Time) http.Header {
		return hdr("x-ratelimit-limit", "5", "x-ratelimit-remaining", fmt.Sprint(r),
			"x-ratelimit-reset", fmt.Sprint(t0.Add(reset).Unix()), "Date", date.Format(http.TimeFormat))
	}
	// The window runs from +393ms to +1.393s; the server says reset 1
	// (rounded down) and Date 0.
	y := newStory(t, nil)
	y.play(first(ms(393), "a"), answerDated(ms(394), "a", 200, h(4, sec(1), t0), t0))
	got, _ := y.grants(ms(394), 10, "b", Request{})
	require.Equal(t, 4, got)
	for i := range got {
		y.play(answerDated(ms(395), fmt.Sprint("b", i), 200, h(3-i, sec(1), t0), t0))
	}
	d := y.st.Reserve(t0.Add(ms(500)), Request{}, nil)
	require.False(t, d.OK)
	at := d.At.Sub(t0)
	require.Less(t, at, ms(1100), "the reset derived from the Date")
	p := y.st.Reserve(t0.Add(at), Request{}, nil)
	require.True(t, p.OK)
	y.leases["p"] = p.Lease
	y.play(answerDated(at+ms(1), "p", 429, h(0, sec(1), t0.Add(sec(1))), t0.Add(sec(1))))
	d = y.st.Reserve(t0.Add(at+ms(2)), Request{}, nil)
	require.False(t, d.OK)
	require.InDelta(t, float64(ms(1394)), float64(d.At.Sub(t0)), float64(ms(10)), "%v until +%v: %s", d.Why, d.At.Sub(t0), d.Detail)
}

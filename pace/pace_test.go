package pace

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/ratelimit"
	"github.com/headway-go/headway/ratelimittest"
)

// t0 is the instant every story starts at: a whole second of the server's
// clock, so that a test says where windows fall.
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

// withHdr adds name, value pairs to a copy of h.
func withHdr(h http.Header, kv ...string) http.Header {
	c := h.Clone()
	if c == nil {
		c = http.Header{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Add(kv[i], kv[i+1])
	}
	return c
}

// github is GitHub's x-ratelimit-* for one resource, resetting at reset
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
	first    bool
	anyFirst bool // do not check the lease's First flag
	why      Why  // 0: any reason
	until    time.Duration
	slack    time.Duration // At may be up to slack after until
	early    time.Duration // ... and up to early before it
	definite bool
	anyDef   bool // do not check Definite

	check func(t *testing.T, y *story, now time.Time)
}

func (s step) String() string {
	switch s.kind {
	case doReserve:
		if s.ok {
			return fmt.Sprintf("+%v reserve %q (want OK first=%v)", s.at, s.name, s.first)
		}
		return fmt.Sprintf("+%v reserve (want wait %v until +%v definite=%v)", s.at, s.why, s.until, s.definite)
	case doComplete:
		return fmt.Sprintf("+%v complete %q status %d", s.at, s.name, s.status)
	case doCancel:
		return fmt.Sprintf("+%v cancel %q", s.at, s.name)
	}
	return fmt.Sprintf("+%v check", s.at)
}

// goes: the request named name is granted at t0+at, and does not go first.
func goes(at time.Duration, name string) step {
	return step{at: at, kind: doReserve, name: name, ok: true}
}

// goesFirst: the request named name is granted at t0+at and goes alone
// (Lease.First).
func goesFirst(at time.Duration, name string) step {
	return step{at: at, kind: doReserve, name: name, ok: true, first: true}
}

// goesAny: the request named name is granted at t0+at, first or not.
func goesAny(at time.Duration, name string) step {
	return step{at: at, kind: doReserve, name: name, ok: true, anyFirst: true}
}

// waits: a request asking at t0+at must wait for why until t0+until.
func waits(at time.Duration, why Why, until time.Duration, definite bool) step {
	return step{at: at, kind: doReserve, why: why, until: until, definite: definite}
}

// waitsForAnswer: a request asking at t0+at waits for the answer of one in
// flight: not definite, asking again within pollStep.
func waitsForAnswer(at time.Duration, why Why) step {
	return step{at: at, kind: doReserve, why: why, until: at + pollStep, early: pollStep - minStep}
}

// answers: the response to name arrives at t0+at.
func answers(at time.Duration, name string, status int, h http.Header) step {
	return step{at: at, kind: doComplete, name: name, status: status, h: h}
}

// answersDated: the response to name arrives at t0+at with a Date header
// (the server's clock, here the client's, truncated to the second).
func answersDated(at time.Duration, name string, status int, h http.Header) step {
	return step{at: at, kind: doComplete, name: name, status: status, h: h, date: t0.Add(at).Truncate(time.Second)}
}

// fails: the request named name failed without a response at t0+at.
func fails(at time.Duration, name string) step {
	return step{at: at, kind: doComplete, name: name}
}

// cancels: the request named name never left.
func cancels(at time.Duration, name string) step {
	return step{at: at, kind: doCancel, name: name}
}

func checks(at time.Duration, f func(t *testing.T, y *story, now time.Time)) step {
	return step{at: at, kind: doCheck, check: f}
}

// within lets a wait's At be up to d after the step's until.
func (s step) within(d time.Duration) step { s.slack = d; return s }

// around lets a wait's At be up to d either side of the step's until.
func (s step) around(d time.Duration) step { s.slack, s.early = d, d; return s }

// anyDefinite does not check a wait's Definite.
func (s step) anyDefinite() step { s.anyDef = true; return s }

// asking sets the request of a Reserve step.
func (s step) asking(r Request) step { s.req = r; return s }

// story is one key's state played through steps.
type story struct {
	t      *testing.T
	cfg    *Config
	st     State
	seq    uint64 // the last lease granted
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
			d := y.st.Reserve(now, s.req, y.cfg)
			if !s.ok {
				require.Falsef(t, d.OK, "%s: granted (lease %d) %s", msg, d.Lease.Seq(), y.describe(now))
				if s.why != 0 {
					require.Equalf(t, s.why, d.Why, "%s: why (%s)", msg, d.Detail)
				}
				lo, hi := t0.Add(s.until-s.early), t0.Add(s.until+s.slack)
				require.Truef(t, !d.At.Before(lo) && !d.At.After(hi),
					"%s: at +%v, not in [+%v, +%v] (%v: %s)", msg, d.At.Sub(t0), lo.Sub(t0), hi.Sub(t0), d.Why, d.Detail)
				if !s.anyDef {
					require.Equalf(t, s.definite, d.Definite, "%s: definite (%v: %s)", msg, d.Why, d.Detail)
				}
				continue
			}
			require.Truef(t, d.OK, "%s: refused: %v until +%v definite=%v (%s)", msg, d.Why, d.At.Sub(t0), d.Definite, d.Detail)
			y.granted(t, msg, now, d)
			if !s.anyFirst {
				require.Equalf(t, s.first, d.Lease.First(), "%s: first", msg)
			}
			if s.name != "" {
				y.leases[s.name] = d.Lease
			}
		case doComplete:
			l, ok := y.leases[s.name]
			require.Truef(t, ok, "%s: no lease named %q", msg, s.name)
			y.st.Complete(now, l, y.answer(now, s.status, s.h, s.date), y.cfg)
		case doCancel:
			l, ok := y.leases[s.name]
			require.Truef(t, ok, "%s: no lease named %q", msg, s.name)
			y.st.Cancel(l, y.cfg)
		case doCheck:
			s.check(t, y, now)
		}
	}
}

// granted checks what holds of every grant: numbered one more than the
// last, at now.
func (y *story) granted(t *testing.T, msg string, now time.Time, d Decision) {
	t.Helper()
	require.Equalf(t, y.seq+1, d.Lease.Seq(), "%s: lease seq", msg)
	require.Truef(t, d.Lease.At().Equal(now), "%s: lease at %v", msg, d.Lease.At())
	y.seq = d.Lease.Seq()
}

// answer is the Answer to a request received at now: status 0 is a
// transport error.
func (y *story) answer(now time.Time, status int, h http.Header, date time.Time) Answer {
	var a Answer
	if status == 0 {
		return a
	}
	if !date.IsZero() {
		h = withHdr(h, "Date", date.Format(http.TimeFormat))
		a.Date = date
	}
	a.Obs = ratelimit.ParseHeaders(h, status, now)
	return a
}

// describe says what the key's policies hold, for a failure's message.
func (y *story) describe(now time.Time) string {
	var b strings.Builder
	for i := range y.st.k.policies {
		p := &y.st.k.policies[i]
		fmt.Fprintf(&b, "[%s] ", p.dump(unixNano(now)))
	}
	return b.String()
}

// grants asks up to n requests at t0+at, until one is refused, and returns
// how many were granted (naming them prefix0, prefix1, ...) and the
// refusal.
func (y *story) grants(at time.Duration, n int, prefix string, req Request) (int, Decision) {
	y.t.Helper()
	now := t0.Add(at)
	got := 0
	var last Decision
	for range n {
		d := y.st.Reserve(now, req, y.cfg)
		if d.OK {
			y.granted(y.t, "grants", now, d)
			y.leases[fmt.Sprint(prefix, got)] = d.Lease
			got++
			continue
		}
		last = d
		break
	}
	return got, last
}

// fork returns a copy of the story, to ask what-ifs.
func (y *story) fork() *story {
	c := *y
	c.st = y.st.Clone()
	c.leases = map[string]Lease{}
	for k, v := range y.leases {
		c.leases[k] = v
	}
	return &c
}

// grantsAt returns how many requests asking at once at t0+at are granted
// (at most 1000), on a copy of the story.
func (y *story) grantsAt(at time.Duration) int {
	n, _ := y.fork().grants(at, 1000, "g", Request{})
	return n
}

// refusedOnce is answered's story (its first answer base) in which a
// second request, sent at t0+200ms, is answered status with h at
// t0+300ms.
func refusedOnce(t *testing.T, base http.Header, status int, h http.Header) *story {
	t.Helper()
	y := answered(t, nil, base)
	y.play(goes(ms(200), "b"), answers(ms(300), "b", status, h))
	return y
}

// answered is a story whose key has answered once, at t0+100ms, with h,
// to a first request sent at t0.
func answered(t *testing.T, cfg *Config, h http.Header) *story {
	t.Helper()
	y := newStory(t, cfg)
	y.play(goesFirst(0, "first"), answers(ms(100), "first", 200, h))
	return y
}

// ---------------------------------------------------------------------------
// Against emulated servers (ratelimittest, on a manual clock): workers that
// always have a request to send, paced by one key's State, for a while.

// emulation is the outcome of a run.
type emulation struct {
	sends   []time.Duration // grants, since t0
	refused []time.Duration // refusals, by when they were sent
	probes  int             // refused requests that probed a policy
	whys    map[Why]int     // waits that Reserve decided, by reason
	// tests are how long requests were held back, while a unit was
	// there, for the last unit of a window to test where it ends, from
	// the first such wait to the send (waits for anything else between
	// end one).
	tests []time.Duration
	st    *State
}

// admitted returns how many of the sends the server admitted.
func (e *emulation) admitted() int { return len(e.sends) - len(e.refused) }

// sentIn returns how many were sent in [from, to).
func (e *emulation) sentIn(from, to time.Duration) int {
	n := 0
	for _, s := range e.sends {
		if s >= from && s < to {
			n++
		}
	}
	return n
}

// refusedIn returns how many of those sent in [from, to) were refused.
func (e *emulation) refusedIn(from, to time.Duration) int {
	n := 0
	for _, s := range e.refused {
		if s >= from && s < to {
			n++
		}
	}
	return n
}

// mostIn returns the most sends in any span of length w that starts at or
// after from.
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

// emu is an emulation's setup.
type emu struct {
	opts    []ratelimittest.Option
	workers int
	// latency is each exchange's round trip; the server counts a request
	// half way. rtt, when set, gives the round trip of the n-th request
	// (from 0) instead.
	latency time.Duration
	rtt     func(n int) time.Duration
	span    time.Duration
	cfg     *Config
	req     Request
	start   time.Time // t0 when zero
	// refuseProbes makes the server an adversary that refuses every
	// request that probes a policy (a 429 without rate-limit headers)
	// without counting it.
	refuseProbes bool
	// reverse takes the answers that come back at one instant in the
	// reverse of the order in which the server saw them (it is not
	// bound to answer in that order): the last arrival's first.
	reverse bool
	// deadline, when set, gives each request the Deadline of when it was
	// first asked for plus deadline.
	deadline time.Duration
}

// isProbe reports whether lease seq probes one of st's policies.
func isProbe(st *State, seq uint64) bool {
	for i := range st.k.policies {
		if st.k.policies[i].probe == seq {
			return true
		}
	}
	return false
}

// emulate runs workers against a ratelimittest handler configured by e.opts
// for e.span: each request is counted by the server half a round trip after
// it is sent and answered a round trip after. A worker refused by Reserve
// asks again at Decision.At, or as soon as an answer arrives.
func emulate(t *testing.T, e emu) *emulation {
	t.Helper()
	start := e.start
	if start.IsZero() {
		start = t0
	}
	clock := ratelimittest.NewManualClock(start)
	h, err := ratelimittest.NewHandler(nil, append([]ratelimittest.Option{ratelimittest.WithClock(clock)}, e.opts...)...)
	require.NoError(t, err)
	rtt := e.rtt
	if rtt == nil {
		rtt = func(int) time.Duration { return e.latency }
	}
	type flight struct {
		lease  Lease
		status int
		header http.Header
		at     time.Time // the answer's arrival
		date   time.Time
		seen   int // the order in which the server saw it
	}
	type arrival struct {
		w  int
		at time.Time
	}
	st := &State{}
	out := &emulation{whys: map[Why]int{}, st: st}
	ask := make([]time.Time, e.workers) // when an idle worker asks next
	fly := make([]*flight, e.workers)   // its request in flight, if any
	pend := make([]*arrival, e.workers) // its request on its way to the server
	leases := make([]Lease, e.workers)
	held := make([]time.Time, e.workers)  // since when it waits for a test
	asked := make([]time.Time, e.workers) // since when it asks for its request
	for i := range ask {
		ask[i] = start
	}
	end := start.Add(e.span)
	n, seen := 0, 0
	for steps := 0; ; steps++ {
		require.Less(t, steps, 5_000_000, "the emulation does not progress")
		// The next event: the earliest arrival at the server, then the
		// earliest answer, else the earliest ask.
		w, at, kind := -1, time.Time{}, 0
		for i := range e.workers {
			if p := pend[i]; p != nil && (w < 0 || p.at.Before(at)) {
				w, at, kind = i, p.at, 1
			}
		}
		for i := range e.workers {
			if f := fly[i]; f != nil && (w < 0 || f.at.Before(at) || e.reverse && kind == 2 && f.at.Equal(at) && f.seen > fly[w].seen) {
				w, at, kind = i, f.at, 2
			}
		}
		for i := range e.workers {
			if fly[i] == nil && pend[i] == nil && (w < 0 || ask[i].Before(at)) {
				w, at, kind = i, ask[i], 0
			}
		}
		if w < 0 || at.After(end) {
			return out
		}
		switch kind {
		case 1: // the request reaches the server
			p := pend[w]
			pend[w] = nil
			clock.Set(at)
			rec := httptest.NewRecorder()
			if e.refuseProbes && isProbe(st, leases[w].Seq()) {
				rec.Header().Set("Date", at.UTC().Format(http.TimeFormat))
				rec.WriteHeader(http.StatusTooManyRequests)
			} else {
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			}
			date, _ := ratelimit.ParseDate(rec.Header().Get("Date"))
			back := p.at.Add(p.at.Sub(leases[w].At()))
			seen++
			fly[w] = &flight{lease: leases[w], status: rec.Code, header: rec.Header(), at: back, date: date, seen: seen}
			continue
		case 2: // the answer is back
			f := fly[w]
			fly[w] = nil
			probe := isProbe(st, f.lease.Seq())
			st.Complete(at, f.lease, Answer{Obs: ratelimit.ParseHeaders(f.header, f.status, at), Date: f.date}, e.cfg)
			if f.status == http.StatusTooManyRequests || f.status == http.StatusForbidden {
				out.refused = append(out.refused, f.lease.At().Sub(start))
				if probe {
					out.probes++
				}
			}
			ask[w] = at
			for i := range e.workers {
				if fly[i] == nil && pend[i] == nil && ask[i].After(at) {
					ask[i] = at // the state changed: ask again
				}
			}
			continue
		}
		req := e.req
		if asked[w].IsZero() {
			asked[w] = at
		}
		if e.deadline > 0 {
			req.Deadline = asked[w].Add(e.deadline)
		}
		d := st.Reserve(at, req, e.cfg)
		if !d.OK {
			require.Truef(t, d.At.After(at), "a refusal at %v to ask again at %v", at, d.At)
			out.whys[d.Why]++
			ask[w] = d.At
			switch {
			case !strings.Contains(d.Detail, "the last unit waits"):
				held[w] = time.Time{}
			case held[w].IsZero():
				held[w] = at
			}
			continue
		}
		if !held[w].IsZero() {
			out.tests = append(out.tests, at.Sub(held[w]))
			held[w] = time.Time{}
		}
		asked[w] = time.Time{}
		out.sends = append(out.sends, at.Sub(start))
		leases[w] = d.Lease
		pend[w] = &arrival{w: w, at: at.Add(rtt(n) / 2)}
		n++
	}
}

// ---------------------------------------------------------------------------
// A key that never answered.

// TestFirstRequestGoesAlone guards the key's first request: one goes alone
// (Lease.First), the rest wait for its answer, not definitely (an answer may
// come any time) and asking again within pollStep; any answer releases them;
// a first request that failed without a response, or was cancelled, lets
// another go first.
func TestFirstRequestGoesAlone(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "the rest wait for the first answer, then go",
		steps: []step{
			goesFirst(0, "a"),
			waitsForAnswer(0, WhyFirstAnswer),
			waitsForAnswer(ms(10), WhyFirstAnswer),
			waitsForAnswer(ms(79), WhyFirstAnswer),
			answers(ms(80), "a", 200, ietf(50, 1, 49, 1)),
			goes(ms(80), "b"),
			goes(ms(80), "c"),
			goes(ms(81), "d"),
		},
	}, {
		name: "an answer without rate-limit headers releases them too",
		steps: []step{
			goesFirst(0, "a"),
			waitsForAnswer(ms(5), WhyFirstAnswer),
			answers(ms(50), "a", 200, nil),
			goes(ms(50), "b"),
			goes(ms(50), "c"),
		},
	}, {
		name: "a refusal releases them to what it says",
		steps: []step{
			goesFirst(0, "a"),
			waitsForAnswer(ms(5), WhyFirstAnswer),
			answers(ms(50), "a", 429, withHdr(ietf(10, 1, 0, 1), "Retry-After", "1")),
			waits(ms(50), WhyPaused, ms(1050), true),
		},
	}, {
		name: "a first request that failed without a response lets another go first",
		steps: []step{
			goesFirst(0, "a"),
			waitsForAnswer(ms(5), WhyFirstAnswer),
			fails(ms(30), "a"),
			goesFirst(ms(30), "b"),
			waitsForAnswer(ms(30), WhyFirstAnswer),
			waitsForAnswer(ms(59), WhyFirstAnswer),
			answers(ms(60), "b", 200, ietf(50, 1, 49, 1)),
			goes(ms(60), "c"),
			goes(ms(60), "d"),
		},
	}, {
		name: "a first request cancelled before it left lets another go first",
		steps: []step{
			goesFirst(0, "a"),
			cancels(ms(1), "a"),
			goesFirst(ms(1), "b"),
			waitsForAnswer(ms(2), WhyFirstAnswer),
		},
	}, {
		name: "the first answer's quota holds the rest: 2 left of 3",
		steps: []step{
			goesFirst(0, "a"),
			waitsForAnswer(ms(1), WhyFirstAnswer),
			answers(ms(40), "a", 200, ietf(3, 1, 2, 1)),
			goes(ms(40), "b"),
			goes(ms(40), "c"),
			waits(ms(40), 0, ms(40)+pollStep, false).around(pollStep),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newStory(t, nil).play(tt.steps...)
		})
	}
}

// ---------------------------------------------------------------------------
// Requests in flight count against remaining.

// TestInFlightCountsAgainstRemaining guards the in-flight accounting: leases
// granted and not yet answered count against what the newest answer said
// was left, so that sixteen workers asking at once with 5 left send 5, the
// sixth waiting; and answers that arrive in any order never let more be in
// flight than the quota has left.
func TestInFlightCountsAgainstRemaining(t *testing.T) {
	tests := []struct {
		name string
		base http.Header // the first answer, at +100ms
		ask  int         // asking at once at +200ms
		want int         // granted before any answer returns
	}{
		{"remaining 5, sixteen workers", ietf(100, 60, 5, 60), 16, 5},
		{"remaining 1", ietf(100, 60, 1, 60), 4, 1},
		{"remaining 0", ietf(100, 60, 0, 60), 3, 0},
		{"X-RateLimit remaining 5", hdr("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "5",
			"X-RateLimit-Reset", fmt.Sprint(t0.Unix()+30)), 16, 5},
		{"the tightest of two policies", hdr(
			"RateLimit-Policy", `"burst";q=10;w=1, "daily";q=1000;w=86400`,
			"RateLimit", `"burst";r=7;t=1, "daily";r=3;t=40000`), 16, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := answered(t, nil, tt.base)
			got, last := y.grants(ms(200), tt.ask, "w", Request{})
			require.Equal(t, tt.want, got, "granted before any answer")
			require.False(t, last.OK)
			require.NotZero(t, last.Why)
			require.True(t, last.At.After(t0.Add(ms(200))))
		})
	}

	// Five leases in flight with 5 left; the server counts w1..w4 first and
	// w0 last, but w0's answer (0 left) comes back first: it shows four
	// fewer left than w0 alone explains, which are the four still in
	// flight. Their answers, older, come later.
	t.Run("an answer counting the leases in flight books them", func(t *testing.T) {
		y := answered(t, nil, ietf(100, 60, 5, 60))
		got, _ := y.grants(ms(200), 16, "w", Request{})
		require.Equal(t, 5, got)
		y.play(answers(ms(300), "w0", 200, ietf(100, 60, 0, 60)))
		require.Zero(t, y.grantsAt(ms(300)), "0 left: nothing goes")
		for i, r := range []int{4, 3, 2, 1} {
			y.play(answers(ms(310+10*i), fmt.Sprint("w", i+1), 200, ietf(100, 60, r, 60)))
			require.Zerof(t, y.grantsAt(ms(315+10*i)), "after w%d's late answer (%d left, counted before w0)", i+1, r)
		}
	})
	t.Run("an answer counting some of them books those", func(t *testing.T) {
		// The server counts w0, w1, w2 (2 left after w2), then w3, w4: w2's
		// answer, first back, says 2 left with four in flight, two of them
		// counted already: 2 - 2 = 0 sure, not 2 - 4 and not 2.
		y := answered(t, nil, ietf(100, 60, 5, 60))
		got, _ := y.grants(ms(200), 16, "w", Request{})
		require.Equal(t, 5, got)
		y.play(answers(ms(300), "w2", 200, ietf(100, 60, 2, 60)))
		require.Zero(t, y.grantsAt(ms(300)))
		y.play(answers(ms(310), "w0", 200, ietf(100, 60, 4, 60)))
		y.play(answers(ms(320), "w1", 200, ietf(100, 60, 3, 60)))
		require.Zero(t, y.grantsAt(ms(320)), "w3 and w4 are still in flight")
		y.play(answers(ms(330), "w3", 200, ietf(100, 60, 1, 60)))
		y.play(answers(ms(340), "w4", 200, ietf(100, 60, 0, 60)))
		require.Zero(t, y.grantsAt(ms(350)))
	})
	t.Run("answers in the order counted release nothing more", func(t *testing.T) {
		y := answered(t, nil, ietf(100, 60, 5, 60))
		got, _ := y.grants(ms(200), 16, "w", Request{})
		require.Equal(t, 5, got)
		inflight := 5
		for i := range 5 {
			y.play(answers(ms(300+10*i), fmt.Sprint("w", i), 200, ietf(100, 60, 4-i, 60)))
			inflight--
			n := y.grantsAt(ms(305 + 10*i))
			require.LessOrEqualf(t, inflight+n, 5, "after w%d: %d in flight, %d more granted", i, inflight, n)
			require.Zero(t, n)
		}
	})
}

// firstGrant asks for req from t0+from, again at each refusal's At (at
// most a thousand times), until it is granted, and returns when, since t0.
// The story's state is not changed.
func (y *story) firstGrant(from time.Duration, req Request) time.Duration {
	y.t.Helper()
	c := y.fork()
	at := t0.Add(from)
	for range 1000 {
		d := c.st.Reserve(at, req, c.cfg)
		if d.OK {
			return at.Sub(t0)
		}
		require.Truef(y.t, d.At.After(at), "ask again at %v, not after %v", d.At, at)
		at = d.At
	}
	y.t.Fatalf("not granted from +%v to +%v", from, at.Sub(t0))
	return 0
}

// ---------------------------------------------------------------------------
// Pauses belong to the bucket that was refused.

// TestPauseBelongsToBucket guards issue 17's defect "a 429 from GitHub's
// search resource (Retry-After: 3600) pauses the whole key: core requests
// with 4,000 remaining fail locally for an hour": a pause holds only the
// server-named bucket that was refused, and the routes learnt to be in it.
func TestPauseBelongsToBucket(t *testing.T) {
	core := Request{Route: "GET /repos/o/r/issues"}
	search := Request{Route: "GET /search/issues"}
	user := Request{Route: "GET /user"} // never seen: the key's first bucket
	searchRefused := withHdr(github("search", 30, 0, t0.Add(sec(60))), "Retry-After", "3600")
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "GitHub: a 429 from search pauses search, not core",
		steps: []step{
			goesFirst(0, "a").asking(core),
			answers(ms(100), "a", 200, github("core", 5000, 4000, t0.Add(time.Hour))),
			goes(ms(200), "b").asking(search),
			answers(ms(300), "b", 429, searchRefused),
			waits(ms(300), WhyPaused, ms(300)+sec(3600), true).asking(search),
			goes(ms(300), "c").asking(core),
			goes(ms(300), "d").asking(core),
			goes(ms(300), "e").asking(user),
			waits(sec(1800), WhyPaused, ms(300)+sec(3600), true).asking(search),
			goes(sec(1800), "f").asking(core),
		},
	}, {
		name: "GitHub: a 403 secondary limit on core (Retry-After: 60) pauses core, not search",
		steps: []step{
			goesFirst(0, "a").asking(search),
			answers(ms(100), "a", 200, github("search", 30, 29, t0.Add(sec(60)))),
			goes(ms(200), "b").asking(core),
			answers(ms(300), "b", 200, github("core", 5000, 4000, t0.Add(time.Hour))),
			goes(ms(400), "c").asking(core),
			answers(ms(500), "c", 403, withHdr(github("core", 5000, 3999, t0.Add(time.Hour)), "Retry-After", "60")),
			waits(ms(500), WhyPaused, ms(500)+sec(60), true).asking(core),
			goes(ms(500), "d").asking(search),
		},
	}, {
		name: "the pause ends: one request goes first, the rest wait for its answer",
		steps: []step{
			goesFirst(0, "a").asking(core),
			answers(ms(100), "a", 200, github("core", 5000, 4000, t0.Add(time.Hour))),
			goes(ms(200), "b").asking(search),
			answers(ms(300), "b", 429, withHdr(github("search", 30, 0, t0.Add(sec(10))), "Retry-After", "10")),
			waits(ms(10299), WhyPaused, ms(10300), true).asking(search),
			goesFirst(ms(10300), "c").asking(search),
			waitsForAnswer(ms(10300), WhyProbe).asking(search),
			goes(ms(10300), "d").asking(core),
			answers(ms(10400), "c", 200, github("search", 30, 29, t0.Add(sec(70)))),
			goes(ms(10400), "e").asking(search),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newStory(t, nil).play(tt.steps...)
		})
	}
}

// TestForbiddenWithRetryAfterPauses guards issue 17's defect "a 403 with
// Retry-After: 2 (GitHub's secondary limit) is neither waited for nor
// paused: the next request leaves 0.1 ms later": a 403 with a Retry-After,
// or one saying its quota is exhausted, is a refusal that pauses its
// bucket; a 403 without either is an ordinary 403 and pauses nothing.
func TestForbiddenWithRetryAfterPauses(t *testing.T) {
	tests := []struct {
		name  string
		base  http.Header // the first answer
		h     http.Header // the 403's headers
		pause time.Duration
	}{
		{"Retry-After: 2 alone, on a server without headers", nil, hdr("Retry-After", "2"), sec(2)},
		{"Retry-After: 2 alone, on a server with headers", ietf(100, 60, 90, 60), hdr("Retry-After", "2"), sec(2)},
		{"Retry-After: 2 with quota left (GitHub's secondary limit)", github("core", 5000, 4000, t0.Add(time.Hour)),
			withHdr(github("core", 5000, 3999, t0.Add(time.Hour)), "Retry-After", "2"), sec(2)},
		{"no Retry-After, no headers", nil, nil, 0},
		{"no Retry-After, quota left", ietf(100, 60, 90, 60), ietf(100, 60, 89, 60), 0},
		{"no Retry-After, GitHub quota left", github("core", 5000, 4000, t0.Add(time.Hour)),
			github("core", 5000, 3999, t0.Add(time.Hour)), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := refusedOnce(t, tt.base, 403, tt.h)
			if tt.pause == 0 {
				y.play(goes(ms(300), "c"), goes(ms(301), "d"))
				return
			}
			y.play(
				waits(ms(300), WhyPaused, ms(300)+tt.pause, true),
				waits(ms(300)+tt.pause-ms(1), WhyPaused, ms(300)+tt.pause, true),
				goesFirst(ms(300)+tt.pause, "c"),
			)
		})
	}
}

// TestRetryAfterOfOneUnit: a Retry-After of one second (or one
// millisecond, in a form that has them) may be all rounding: a bucket that
// returns a request every 20 ms says 1. On a key whose server sends no
// rate-limit headers, a refusal's silent model knows as much as the pause
// would tell, so such a Retry-After pauses nothing (the refused request
// itself still waits it out, in the retry layer); a longer one pauses the
// key as it says, and so do one of a second on a key whose headers
// describe its quota and a date a second ahead (an instant, often when a
// window's quota returns: go-limiter's, without its other headers, was
// taken for a window of 2 s in one run of three when its dates paused
// nothing). (A pause of a whole
// second for each refusal held a silent bucket with a burst of 1-6, 50/s,
// to 1.3-3.2x the ideal in the grid, where the same bucket answering
// without Retry-After ran 1.01-2.1x; 1.02-1.9x after.)
func TestRetryAfterOfOneUnit(t *testing.T) {
	for _, tt := range []struct {
		name  string
		base  http.Header // the first answer
		h     http.Header // the 429's headers
		pause time.Duration
	}{
		{"no headers, Retry-After: 1", nil, hdr("Retry-After", "1"), 0},
		{"no headers, Retry-After-Ms: 1", nil, hdr("Retry-After-Ms", "1"), 0},
		{"no headers, Retry-After: 2", nil, hdr("Retry-After", "2"), sec(2)},
		{"no headers, Retry-After-Ms: 40", nil, hdr("Retry-After-Ms", "40"), ms(40)},
		{"no headers, Retry-After-Ms: 1000 (exact, not rounded)", nil, hdr("Retry-After-Ms", "1000"), sec(1)},
		{"headers, Retry-After: 1", ietf(100, 60, 90, 60), withHdr(ietf(100, 60, 0, 1), "Retry-After", "1"), sec(1)},
		{"no headers, a Retry-After date a second after Date", nil,
			hdr("Date", "Sat, 01 Jan 2000 00:00:00 GMT", "Retry-After", "Sat, 01 Jan 2000 00:00:01 GMT"), sec(1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			y := refusedOnce(t, tt.base, 429, tt.h)
			if tt.pause == 0 {
				// Held, if at all, by what the refusal taught.
				d := y.st.Reserve(t0.Add(ms(300)), Request{}, nil)
				require.True(t, d.OK || d.Why == WhyAdaptive, "%v: %s", d.Why, d.Detail)
				return
			}
			y.play(waits(ms(300), WhyPaused, ms(300)+tt.pause, true))
			if tt.base != nil {
				y.play(goesFirst(ms(300)+tt.pause, "c"))
			}
		})
	}
}

// TestRetryAfterOfOneUnitOnABucket: where the answers proved a bucket (its
// other candidates refuted, its rate measured), a refusal's one-second
// Retry-After holds the key no longer than the bucket takes to fill at
// that rate: a bucket of 10 at 200/s, 50 ms. (A whole second per refusal
// took token buckets and GCRA of 200/s with a burst of 10, on 20 ms round
// trips, to 1.5-2.3x the ideal; 1.0-1.2x after.) A longer Retry-After,
// and any while another candidate stands, pause as they say.
func TestRetryAfterOfOneUnitOnABucket(t *testing.T) {
	for _, tt := range []struct {
		name  string
		alive uint8
		ra    string
		want  time.Duration
	}{
		{"a bucket, Retry-After: 1", 1 << cBucket, "1", ms(50)},
		{"a bucket, Retry-After: 2", 1 << cBucket, "2", sec(2)},
		{"a bucket or a window, Retry-After: 1", 1<<cBucket | 1<<cWindow, "1", sec(1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := &keyState{policies: []policy{{limit: 10, limitSaid: true, alive: tt.alive, rLo: 200}}}
			obs := ratelimit.ParseHeaders(hdr("Retry-After", tt.ra), http.StatusTooManyRequests, t0)
			a := answer{l: &lease{}, recv: int64(sec(5)), refused: true, ra: int64(obs.RetryAfter), raOne: obs.RetryAfter <= time.Second, k: k}
			k.pause(&a, &obs, "", nil)
			require.Equal(t, sec(5)+tt.want, time.Duration(k.findBucket("").pause))
		})
	}
}

// ---------------------------------------------------------------------------
// Declared quotas.

// TestDeclaredQuotaMargin guards issue 17's defect "WithQuota(pattern, 5,
// time.Second) against a server enforcing exactly 5/s: 1-3 refusals in 8 of
// 9 runs (the first requests reach the server late, after connection
// setup; the declared log keeps no margin)": a declared quota's slot frees
// one window after the latest instant its request can have reached the
// server (its answer, less the way back), for a request that reaches the
// server after its own way there; not one window after it was sent.
func TestDeclaredQuotaMargin(t *testing.T) {
	cfg := &Config{Quotas: []Quota{{Limit: 5, Window: time.Second}}}
	q := Request{Quotas: []int{0}}
	tests := []struct {
		name     string
		firstRTT time.Duration // the first request's round trip
		rtt      time.Duration // the others'
		// The sixth is granted in [lo, hi].
		lo, hi time.Duration
	}{
		// A connection set up first: the first request reaches the
		// server up to 80 ms - 1 ms after it left; its slot frees a
		// second after that, and the sixth takes at least 0.8 ms to get
		// there (leadShare of half the least round trip). Before the
		// fix it was granted at +1s.
		{"first answer after 80 ms, then 2 ms", ms(80), ms(2), ms(80) + sec(1) - ms(2), ms(80) + sec(1)},
		// Constant round trips: the sixth is granted a second after the
		// first was sent, and a little margin.
		{"every answer after 2 ms", ms(2), ms(2), sec(1), sec(1) + ms(1)},
		{"every answer after 40 ms", ms(40), ms(40), sec(1), sec(1) + ms(20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := newStory(t, cfg)
			y.play(
				goesFirst(0, "a").asking(q),
				answers(tt.firstRTT, "a", 200, nil),
			)
			at := tt.firstRTT
			for i := range 4 {
				name := fmt.Sprint("w", i)
				y.play(goes(at, name).asking(q), answers(at+tt.rtt, name, 200, nil))
			}
			y.play(waits(at+tt.rtt, WhyDeclared, 0, true).asking(q).within(2 * sec(1)))
			got := y.firstGrant(at+tt.rtt, q)
			t.Logf("the sixth is granted at +%v", got)
			require.GreaterOrEqual(t, got, tt.lo, "the sixth would reach the server before the first one's slot frees")
			require.LessOrEqual(t, got, tt.hi, "the sixth waits longer than the quota asks")
		})
	}
}

// ---------------------------------------------------------------------------
// Cancel and expired leases.

// TestCancel guards Cancel: a cancelled lease's request never left, so it
// stops counting against the quota at once; cancelling twice, or a lease
// already answered, gives nothing more back.
func TestCancel(t *testing.T) {
	base := ietf(100, 60, 2, 60) // 2 left at +100ms
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "a cancelled lease gives its unit back",
		steps: []step{
			goes(ms(200), "a"),
			goes(ms(200), "b"),
			waits(ms(200), 0, ms(200)+pollStep, false).around(pollStep).anyDefinite(),
			cancels(ms(210), "a"),
			goes(ms(210), "c"),
			waits(ms(210), 0, ms(210)+pollStep, false).around(pollStep).anyDefinite(),
		},
	}, {
		name: "cancelling twice gives it back once",
		steps: []step{
			goes(ms(200), "a"),
			goes(ms(200), "b"),
			cancels(ms(210), "a"),
			cancels(ms(210), "a"),
			goes(ms(210), "c"),
			waits(ms(210), 0, ms(210)+pollStep, false).around(pollStep).anyDefinite(),
		},
	}, {
		name: "cancelling an answered lease gives nothing back",
		steps: []step{
			goes(ms(200), "a"),
			goes(ms(200), "b"),
			answers(ms(300), "a", 200, ietf(100, 60, 1, 60)),
			cancels(ms(310), "a"),
			waits(ms(310), 0, ms(310)+pollStep, false).around(pollStep).anyDefinite(),
		},
	}, {
		name: "a declared quota's place comes back",
		steps: []step{
			goes(ms(200), "a").asking(Request{Quotas: []int{0}}),
			// Its slot is in flight: an answer frees it no sooner than a
			// minute after; ask again soon all the same.
			waits(ms(200), WhyDeclared, ms(200)+pollStep, true).asking(Request{Quotas: []int{0}}).within(time.Minute),
			cancels(ms(300), "a"),
			goes(ms(300), "b").asking(Request{Quotas: []int{0}}),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answered(t, &Config{Quotas: []Quota{{Limit: 1, Window: time.Minute}}}, base).play(tt.steps...)
		})
	}
	t.Run("the zero Lease and unknown leases are ignored", func(t *testing.T) {
		y := answered(t, nil, base)
		y.play(goes(ms(200), "a"))
		y.st.Cancel(Lease{}, nil)
		y.st.Cancel(Lease{l: lease{seq: 42}}, nil)
		y.play(goes(ms(200), "b"), waits(ms(200), 0, ms(200)+pollStep, false).around(pollStep).anyDefinite())
	})
}

// TestLeaseTTL guards the expiry of abandoned leases: a lease neither
// completed nor cancelled stops counting as in flight after
// Config.LeaseTTL (DefaultLeaseTTL), and its late answer is taken in all
// the same.
func TestLeaseTTL(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  *Config
		ttl  time.Duration
		// overdue is the ttl once the key has answered (round trips of
		// 100 ms: 32 of them are less than overdueFloor).
		overdue time.Duration
	}{
		{"default", nil, DefaultLeaseTTL, overdueFloor},
		{"Config.LeaseTTL", &Config{LeaseTTL: 5 * time.Second}, 5 * time.Second, 5 * time.Second},
	} {
		t.Run(tt.name+": a first request never answered stops holding the rest", func(t *testing.T) {
			y := newStory(t, tt.cfg)
			y.play(
				goesFirst(0, "a"),
				// Asks again when a's lease expires at the latest.
				waits(tt.ttl-ms(1), WhyFirstAnswer, tt.ttl, false).within(pollStep),
				goesFirst(tt.ttl, "b"),
				waitsForAnswer(tt.ttl, WhyFirstAnswer),
				// a's answer, late, is taken in all the same.
				answers(tt.ttl+ms(1), "a", 200, ietf(100, 600, 98, 600)),
				goes(tt.ttl+ms(1), "c"),
			)
		})
		t.Run(tt.name+": after a pause, a request gone first and never answered lets another go first", func(t *testing.T) {
			y := answered(t, tt.cfg, ietf(100, 600, 50, 600))
			y.play(
				goes(ms(200), "a"),
				answers(ms(300), "a", 429, withHdr(ietf(100, 600, 40, 500), "Retry-After", "5")),
				goesFirst(ms(5300), "b"),
				waits(ms(5300)+tt.overdue-ms(1), WhyProbe, ms(5300)+tt.overdue, false).within(pollStep),
				goesFirst(ms(5300)+tt.overdue, "c"),
			)
		})
	}
	// With a short LeaseTTL (after a minute, a bucket refilling at
	// minProbeRate may have a unit back, and a probe would go).
	for _, tt := range []struct {
		cfg *Config
		ttl time.Duration
	}{
		{&Config{LeaseTTL: time.Second}, time.Second},
		{&Config{LeaseTTL: 5 * time.Second}, 5 * time.Second},
	} {
		t.Run(fmt.Sprint(tt.ttl)+": an expired lease no longer counts as in flight", func(t *testing.T) {
			// A daily quota: nothing returns in the seconds this takes,
			// and nothing is worth a probe.
			y := answered(t, tt.cfg, ietf(100, 86400, 3, 86400))
			y.play(goes(ms(200), "lost"), goes(ms(300), "b"))
			require.Equal(t, 1, y.grantsAt(ms(200)+tt.ttl-ms(1)), "lost and b in flight")
			require.Equal(t, 2, y.grantsAt(ms(200)+tt.ttl), "lost expired, b in flight")
			at := ms(200) + tt.ttl
			// b's answer says 1 left: lost and b were counted; lost is no
			// longer in flight: 1 is sure.
			y.play(answers(at+ms(100), "b", 200, ietf(100, 86400, 1, 86390)))
			require.Equal(t, 1, y.grantsAt(at+ms(200)), y.describe(t0.Add(at+ms(200))))
		})
	}
}

// ---------------------------------------------------------------------------
// Robustness.

// checkDecision checks what holds of every decision at now: a grant is
// numbered one more than the last and dated now; a wait asks again after
// now, within maxPause, for a reason.
func checkDecision(t *testing.T, now time.Time, seq uint64, d Decision, maxPause time.Duration) {
	t.Helper()
	if d.OK {
		require.Equal(t, seq+1, d.Lease.Seq())
		require.True(t, d.Lease.At().Equal(now))
		return
	}
	require.NotZero(t, d.Why)
	require.Truef(t, d.At.After(now), "%v: ask again at %v, not after now %v (%s)", d.Why, d.At, now, d.Detail)
	require.LessOrEqualf(t, d.At.Sub(now), maxPause, "%v: wait %v (%s)", d.Why, d.At.Sub(now), d.Detail)
}

// TestAbsurdNumbers guards the bounds on what a server says: huge, zero,
// negative or garbage numbers (a remaining of -1e9 or 1e18, a window of a
// century, a Retry-After of 100 years) never panic, never make a wait ask
// again at or before now, nor wait longer than Config.MaxPause
// (DefaultMaxPause).
func TestAbsurdNumbers(t *testing.T) {
	huge := "99999999999999999999999"
	century := fmt.Sprint(int64(100 * 365 * 24 * 3600))
	tests := []struct {
		name   string
		status int
		h      http.Header
	}{
		{"zero quota", 200, ietf(0, 0, 0, 0)},
		{"zero window", 200, ietf(10, 0, 0, 5)},
		{"zero reset", 200, ietf(10, 1, 0, 0)},
		{"remaining above the limit", 200, ietf(10, 1, 1<<40, 1)},
		{"remaining -1e9", 200, hdr("X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "-1000000000", "X-RateLimit-Reset", "5")},
		{"remaining 1e18", 200, hdr("X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "1000000000000000000", "X-RateLimit-Reset", "5")},
		{"limit and remaining 1e18", 200, hdr("RateLimit-Policy", `"default";q=1000000000000000000;w=1`, "RateLimit", `"default";r=1000000000000000000;t=1`)},
		{"huge remaining", 200, hdr("RateLimit-Policy", `"default";q=`+huge+`;w=1`, "RateLimit", `"default";r=`+huge+`;t=1`)},
		{"a century's window, spent", 200, hdr("RateLimit-Policy", `"default";q=1;w=`+century, "RateLimit", `"default";r=0;t=`+century)},
		{"a century's window, no reset", 200, hdr("RateLimit-Policy", `"default";q=1;w=`+century, "RateLimit", `"default";r=0`)},
		{"huge reset", 200, hdr("RateLimit-Policy", `"default";q=10;w=1`, "RateLimit", `"default";r=0;t=`+huge)},
		{"far-future epoch reset", 200, hdr("X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "99999999999")},
		{"negative numbers", 200, hdr("X-RateLimit-Limit", "-10", "X-RateLimit-Remaining", "-1", "X-RateLimit-Reset", "-5")},
		{"garbage", 200, hdr("X-RateLimit-Limit", "ten", "X-RateLimit-Remaining", "0x1", "X-RateLimit-Reset", "soon")},
		{"429 with Retry-After of 100 years", 429, hdr("Retry-After", century)},
		{"429 with a huge Retry-After", 429, hdr("Retry-After", huge)},
		{"429 with a zero Retry-After", 429, hdr("Retry-After", "0")},
		{"429 with a Retry-After in the past", 429, hdr("Retry-After", "Mon, 01 Jan 1990 00:00:00 GMT")},
		{"429 with r=0 and a huge reset", 429, hdr("RateLimit-Policy", `"default";q=10;w=1`, "RateLimit", `"default";r=0;t=`+huge)},
		{"429 with everything zero", 429, ietf(0, 0, 0, 0)},
		{"403 with a century's Retry-After", 403, hdr("Retry-After", century)},
		{"503 with a huge Retry-After", 503, hdr("Retry-After", huge)},
		{"huge token costs", 200, hdr("x-ratelimit-limit-tokens", "4611686018427387904", "x-ratelimit-remaining-tokens", "4611686018427387904", "x-ratelimit-reset-tokens", "1m0s")},
		{"tokens exhausted for a century", 200, hdr("x-ratelimit-limit-tokens", "100", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "876000h")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, cfg := range []*Config{nil, {MaxPause: time.Hour}} {
				for _, start := range []http.Header{nil, ietf(10, 1, 5, 1)} {
					maxPause := DefaultMaxPause
					if cfg != nil {
						maxPause = cfg.MaxPause
					}
					y := answered(t, cfg, start)
					y.play(goes(ms(200), "a"), goes(ms(200), "b"))
					y.play(answers(ms(300), "a", tt.status, tt.h))
					y.play(answers(ms(300), "b", tt.status, tt.h))
					for _, at := range []time.Duration{ms(300), sec(1), time.Hour, 25 * time.Hour, 100 * 24 * time.Hour} {
						now := t0.Add(at)
						for _, req := range []Request{{}, {Cost: []Amount{{Unit: ratelimit.UnitTokens, N: 1 << 61}}}} {
							d := y.st.Reserve(now, req, cfg)
							checkDecision(t, now, y.seq, d, maxPause)
							if d.OK {
								y.seq = d.Lease.Seq()
								y.st.Complete(now.Add(ms(10)), d.Lease, y.answer(now.Add(ms(10)), tt.status, tt.h, time.Time{}), cfg)
							}
						}
					}
				}
			}
		})
	}
}

// TestPaceEarliest: n requests after one sent at at take at least n/Limit
// (rounded down) less Slack windows; the zero Pace bounds nothing; a huge
// n saturates rather than overflows.
func TestPaceEarliest(t *testing.T) {
	at := t0
	p := Pace{Limit: 50, Window: time.Second}
	require.Equal(t, at, p.Earliest(at, 49))
	require.Equal(t, at.Add(time.Second), p.Earliest(at, 50))
	require.Equal(t, at.Add(60*time.Second), p.Earliest(at, 3000))
	p.Slack = 1
	require.Equal(t, at, p.Earliest(at, 50))
	require.Equal(t, at.Add(59*time.Second), p.Earliest(at, 3000))
	require.Equal(t, at, Pace{}.Earliest(at, 1e9))
	require.Equal(t, at.Add(time.Duration(maxHorizon)), Pace{Limit: 1, Window: time.Hour}.Earliest(at, math.MaxInt64))
}

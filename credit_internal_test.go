package headway

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/internal/testkit/fakeclock"
	"github.com/headway-go/headway/pace"
	"github.com/headway-go/headway/ratelimit"
)

// The defects a review of credit.go found, each with the test that showed
// it (they failed before their fixes).

// ghAnswer is a 200 with GitHub's headers: left of limit in resource.
func ghAnswer(resource string, left, limit int, at time.Time) pace.Answer {
	h := http.Header{
		"X-Ratelimit-Limit":     {strconv.Itoa(limit)},
		"X-Ratelimit-Remaining": {strconv.Itoa(left)},
		"X-Ratelimit-Used":      {strconv.Itoa(limit - left)},
		"X-Ratelimit-Resource":  {resource},
		"X-Ratelimit-Reset":     {strconv.FormatInt(at.Add(time.Hour).Unix(), 10)},
	}
	return pace.Answer{Obs: ratelimit.ParseHeaders(h, http.StatusOK, at)}
}

// TestCreditRouteMovesBucket: a bucket's credit is counted through one of
// its routes; when that route's answers name another bucket, the bucket it
// left no longer gets the new bucket's room. Here A and B go to "core",
// then A to "search" (4,999 left), then B to "core" with 1 left: B is lent
// nothing (it was lent the search bucket's credit before).
func TestCreditRouteMovesBucket(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	clk := fakeclock.New(ms(80), false)
	var cfg pace.Config
	var s pace.State
	var f fastBook
	const A, B = "GET /a", "GET /b"
	step := func(at int, route, bucket string, left int) {
		d := s.Reserve(ms(at), pace.Request{Route: route}, &cfg)
		require.True(t, d.OK, "step at %d", at)
		// What completeAt does.
		f.update(&s, ms(at+10), d.Lease.At(), &cfg, route, bucket, true, func() {
			s.Complete(ms(at+10), d.Lease, ghAnswer(bucket, left, 5000, ms(at+10)), &cfg)
		})
	}
	step(0, A, "core", 4990)
	step(20, B, "core", 4989)
	n, _, _, _ := takeRoute(&f, B, clk)
	require.NotZero(t, n, "core is ample: B goes on credit")
	step(40, A, "search", 4999) // A's answers now name another bucket
	step(60, B, "core", 1)      // core all but spent
	require.Zero(t, s.Credit(ms(70), B), "the state lends B nothing")
	n, _, _, _ = takeRoute(&f, B, clk)
	require.Zero(t, n, "nor does the key's credit")
	n, _, _, _ = takeRoute(&f, A, clk)
	require.NotZero(t, n, "search is ample: A goes on credit")
}

// TestCreditPendingRecordsAreBookedAtSweep: a host that got two GETs (the
// second on credit) and none since has its request booked in its state,
// and its waiters forgotten, by the sweeps: before, the unbooked request
// kept the key's waiters for ever (1,001 kept of 1,000 idle hosts).
func TestCreditPendingRecordsAreBookedAtSweep(t *testing.T) {
	const n = 1000
	clk := fakeclock.New(loStart, true)
	rt := NewTransport(&gateTransport{}, WithClock(clk)).(*retryTransport) // never closed: ample IETF headers
	p := rt.next.(*pacer)
	reclaimHosts(t, rt, 0, n)
	reclaimHosts(t, rt, 0, n) // the second GET to each goes on credit
	onCredit := 0
	for i := range n {
		onCredit += SentOnCredit(rt, fmt.Sprintf("h%d.test", i))
	}
	require.Equal(t, n, onCredit)
	for range 3 {
		clk.Advance(time.Minute + time.Second)
		reclaimHosts(t, rt, n, 1) // another host: makes a sweep due
		require.Eventually(t, func() bool { return !p.sweeper.running.Load() }, 5*time.Second, time.Millisecond)
	}
	kept := 0
	p.waiters.Range(func(any, any) bool { kept++; return true })
	require.Less(t, kept, 10, "idle hosts' waiters are forgotten")
	s, err := p.mem.Load(t.Context(), "h7.test")
	require.NoError(t, err)
	require.Zero(t, s.InFlight())
}

// gateTransport answers 200 with ample IETF headers; while closed it holds
// each request until opened, counting those that arrived.
type gateTransport struct {
	mu      sync.Mutex
	closed  bool
	open    chan struct{}
	arrived atomic.Int64
}

func (g *gateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	g.arrived.Add(1)
	g.mu.Lock()
	closed, open := g.closed, g.open
	g.mu.Unlock()
	if closed {
		<-open
	}
	h := http.Header{
		"Ratelimit-Policy": {`"default";q=1000;w=60`},
		"Ratelimit":        {`"default";r=990;t=30`},
	}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: h, Body: http.NoBody, Request: req}, nil
}

// TestCreditLapsesWithTime: a credit is not spent long after it was
// counted: after the key's state expired (IdleTTL: what the server said
// is forgotten), a burst of 20 requests sends one first and holds the rest
// for its answer, as the model says; on the old credit all 20 went at once.
func TestCreditLapsesWithTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gateTransport{open: make(chan struct{})}
		rt := NewTransport(g, WithMaxWait(time.Hour))
		get := func() {
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/items", nil)
			if resp, err := rt.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}
		get()
		time.Sleep(10 * time.Millisecond)
		get()
		time.Sleep(30 * time.Minute) // the key's state expires
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
		g.arrived.Store(0)
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(get)
		}
		synctest.Wait()
		require.EqualValues(t, 1, g.arrived.Load(), "the first request goes alone")
		close(g.open)
		wg.Wait()
	})
}

// TestCreditHeaderlessAnswerKeepsRoute: an answer without rate-limit
// headers (a 502 from a proxy in front of GitHub) does not move its route
// out of the bucket its last answer named ("core"), as the state does not:
// before (found in a second review), two of the key's credits were counted
// from the one bucket, each half of its room, so the whole room was lent.
func TestCreditHeaderlessAnswerKeepsRoute(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	clk := fakeclock.New(ms(100), false)
	var cfg pace.Config
	var s pace.State
	var f fastBook
	const A, B = "GET /a", "GET /b"
	step := func(at int, route, bucket string, a pace.Answer) {
		d := s.Reserve(ms(at), pace.Request{Route: route}, &cfg)
		require.True(t, d.OK, "step at %d", at)
		f.update(&s, ms(at+10), d.Lease.At(), &cfg, route, bucket, bucket != "", func() {
			s.Complete(ms(at+10), d.Lease, a, &cfg)
		})
	}
	step(0, A, "core", ghAnswer("core", 395, 400, ms(10)))
	step(20, B, "core", ghAnswer("core", 394, 400, ms(30)))
	// A 502 with no headers: what complete() passes is route A, bucket "".
	step(40, A, "", pace.Answer{Obs: ratelimit.ParseHeaders(http.Header{}, http.StatusBadGateway, ms(50))})
	step(60, B, "core", ghAnswer("core", 390, 400, ms(70)))

	whole := s.Credit(ms(70), B)
	require.EqualValues(t, 195, whole, "half of the 390 left")
	taken := 0
	for _, r := range []string{A, B} {
		for {
			n, _, _, _ := takeRoute(&f, r, clk)
			if n == 0 {
				break
			}
			taken++
		}
	}
	require.LessOrEqual(t, int64(taken), whole, "requests lent on core's credit, of 390 left (the state's Credit is %d)", whole)
}

// TestCreditRouteInUseIsRemembered: the state forgets the routes answered
// longest ago (of 64), and a route answered again is the newest. Before
// (found in a second review), a route answered again in the same bucket
// stayed the oldest, was forgotten while the key's credit still lent to it
// through its bucket, and its requests were booked in the state's default
// bucket: the bucket whose credit they spent counted them as not gone.
func TestCreditRouteInUseIsRemembered(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := 0
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	clk := fakeclock.New(ms(0), false)
	var cfg pace.Config
	var s pace.State
	var f fastBook
	left := map[string]int{"core": 4000, "search": 400}
	step := func(route, bucket string) {
		at += 10
		d := s.Reserve(ms(at), pace.Request{Route: route}, &cfg)
		require.True(t, d.OK, "%s at %d", route, at)
		left[bucket]--
		f.update(&s, ms(at+5), d.Lease.At(), &cfg, route, bucket, true, func() {
			s.Complete(ms(at+5), d.Lease, ghAnswer(bucket, left[bucket], 5000, ms(at+5)), &cfg)
		})
		clk.Set(ms(at + 5))
	}
	id := func(i int) string { return fmt.Sprintf("GET /id/%d", i) }
	const X, B, Y = "GET /x", "GET /b", "GET /y"
	step(X, "core")
	step(B, "search")
	step(Y, "search")
	for i := 1; i <= 62; i++ {
		step(id(i), "core")
	}
	step(Y, "search")
	// Y goes on credit once, and is booked: Spent makes it the newest.
	n, _, _, _ := takeRoute(&f, Y, clk)
	require.NotZero(t, n)
	require.True(t, f.answered(n, clk))
	step(B, "search") // answered again: B is the newest route
	step(id(63), "core")
	require.Positive(t, s.Credit(ms(at+5), B), "the state remembers B")
	before := s.Credit(ms(at+5), Y)
	require.Positive(t, before)

	// 50 requests to B on search's credit, answered, and booked.
	for range 50 {
		n, _, _, _ := takeRoute(&f, B, clk)
		require.NotZero(t, n, "B is lent search's credit")
		require.True(t, f.answered(n, clk))
	}
	f.update(&s, ms(at+6), time.Time{}, &cfg, "", "", false, func() {})
	after := s.Credit(ms(at+6), Y)
	require.Less(t, after, before, "search's credit after 50 of its units were spent")
}

// takeRoute takes a unit of route's credit in f (route as "METHOD /path").
func takeRoute(f *fastBook, route string, clk Clock) (uint64, string, time.Time, time.Duration) {
	method, path, _ := strings.Cut(route, " ")
	return f.take(method, path, clk, new(atomic.Bool))
}

// TestCreditSilentBookedBeforeTheAnswer: on a key whose server sends no
// rate-limit headers, every request sent on credit is booked before a slow
// answer (a refusal) is taken in: the answered ones as admitted, the ones
// still in flight as leases, so that the refusal is weighed after the
// admissions that may have reached the server before it. Before, only those
// answered before the refused request was sent were: the others went in
// after the refusal, which the silent model had weighed without them.
func TestCreditSilentBookedBeforeTheAnswer(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	clk := fakeclock.New(t0, false)
	var cfg pace.Config
	var s pace.State
	var f fastBook
	const route = "GET /items"
	ok := pace.Answer{Obs: ratelimit.Observation{Status: http.StatusOK}}
	d := s.Reserve(t0, pace.Request{Route: route}, &cfg)
	f.update(&s, ms(10), d.Lease.At(), &cfg, route, "", false, func() { s.Complete(ms(10), d.Lease, ok, &cfg) })
	require.True(t, s.Silent())
	clk.Set(ms(20))
	refusedSlow := s.Reserve(ms(20), pace.Request{Route: route}, &cfg) // the slow request, sent first
	require.True(t, refusedSlow.OK)
	var sent []uint64
	for i := range 6 {
		clk.Set(ms(21 + i))
		n, _, _, _ := takeRoute(&f, route, clk)
		require.NotZero(t, n, "a silent key that never refused goes on credit")
		sent = append(sent, n)
	}
	clk.Set(ms(40))
	for _, n := range sent[:3] {
		require.True(t, f.answered(n, clk)) // after the slow request was sent
	}
	f.update(&s, ms(45), refusedSlow.Lease.At(), &cfg, route, "", false, func() {
		require.Empty(t, f.recs, "every request on credit is booked before the answer")
		require.Len(t, f.lent, 3, "those in flight as leases")
		s.Complete(ms(45), refusedSlow.Lease, pace.Answer{Obs: ratelimit.Observation{Status: http.StatusTooManyRequests}}, &cfg)
	})
	require.Zero(t, s.Credit(ms(45), route), "refused: every answer is read from now on")
}

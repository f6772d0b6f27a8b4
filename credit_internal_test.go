package headway

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/internal/fakeclock"
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
		f.update(&s, ms(at+10), d.Lease.At(), &cfg, route, bucket, func() {
			s.Complete(ms(at+10), d.Lease, ghAnswer(bucket, left, 5000, ms(at+10)), &cfg)
		})
	}
	step(0, A, "core", 4990)
	step(20, B, "core", 4989)
	n, _, _ := f.take([]byte(B), clk, func() bool { return false })
	require.NotZero(t, n, "core is ample: B goes on credit")
	step(40, A, "search", 4999) // A's answers now name another bucket
	step(60, B, "core", 1)      // core all but spent
	require.Zero(t, s.Credit(ms(70), B), "the state lends B nothing")
	n, _, _ = f.take([]byte(B), clk, func() bool { return false })
	require.Zero(t, n, "nor does the key's credit")
	n, _, _ = f.take([]byte(A), clk, func() bool { return false })
	require.NotZero(t, n, "search is ample: A goes on credit")
}

// TestCreditPendingRecordsAreBookedAtSweep: a host that got two GETs (the
// second on credit) and none since has its request booked in its state,
// and its waiters forgotten, by the sweeps: before, the unbooked request
// kept the key's waiters for ever (1,001 kept of 1,000 idle hosts).
func TestCreditPendingRecordsAreBookedAtSweep(t *testing.T) {
	const n = 1000
	clk := fakeclock.New(loStart, true)
	rt := NewTransport(okTransport{}, WithClock(clk)).(*retryTransport)
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

package redisstore

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/ratelimittest"
)

// These tests run headway transports ("processes": each its own transport,
// go-redis client and Store) against a ratelimittest server on loopback, on
// real time, with the pacing state in a real redis-server that they kill or
// pause mid-run.

// fleet is several headway clients that share a quota, each with its own
// Store on one Redis.
type fleet struct {
	t       *testing.T
	srv     *ratelimittest.Server
	policy  ratelimittest.Quota
	stores  []*Store
	clients []*http.Client
	workers int // per client

	mu     sync.Mutex
	events [][]Event // per store
}

// fleetSpec describes a fleet.
type fleetSpec struct {
	policy     ratelimittest.Quota
	serverOpts []ratelimittest.Option
	processes  int
	workers    int // per process
	redis      func(i int) redis.UniversalClient
	storeOpts  []Option
}

// newFleet starts the server and the processes' clients.
func newFleet(t *testing.T, spec fleetSpec) *fleet {
	t.Helper()
	f := &fleet{t: t, policy: spec.policy, workers: spec.workers, events: make([][]Event, spec.processes)}
	f.srv = ratelimittest.NewServer(nil, append([]ratelimittest.Option{ratelimittest.WithQuota(spec.policy)}, spec.serverOpts...)...)
	t.Cleanup(f.srv.Close)
	for i := range spec.processes {
		o := append([]Option{WithPrefix(f.prefix()), WithOnSwitch(func(e Event) {
			f.mu.Lock()
			f.events[i] = append(f.events[i], e)
			f.mu.Unlock()
		})}, spec.storeOpts...)
		s := New(spec.redis(i), o...)
		base := http.DefaultTransport.(*http.Transport).Clone()
		base.MaxIdleConnsPerHost = spec.workers
		t.Cleanup(base.CloseIdleConnections)
		f.stores = append(f.stores, s)
		f.clients = append(f.clients, &http.Client{Transport: headway.NewTransport(base, headway.WithStore(s))})
	}
	return f
}

// prefix is the fleet's Redis key prefix.
func (f *fleet) prefix() string { return "fleet:" + f.t.Name() + ":" }

// key is the fleet's pacing key: headway's default, the server's host.
func (f *fleet) key() string { return f.srv.Listener.Addr().String() }

// switches returns each store's switches so far.
func (f *fleet) switches() [][]Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]Event, len(f.events))
	for i, e := range f.events {
		out[i] = slices.Clone(e)
	}
	return out
}

// waitShared waits until every store uses Redis again.
func (f *fleet) waitShared(within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if !slices.ContainsFunc(f.stores, func(s *Store) bool { return s.Mode() != Shared }) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// outcome is what one request came to.
type outcome struct {
	client  int
	status  int
	err     error
	start   time.Time
	latency time.Duration
}

// run is one run's figures.
type run struct {
	outcomes            []outcome
	start, end          time.Time
	attempts, throttled int64 // as the server counted them
	failed              int
	errors              map[string]int
}

func (r *run) wall() time.Duration { return r.end.Sub(r.start) }

func (r *run) throttledShare() float64 {
	if r.attempts == 0 {
		return 0
	}
	return float64(r.throttled) / float64(r.attempts)
}

// run sends n GETs from every client's workers and returns what happened.
// during, if set, runs beside the requests with the count of those done.
func (f *fleet) run(n int, during func(done func() int64)) *run {
	before := f.srv.Stats()
	r := &run{errors: map[string]int{}}
	var next, done atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var side sync.WaitGroup
	r.start = time.Now()
	if during != nil {
		side.Go(func() { during(done.Load); <-stop })
	}
	for c, client := range f.clients {
		for range f.workers {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					o := f.do(c, client)
					done.Add(1)
					mu.Lock()
					r.outcomes = append(r.outcomes, o)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	side.Wait()
	for _, o := range r.outcomes {
		if end := o.start.Add(o.latency); end.After(r.end) {
			r.end = end
		}
		switch {
		case o.err != nil:
			r.failed++
			r.errors[o.err.Error()]++
		case o.status/100 != 2:
			r.failed++
			r.errors[http.StatusText(o.status)]++
		}
	}
	after := f.srv.Stats()
	r.attempts = after.Served + after.Rejected - before.Served - before.Rejected
	r.throttled = after.Rejected - before.Rejected
	return r
}

// do sends one GET through client c.
func (f *fleet) do(c int, client *http.Client) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := outcome{client: c, start: time.Now()}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/items", nil)
	resp, err := client.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		o.status = resp.StatusCode
	}
	o.err = err
	o.latency = time.Since(o.start)
	return o
}

// ideal returns the least time in which a server with policy, started at
// start, admits n requests: an oracle sends each request the first
// millisecond the server would admit it, one after another, plus one round
// trip (the quickest request of the run). It is simpler than internal/testkit/sim's
// (whose ideal workers each wait for their previous answer, and which asks
// the server without spending): a fleet's requests are not one worker's.
func (r *run) ideal(t *testing.T, policy ratelimittest.Quota, n int) time.Duration {
	t.Helper()
	clock := ratelimittest.NewManualClock(r.start)
	h, err := ratelimittest.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}),
		ratelimittest.WithQuota(policy), ratelimittest.WithClock(clock))
	require.NoError(t, err)
	var last time.Time
	for admitted := 0; admitted < n; {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/items", nil))
		if rec.Code/100 == 2 {
			admitted++
			last = clock.Now()
			continue
		}
		clock.Advance(time.Millisecond)
	}
	rtt := time.Duration(1<<63 - 1)
	for _, o := range r.outcomes {
		rtt = min(rtt, o.latency)
	}
	return last.Sub(r.start) + rtt
}

// latencies returns the sorted latencies of the requests that match keep.
func (r *run) latencies(keep func(outcome) bool) []time.Duration {
	var ls []time.Duration
	for _, o := range r.outcomes {
		if keep == nil || keep(o) {
			ls = append(ls, o.latency)
		}
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i] < ls[j] })
	return ls
}

func (r *run) String() string {
	return fmt.Sprintf("%d requests, %d failed, %d attempts, %d refused (%.1f%%), wall %v",
		len(r.outcomes), r.failed, r.attempts, r.throttled, 100*r.throttledShare(), r.wall().Round(time.Millisecond))
}

// quota is the issue's: 50 requests per second, a fixed window on the
// clock, IETF headers.
var quota = ratelimittest.Quota{Algorithm: ratelimittest.FixedWindow, Limit: 50, Window: time.Second}

// TestFleetSharesOneQuota: three processes of 8 workers each, with separate
// stores on one Redis, send 600 requests (twelve windows) into one 50/s
// quota: at most 1% refused, about as fast as the quota allows, and every
// attempt's lease taken in the one shared state.
//
// The target for the wall time is 1.10x the ideal; runs take
// 1.01-1.02x. (They took 1.2x, a whole window more, in about one run in
// five until waiters on a shared store looked at it again while they
// waited: a worker told the quota was spent until the reset slept until
// then, though another process's answers showed the window had room.)
//
// Twelve windows, not six: the share refused is a rate, and learning the
// window costs a refusal or two in the first windows (a probe, a burst
// reordered across processes) however long the run; so does a window
// started late. Over six windows (300 requests, with pace's
// TestSentJustAfterTheNewestMayBeOlder fixed) first runs missed the
// figures in 3 of 8 invocations (1.12x, 1.26x; once 13 refused); over
// twelve, 6 of 6 met them (1-3 refused, 1.01-1.02x). Before that fix,
// answers reordered by more than the round trips' spread refuted the
// windows: 1.6-2.9% refused in all three runs of a CI run at 300, and at
// 600 one run in six refused 47.
func TestFleetSharesOneQuota(t *testing.T) {
	requireRedis(t)
	// The figures are real time on a machine that others may load (and
	// the race detector slows): a run that misses them is run again, up
	// to three runs (each is logged); what must hold in every run (no
	// failure, no fallback, the leases in Redis) is checked in each.
	for attempt := 1; ; attempt++ {
		share, slowdown := fleetSharesOneQuota(t)
		if share <= 0.01 && slowdown <= maxSlowdown || attempt == 3 {
			require.LessOrEqual(t, share, 0.01, "at most 1%% of attempts refused")
			require.LessOrEqual(t, slowdown, maxSlowdown, "wall time over the ideal")
			return
		}
		t.Logf("run %d missed the figures (%.1f%% refused, %.2fx): running again", attempt, 100*share, slowdown)
	}
}

// fleetSharesOneQuota runs TestFleetSharesOneQuota's fleet once, checks what
// must hold, and returns the share of attempts refused and the wall time
// over the ideal.
func fleetSharesOneQuota(t *testing.T) (share, slowdown float64) {
	t.Helper()
	f := newFleet(t, fleetSpec{
		policy: quota, processes: 3, workers: 8,
		redis: func(int) redis.UniversalClient { return sharedRedis.client(t) },
		// Generous: this test is about sharing, not about a slow Redis.
		storeOpts: []Option{WithTimeout(2 * time.Second)},
	})
	const n = 600
	r := f.run(n, nil)
	ideal := r.ideal(t, quota, n)
	slowdown = float64(r.wall()) / float64(ideal)
	t.Logf("%v; ideal %v: %.2fx", r, ideal.Round(time.Millisecond), slowdown)
	for i, ev := range f.switches() {
		require.Empty(t, ev, "store %d left Redis during the run", i)
	}
	require.Zero(t, r.failed, "failed requests: %v", r.errors)

	// The state in Redis is the fleet's: every attempt took its lease there.
	st, err := New(sharedRedis.client(t), WithPrefix(f.prefix())).Load(context.Background(), f.key())
	require.NoError(t, err)
	requireLeasesFor(t, r.attempts, leasesTaken(t, st), "leases granted in Redis, by the three stores together")
	return r.throttledShare(), slowdown
}

// maxSlowdown bounds the wall time over the ideal in
// TestFleetSharesOneQuota: the target, 1.10x, and under the race
// detector, which slows every decision 5-10x, a little more (1.02-1.03x
// in runs on this machine).
var maxSlowdown = map[bool]float64{false: 1.10, true: 1.15}[raceEnabled]

// TestRedisKilledMidRun: Redis is killed (SIGKILL) while three processes
// share a quota through it: every request still succeeds (each process
// paces alone meanwhile); when Redis is started again, empty, the stores
// return to it and share again.
func TestRedisKilledMidRun(t *testing.T) {
	srv := newRedis(t)
	f := newFleet(t, fleetSpec{
		policy: quota, processes: 3, workers: 8,
		redis:     func(int) redis.UniversalClient { return srv.client(t) },
		storeOpts: []Option{WithTimeout(250 * time.Millisecond), WithRetryInterval(100 * time.Millisecond)},
	})
	const n = 300
	var killedAt, restartedAt time.Time
	r := f.run(n, func(done func() int64) {
		for done() < 75 {
			time.Sleep(5 * time.Millisecond)
		}
		srv.kill()
		killedAt = time.Now()
		time.Sleep(1500 * time.Millisecond)
		if err := srv.start(); err != nil {
			t.Errorf("restarting Redis: %v", err)
		}
		restartedAt = time.Now()
	})
	require.False(t, killedAt.IsZero(), "the run ended before Redis was killed")
	t.Logf("killed after %v, restarted %v later; %v", killedAt.Sub(r.start).Round(time.Millisecond),
		restartedAt.Sub(killedAt).Round(time.Millisecond), r)
	require.Zero(t, r.failed, "failed requests with Redis killed: %v", r.errors)
	require.True(t, f.waitShared(2*time.Second), "the stores did not return to Redis")
	for i, ev := range f.switches() {
		require.Len(t, ev, 2, "store %d: one switch to local pacing, one back: %v", i, ev)
		require.Equal(t, Shared, ev[0].From)
		require.Equal(t, Local, ev[0].To)
		require.Error(t, ev[0].Err)
		require.Equal(t, Local, ev[1].From)
		require.Equal(t, Shared, ev[1].To)
		require.Greater(t, ev[1].Outage, time.Duration(0))
	}

	// Sharing resumed: every attempt of a second run takes its lease in
	// Redis, whichever process makes it.
	key := f.key()
	reader := New(srv.client(t), WithPrefix(f.prefix()), WithFailClosed(), WithTimeout(time.Second))
	before, err := reader.Load(context.Background(), key)
	require.NoError(t, err)
	r2 := f.run(100, nil)
	t.Logf("after Redis returned: %v", r2)
	after, err := reader.Load(context.Background(), key)
	require.NoError(t, err)
	require.Zero(t, r2.failed, "failed requests after Redis returned: %v", r2.errors)
	requireLeasesFor(t, r2.attempts, leasesTaken(t, after)-leasesTaken(t, before), "every attempt's lease is in Redis")
	for i, ev := range f.switches() {
		require.Len(t, ev, 2, "store %d switched again: %v", i, ev)
	}
}

// TestRedisPaused: Redis stops answering (SIGSTOP) for longer than any
// request should take, then resumes (SIGCONT). No request waits more than
// the store's timeout for it; the stores go back to Redis when it answers.
// The go-redis clients keep their default options (ContextTimeoutEnabled
// false): the store bounds its calls itself.
func TestRedisPaused(t *testing.T) {
	srv := newRedis(t)
	const timeout = 100 * time.Millisecond
	ample := ratelimittest.Quota{Algorithm: ratelimittest.FixedWindow, Limit: 1_000_000, Window: time.Second}
	f := newFleet(t, fleetSpec{
		policy: ample, processes: 2, workers: 4,
		redis: func(int) redis.UniversalClient {
			return srv.client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = false })
		},
		storeOpts: []Option{WithTimeout(timeout), WithRetryInterval(100 * time.Millisecond)},
	})
	const pause = time.Second
	var pausedAt, resumedAt time.Time
	var stopped atomic.Bool
	r := f.runFor(&stopped, func() {
		time.Sleep(400 * time.Millisecond)
		srv.pause()
		pausedAt = time.Now()
		time.Sleep(pause)
		srv.resume()
		resumedAt = time.Now()
		f.waitShared(2 * time.Second)
		time.Sleep(300 * time.Millisecond)
		stopped.Store(true)
	})
	ls := r.latencies(nil)
	stalled := r.latencies(func(o outcome) bool { return o.start.Before(resumedAt) && o.start.Add(o.latency).After(pausedAt) })
	t.Logf("%v; paused %v; latency p50 %v, max %v; %d requests overlapped the pause, max %v",
		r, pause, ls[len(ls)/2], ls[len(ls)-1], len(stalled), stalled[len(stalled)-1])
	require.Zero(t, r.failed, "failed requests: %v", r.errors)
	// A request meets the stall at most once (the call that finds it
	// stalled opens the circuit; later calls do not wait on Redis), plus
	// what it takes anyway. The margin is for a loaded machine under -race.
	const margin = 200 * time.Millisecond
	require.LessOrEqual(t, ls[len(ls)-1], timeout+margin, "a request waited on the paused Redis beyond the timeout")
	require.GreaterOrEqual(t, stalled[len(stalled)-1], timeout*9/10, "no request met the stall: the test did not test it")
	require.True(t, f.waitShared(2*time.Second))
	for i, ev := range f.switches() {
		require.GreaterOrEqual(t, len(ev), 2, "store %d: a switch to local pacing and one back", i)
		require.Equal(t, Local, ev[0].To)
		require.ErrorAs(t, ev[0].Err, new(*TimeoutError), "the switch was for a timeout")
		require.Equal(t, Shared, ev[len(ev)-1].To)
	}
}

// runFor sends requests from every client's workers until stopped, running
// during beside them.
func (f *fleet) runFor(stopped *atomic.Bool, during func()) *run {
	before := f.srv.Stats()
	r := &run{errors: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	r.start = time.Now()
	wg.Go(during)
	for c, client := range f.clients {
		for range f.workers {
			wg.Go(func() {
				for !stopped.Load() {
					o := f.do(c, client)
					mu.Lock()
					r.outcomes = append(r.outcomes, o)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for _, o := range r.outcomes {
		if end := o.start.Add(o.latency); end.After(r.end) {
			r.end = end
		}
		if o.err != nil || o.status/100 != 2 {
			r.failed++
			if o.err != nil {
				r.errors[o.err.Error()]++
			} else {
				r.errors[http.StatusText(o.status)]++
			}
		}
	}
	after := f.srv.Stats()
	r.attempts = after.Served + after.Rejected - before.Served - before.Rejected
	r.throttled = after.Rejected - before.Rejected
	return r
}

// TestFailClosed: failing closed, a request fails with the store's typed
// error, promptly, while Redis is paused or dead, and succeeds again once
// Redis answers.
func TestFailClosed(t *testing.T) {
	srv := newRedis(t)
	const timeout = 100 * time.Millisecond
	ample := ratelimittest.Quota{Algorithm: ratelimittest.FixedWindow, Limit: 1_000_000, Window: time.Second}
	f := newFleet(t, fleetSpec{
		policy: ample, processes: 1, workers: 1,
		redis:     func(int) redis.UniversalClient { return srv.client(t) },
		storeOpts: []Option{WithFailClosed(), WithTimeout(timeout), WithRetryInterval(50 * time.Millisecond)},
	})
	const margin = 200 * time.Millisecond
	get := func() outcome { return f.do(0, f.clients[0]) }
	requireUnavailable := func(o outcome, within time.Duration, what string) {
		t.Helper()
		require.Error(t, o.err, what)
		require.ErrorIs(t, o.err, ErrUnavailable, what)
		var ue *UnavailableError
		require.ErrorAs(t, o.err, &ue, what)
		require.Contains(t, o.err.Error(), "headway: pacing state of ")
		require.LessOrEqual(t, o.latency, within, "%s: failing closed must be prompt", what)
	}

	require.NoError(t, get().err)
	srv.pause()
	o := get()
	requireUnavailable(o, timeout+margin, "Redis paused")
	require.ErrorAs(t, o.err, new(*TimeoutError))
	require.Equal(t, Unavailable, f.stores[0].Mode())
	requireUnavailable(get(), margin, "Redis paused, circuit open")
	srv.resume()
	time.Sleep(100 * time.Millisecond) // the retry interval: the next call tries Redis first
	o = get()
	require.NoError(t, o.err, "Redis is back")
	require.Equal(t, Shared, f.stores[0].Mode())

	srv.kill()
	requireUnavailable(get(), timeout+margin, "Redis dead")
	requireUnavailable(get(), margin, "Redis dead, circuit open")
	require.NoError(t, srv.start())
	time.Sleep(100 * time.Millisecond)
	o = get()
	require.NoError(t, o.err, "Redis is back")
	require.Equal(t, http.StatusOK, o.status)
	require.Equal(t, Shared, f.stores[0].Mode())

	ev := f.switches()[0]
	require.Len(t, ev, 4)
	for i, want := range [][2]Mode{{Shared, Unavailable}, {Unavailable, Shared}, {Shared, Unavailable}, {Unavailable, Shared}} {
		require.Equal(t, want, [2]Mode{ev[i].From, ev[i].To}, "switch %d", i)
	}
}

// requireLeasesFor checks that the leases granted in Redis are those of the
// attempts: one each, and a few more at most. A process on a store slow
// enough reserves ahead for the requests waiting behind the one whose turn
// it is; a lease that waits longer than a store round trip (its request
// left, or is late) is given back rather than sent, and stays counted as
// granted.
func requireLeasesFor(t *testing.T, attempts int64, granted uint64, msg string) {
	t.Helper()
	require.GreaterOrEqual(t, granted, uint64(attempts), "%s: an attempt without its lease", msg)
	require.LessOrEqual(t, granted, uint64(attempts+attempts/10+8), "%s: leases given back", msg)
}

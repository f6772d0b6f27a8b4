// Package sim runs headway against emulated rate-limited APIs in virtual
// time: a ratelimittest handler and headway clients exchange requests over
// an in-memory transport with simulated latency, and every clock is fake, so
// a minute of traffic costs milliseconds of CPU. Run must be called inside a
// testing/synctest bubble, where time.Now, time.Sleep and timers are virtual
// and time jumps ahead whenever every goroutine waits.
//
// A Scenario can jitter the round trips, add a foreign client that spends
// the same quota unseen by headway, stack policies, and take any
// ratelimittest option (a skewed Date, refused requests charged). Ideal is
// the oracle each run is measured against.
//
// The grid of the pacing targets (TestGrid: algorithms x header families x
// operating points, and the variations around them) asserts every cell; a
// representative subset runs by default, the whole grid with
//
//	go test ./internal/testkit/sim -run TestGrid -sim.grid=full -v
//
// and docs/SIMULATION.md is its table. The tables of every dialect, paced
// and with retries only, are printed by
//
//	go test ./internal/testkit/sim -run 'TestTable|TestScenarios' -v
package sim

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/pace"
	"github.com/headway-go/headway/ratelimittest"
)

// Scenario is one run: a server, a workload, and the clients.
type Scenario struct {
	Name string
	// The server: Policy, and Policies beside it (a request must fit
	// every one, see ratelimittest.WithQuota), its headers (IETF unless
	// Dialect says) and options.
	Policy   ratelimittest.Quota
	Policies []ratelimittest.Quota
	Dialect  ratelimittest.Dialect
	Options  []ratelimittest.Option
	// The workload: Requests requests sent by Workers goroutines in each
	// of Processes clients (each its own headway transport, sharing the
	// server's quota, and a pace store when SharedStore), every exchange
	// taking RTT.
	Requests    int
	Workers     int
	Processes   int
	SharedStore bool
	RTT         time.Duration
	// Jitter spreads the round trips: each exchange's RTT is drawn
	// uniformly from [RTT*(1-Jitter), RTT*(1+Jitter)], and each way takes
	// half of it. 0 keeps every round trip at RTT; Jitter is at most 1.
	Jitter float64
	// Lag holds requests back on their way to the server, one-sided and
	// heavy-tailed, as a loaded client's scheduler or a shared store's
	// round trip does: each request's way out takes, besides its half of
	// the round trip, a delay drawn from an exponential distribution of
	// mean Lag (a tenth of them take more than 2.3 Lag, a hundredth more
	// than 4.6 Lag). 0 adds none. Drawn from the Seed's source.
	Lag time.Duration
	// Foreign is another client, which headway does not see, spending the
	// same quota: it sends Foreign x Policy.Limit per Policy.Window (0.3:
	// 30% of the limit) as a steady stream, each request sent at a random
	// instant of its own period, from the start of the run to its end,
	// whatever the answers. Its requests go to the same handler, with
	// round trips jittered as headway's. They are not in Result.Attempts
	// or Throttled, but in ForeignAttempts and ForeignThrottled.
	Foreign float64
	// Seed seeds the round trips' jitter and the foreign client's
	// schedule (0 is a seed like any other).
	Seed uint64
	// Timeout bounds each request (default a minute).
	Timeout time.Duration
	// Phase is how far into a second the run starts (default 370ms), so
	// that a window's phase is not the clock's.
	Phase time.Duration
	// Trace, when set, is called for every exchange the server sees.
	Trace func(at time.Duration, status int, h http.Header)
	// Client options; Bare sends with net/http alone.
	Options2 []headway.Option
	Bare     bool
}

// Result is what a run measured.
type Result struct {
	Requests, Succeeded, Failed int
	// Attempts is what the server saw of headway's clients; Throttled how
	// many of those it refused.
	Attempts, Throttled int
	// ForeignAttempts is what the server saw of the foreign client
	// (Scenario.Foreign); ForeignThrottled how many of those it did not
	// answer with a 2xx.
	ForeignAttempts, ForeignThrottled int
	// Wall is the time until the last request ended; Ideal the least time
	// in which the server would have admitted them all.
	Wall, Ideal time.Duration
	// Errors counts failures by message.
	Errors map[string]int
}

// ThrottledShare is the share of attempts that were refused.
func (r Result) ThrottledShare() float64 {
	if r.Attempts == 0 {
		return 0
	}
	return float64(r.Throttled) / float64(r.Attempts)
}

// Slowdown is Wall over Ideal.
func (r Result) Slowdown() float64 {
	if r.Ideal <= 0 {
		return 0
	}
	return float64(r.Wall) / float64(r.Ideal)
}

func (s *Scenario) defaults() {
	if s.Dialect == "" {
		s.Dialect = ratelimittest.IETF
	}
	if s.Requests == 0 {
		s.Requests = 300
	}
	if s.Workers == 0 {
		s.Workers = 16
	}
	if s.Processes == 0 {
		s.Processes = 1
	}
	if s.Timeout == 0 {
		s.Timeout = time.Minute
	}
	if s.Phase == 0 {
		s.Phase = 370 * time.Millisecond
	}
}

// shifted is the time, moved back by shift: the oracle's server sees the
// instants the run's server saw.
type shifted struct{ shift time.Duration }

func (c shifted) Now() time.Time { return time.Now().Add(-c.shift) }

func (s *Scenario) handler(clock ratelimittest.Clock) *ratelimittest.Handler {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	opts := []ratelimittest.Option{ratelimittest.WithQuota(s.Policy)}
	for _, p := range s.Policies {
		opts = append(opts, ratelimittest.WithQuota(p))
	}
	opts = append(opts, ratelimittest.WithDialect(s.Dialect), ratelimittest.WithClock(clock))
	opts = append(opts, s.Options...)
	h, err := ratelimittest.NewHandler(api, opts...)
	if err != nil {
		panic(err)
	}
	return h
}

// Transport is an http.RoundTripper that serves each request with Handler
// in memory, each way taking half of the round trip: the request reaches the
// handler RTT/2 after it is sent and the response is back RTT/2 later. The
// round trip is RTT, or what NextRTT gives for each exchange when it is set
// (it must be safe for concurrent use); NextLag, when set, adds a delay of
// its own to each request's way to the handler. The waits are timers, so inside a
// testing/synctest bubble they take virtual time. A context that ends
// during either half ends the round trip with its error. Trace, when set,
// is called with each response the handler wrote, at its time since Start.
// It is safe for concurrent use.
type Transport struct {
	Handler http.Handler
	RTT     time.Duration
	NextRTT func() time.Duration
	NextLag func() time.Duration
	Trace   func(at time.Duration, status int, h http.Header)
	Start   time.Time
}

// RoundTrip implements http.RoundTripper.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, err := io.Copy(io.Discard, req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	rtt := t.RTT
	if t.NextRTT != nil {
		rtt = t.NextRTT()
	}
	out := rtt / 2
	if t.NextLag != nil {
		out += t.NextLag()
	}
	if err := (headway.SystemClock{}).Sleep(req.Context(), out); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	t.Handler.ServeHTTP(rec, req)
	if t.Trace != nil {
		t.Trace(time.Since(t.Start), rec.Code, rec.Header())
	}
	resp := rec.Result()
	resp.Request = req
	if err := (headway.SystemClock{}).Sleep(req.Context(), rtt-rtt/2); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// jitter draws round trips uniformly from [rtt*(1-j), rtt*(1+j)] with rng.
func jitter(rng *rand.Rand, rtt time.Duration, j float64) time.Duration {
	j = min(max(j, 0), 1)
	return time.Duration(float64(rtt) * (1 + j*(2*rng.Float64()-1)))
}

// jittered returns a Transport.NextRTT for s: s's round trips, drawn from a
// source seeded by s.Seed, or nil when s.Jitter is 0. Concurrent exchanges
// draw in the order the scheduler runs them.
func (s *Scenario) jittered() func() time.Duration {
	if s.Jitter <= 0 {
		return nil
	}
	return drawing(s.Seed, 1, func(rng *rand.Rand) time.Duration { return jitter(rng, s.RTT, s.Jitter) })
}

// lagged returns a Transport.NextLag for s (see Scenario.Lag), nil when
// s.Lag is 0.
func (s *Scenario) lagged() func() time.Duration {
	if s.Lag <= 0 {
		return nil
	}
	return drawing(s.Seed, 3, func(rng *rand.Rand) time.Duration { return time.Duration(rng.ExpFloat64() * float64(s.Lag)) })
}

// drawing returns draw over a source seeded by seed and stream, safe for
// concurrent use.
func drawing(seed, stream uint64, draw func(*rand.Rand) time.Duration) func() time.Duration {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, stream))
	return func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return draw(rng)
	}
}

// foreignSchedule is the foreign client's requests in order: the i-th is
// sent at a uniformly random instant of [i*period, (i+1)*period) after the
// start, with a round trip drawn as headway's are, and reaches the server
// half of it later. Run and the oracle each draw their own copy, which is
// the same sequence.
type foreignSchedule struct {
	s      *Scenario
	period float64 // ns
	rng    *rand.Rand
	i      int
}

// foreign returns s's foreign client's schedule, or nil without one.
func (s *Scenario) foreign() *foreignSchedule {
	if s.Foreign <= 0 {
		return nil
	}
	rate := s.Foreign * float64(s.Policy.Limit) / float64(s.Policy.Window) // per ns
	return &foreignSchedule{s: s, period: 1 / rate, rng: rand.New(rand.NewPCG(s.Seed, 2))}
}

// next returns the next request's send instant (since the start) and round
// trip.
func (f *foreignSchedule) next() (send, rtt time.Duration) {
	send = time.Duration((float64(f.i) + f.rng.Float64()) * f.period)
	f.i++
	return send, jitter(f.rng, f.s.RTT, f.s.Jitter)
}

// tally counts the requests that reach a handler and the answers that are
// not 2xx.
type tally struct {
	h                 http.Handler
	attempts, refused atomic.Int64
}

func (t *tally) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	t.h.ServeHTTP(sw, r)
	t.attempts.Add(1)
	if sw.code/100 != 2 {
		t.refused.Add(1)
	}
}

// statusWriter remembers the status written through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// runForeign sends f's requests from start until ctx ends, each through a
// Transport to h in a goroutine of wg, ignoring the answers.
func runForeign(ctx context.Context, f *foreignSchedule, start time.Time, h http.Handler, wg *sync.WaitGroup) {
	for {
		send, rtt := f.next()
		if (headway.SystemClock{}).Sleep(ctx, time.Until(start.Add(send))) != nil {
			return
		}
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.sim/items", nil)
			resp, err := Transport{Handler: h, RTT: rtt}.RoundTrip(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// Run runs s; call it inside a synctest bubble.
//
// The foreign client's answers that are not 2xx count as its refusals, and
// are taken out of the server's count of refusals to leave headway's: do
// not combine Foreign with faults that answer an admitted request with
// something else (WithServerErrors).
func Run(s Scenario) Result {
	s.defaults()
	time.Sleep(s.Phase)
	h := s.handler(shifted{})
	res := Result{Requests: s.Requests, Errors: map[string]int{}}
	var shared pace.Store
	if s.SharedStore {
		shared = pace.NewMemoryStore(nil)
	}
	start := time.Now()
	rtts, lags := s.jittered(), s.lagged()
	clients := make([]*http.Client, s.Processes)
	for i := range clients {
		rt := http.RoundTripper(Transport{Handler: h, RTT: s.RTT, NextRTT: rtts, NextLag: lags, Trace: s.Trace, Start: start})
		if !s.Bare {
			opts := append([]headway.Option{headway.WithRandSource(rand.NewPCG(uint64(i)+1, 2))}, s.Options2...)
			if shared != nil {
				opts = append(opts, headway.WithStore(shared))
			}
			rt = headway.NewTransport(rt, opts...)
		}
		clients[i] = &http.Client{Transport: rt}
	}
	foreign := &tally{h: h}
	ctx, stop := context.WithCancel(context.Background())
	var others sync.WaitGroup
	if f := s.foreign(); f != nil {
		others.Go(func() { runForeign(ctx, f, start, foreign, &others) })
	}
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	var last time.Time
	for p := range s.Processes {
		for range s.Workers {
			wg.Go(func() {
				for next.Add(1) <= int64(s.Requests) {
					ok, msg := do(clients[p], s.Timeout)
					mu.Lock()
					if ok {
						res.Succeeded++
					} else {
						res.Failed++
						res.Errors[msg]++
					}
					if now := time.Now(); now.After(last) {
						last = now
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	stop()
	others.Wait()
	res.Wall = last.Sub(start)
	st := h.Stats()
	res.ForeignAttempts, res.ForeignThrottled = int(foreign.attempts.Load()), int(foreign.refused.Load())
	res.Attempts = int(st.Served+st.Rejected) - res.ForeignAttempts
	res.Throttled = int(st.Rejected) - res.ForeignThrottled
	res.Ideal = Ideal(s, time.Since(start))
	return res
}

// do sends one GET, reporting whether it ended in a 2xx.
func do(c *http.Client, timeout time.Duration) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.sim/items", nil)
	resp, err := c.Do(req)
	if err != nil {
		return false, err.Error()
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return false, resp.Status
	}
	return true, ""
}

// Ideal returns the least time in which s's server admits s's requests, as
// an oracle that knows the server measures it. The oracle has Workers x
// Processes workers, each sending its next request once the answer to its
// previous one is back, over round trips of RTT (the mean, whatever the
// Jitter): a request admitted at the server's instant a was sent at a-RTT/2,
// its answer is back at a+RTT/2, and the worker's next request reaches the
// server at a+RTT at the soonest. Each request reaches the server at the
// first instant, to the nanosecond, at which the server would admit it: the
// oracle asks ratelimittest's Handler.Fits, which spends nothing, so none of
// its requests is refused, not even on a server that charges refusals. The
// server sees the same foreign client as the run (Scenario.Foreign), at the
// same instants. Ideal is the last admission plus half a round trip, the
// answer's way back, since the start.
//
// Call it in the run's synctest bubble, after the run, with since the time
// since the run started: the oracle's server reads the instants the run's
// server read.
func Ideal(s Scenario, since time.Duration) time.Duration {
	s.defaults()
	return oracle(s, time.Now().Add(-since))
}

// frozenClock reads what the oracle sets.
type frozenClock struct{ now time.Time }

func (c *frozenClock) Now() time.Time { return c.now }

// discard is a ResponseWriter that keeps only the status.
type discard struct {
	h    http.Header
	code int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(code int)        { d.code = code }

// oracle is Ideal for a run that started at start.
func oracle(s Scenario, start time.Time) time.Duration {
	if s.Requests <= 0 {
		return 0
	}
	clock := &frozenClock{now: start}
	h := s.handler(clock)
	req := httptest.NewRequest(http.MethodGet, "http://api.sim/items", nil)
	serve := func() int {
		w := &discard{h: http.Header{}, code: http.StatusOK}
		h.ServeHTTP(w, req)
		return w.code
	}
	// The foreign client's requests, served as the clock passes them (at
	// an instant the oracle's request shares, the foreign one goes first).
	f := s.foreign()
	var arrival time.Time
	nextForeign := func() {
		send, rtt := f.next()
		arrival = start.Add(send + rtt/2)
	}
	if f != nil {
		nextForeign()
	}
	foreignUntil := func(t time.Time) {
		for f != nil && !arrival.After(t) {
			clock.now = arrival
			serve()
			nextForeign()
		}
	}
	// When each worker's next request can reach the server, earliest first:
	// admissions come in time order, so the instants appended (admission
	// plus a round trip) keep the queue sorted, and the earliest worker
	// takes the next admission (the workers are alike).
	ready := make([]time.Time, 0, s.Workers*s.Processes)
	for range min(s.Workers*s.Processes, s.Requests) {
		ready = append(ready, start.Add(s.RTT/2))
	}
	var last time.Time
	for range s.Requests {
		// Nothing fitted between this worker's instant and the last
		// admission (the last request would have gone then), so its
		// request reaches the server at the last admission at the soonest.
		t := ready[0]
		ready = ready[1:]
		if t.Before(last) {
			t = last
		}
		for {
			foreignUntil(t)
			clock.now = t
			ok, wait := h.Fits(req)
			if ok {
				break
			}
			if wait < 0 {
				panic(fmt.Sprintf("sim: %s: the oracle's request can never be admitted", s.Name))
			}
			t = t.Add(wait)
		}
		if code := serve(); code/100 != 2 {
			panic(fmt.Sprintf("sim: %s: the oracle's request was answered %d where Fits admitted it", s.Name, code))
		}
		last = t
		ready = append(ready, t.Add(s.RTT))
	}
	return last.Add(s.RTT - s.RTT/2).Sub(start)
}

// String formats a result as a table row.
func (r Result) String() string {
	return fmt.Sprintf("%5d %5d %6.1f%% %6d %8.2fs %8.2fs %6.2fx",
		r.Attempts, r.Throttled, 100*r.ThrottledShare(), r.Failed, r.Wall.Seconds(), r.Ideal.Seconds(), r.Slowdown())
}

// Package sim runs headway against emulated rate-limited APIs in virtual
// time: a ratelimittest handler and headway clients exchange requests over
// an in-memory transport with simulated latency, and every clock is fake, so
// a minute of traffic costs milliseconds of CPU. Run must be called inside a
// testing/synctest bubble, where time.Now, time.Sleep and timers are virtual
// and time jumps ahead whenever every goroutine waits.
//
// The table of every algorithm and dialect is printed by
//
//	go test ./internal/sim -run TestTable -v
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
	// The server: one policy and its headers.
	Policy  ratelimittest.Policy
	Dialect ratelimittest.Dialect
	Options []ratelimittest.Option
	// The workload: Requests requests sent by Workers goroutines in each
	// of Processes clients (each its own headway transport, sharing the
	// server's quota, and a pace store when SharedStore), every exchange
	// taking RTT.
	Requests    int
	Workers     int
	Processes   int
	SharedStore bool
	RTT         time.Duration
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
	// Attempts is what the server saw; Throttled how many it refused.
	Attempts, Throttled int
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
	opts := append([]ratelimittest.Option{ratelimittest.WithPolicy(s.Policy), ratelimittest.WithDialect(s.Dialect), ratelimittest.WithClock(clock)}, s.Options...)
	h, err := ratelimittest.NewHandler(api, opts...)
	if err != nil {
		panic(err)
	}
	return h
}

// Transport is an http.RoundTripper that serves each request with Handler
// in memory, each way taking half of RTT: the request reaches the handler
// RTT/2 after it is sent and the response is back RTT/2 later. The waits
// are timers, so inside a testing/synctest bubble they take virtual time.
// A context that ends during either half ends the round trip with its
// error. Trace, when set, is called with each response the handler wrote,
// at its time since Start. It is safe for concurrent use.
type Transport struct {
	Handler http.Handler
	RTT     time.Duration
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
	if err := sleep(req.Context(), t.RTT/2); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	t.Handler.ServeHTTP(rec, req)
	if t.Trace != nil {
		t.Trace(time.Since(t.Start), rec.Code, rec.Header())
	}
	resp := rec.Result()
	resp.Request = req
	if err := sleep(req.Context(), t.RTT-t.RTT/2); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// sleep waits for d or until ctx is done, returning ctx.Err() then.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run runs s; call it inside a synctest bubble.
func Run(s Scenario) Result {
	s.defaults()
	time.Sleep(s.Phase)
	h := s.handler(shifted{})
	res := Result{Requests: s.Requests, Errors: map[string]int{}}
	var shared pace.Store
	if s.SharedStore {
		shared = pace.NewMemoryStore(nil)
	}
	clients := make([]*http.Client, s.Processes)
	for i := range clients {
		rt := http.RoundTripper(Transport{Handler: h, RTT: s.RTT, Trace: s.Trace, Start: time.Now()})
		if !s.Bare {
			opts := append([]headway.Option{headway.WithRandSource(rand.NewPCG(uint64(i)+1, 2))}, s.Options2...)
			if shared != nil {
				opts = append(opts, headway.WithStore(shared))
			}
			rt = headway.NewTransport(rt, opts...)
		}
		clients[i] = &http.Client{Transport: rt}
	}
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	var last time.Time
	for p := range s.Processes {
		for range s.Workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
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
			}()
		}
	}
	wg.Wait()
	res.Wall = last.Sub(start)
	st := h.Stats()
	res.Attempts, res.Throttled = int(st.Served+st.Rejected), int(st.Rejected)
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

// Ideal returns the least time in which s's server admits s's requests: an
// oracle sends each request the first millisecond the server would admit
// it, with no latency, and Ideal adds one round trip; it is never less than
// the workers' own pace (one round trip per request each).
//
// The oracle runs after the run, on a server whose clock is moved back by
// since, so that it starts at the instant the run started.
func Ideal(s Scenario, since time.Duration) time.Duration {
	s.defaults()
	h := s.handler(shifted{since})
	start := time.Now()
	var lastAdmit time.Time
	for admitted := 0; admitted < s.Requests; {
		req := httptest.NewRequest(http.MethodGet, "http://api.sim/items", nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code/100 == 2 {
			admitted++
			lastAdmit = time.Now()
			continue
		}
		time.Sleep(time.Millisecond)
	}
	oracle := lastAdmit.Sub(start) + s.RTT
	workers := time.Duration((s.Requests+s.Workers*s.Processes-1)/(s.Workers*s.Processes)) * s.RTT
	return max(oracle, workers)
}

// String formats a result as a table row.
func (r Result) String() string {
	return fmt.Sprintf("%5d %5d %6.1f%% %6d %8.2fs %8.2fs %6.2fx",
		r.Attempts, r.Throttled, 100*r.ThrottledShare(), r.Failed, r.Wall.Seconds(), r.Ideal.Seconds(), r.Slowdown())
}

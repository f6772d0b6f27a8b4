package bench

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway/internal/testkit/sim"
	rlt "github.com/headway-go/headway/ratelimittest"
)

// The goodput workload (the pacing issue's): GoodputRequests GETs sent by
// GoodputWorkers goroutines into a quota of GoodputLimit per second, every
// exchange taking SimRTT.
const (
	GoodputRequests = 300
	GoodputWorkers  = 16
	GoodputLimit    = 50
	SimRTT          = 20 * time.Millisecond
	// SimTimeout bounds each simulated request, retries included, as a
	// caller's context would.
	SimTimeout = time.Minute
	// simPhase is how far into a second a goodput run starts, so that a
	// fixed window's phase is not the clock's (internal/testkit/sim's default).
	simPhase = 370 * time.Millisecond
)

// GoodputScenario returns the goodput run against one algorithm and
// dialect, as an internal/testkit/sim Scenario, whose Ideal is the oracle that every
// run is measured against.
func GoodputScenario(alg rlt.Algorithm, d rlt.Dialect) sim.Scenario {
	return sim.Scenario{
		Name:      string(alg) + "/" + string(d),
		Policy:    rlt.Quota{Algorithm: alg, Limit: GoodputLimit, Window: time.Second},
		Dialect:   d,
		Requests:  GoodputRequests,
		Workers:   GoodputWorkers,
		Processes: 1,
		RTT:       SimRTT,
		Timeout:   SimTimeout,
		Phase:     simPhase,
	}
}

// A GoodputCase is one peer against one emulated API.
type GoodputCase struct {
	Name     string // "Goodput/<algorithm>/<dialect>/<peer>"
	Scenario sim.Scenario
	Peer     Peer
}

// GoodputCases returns every algorithm x dialect x peer, in that order
// (ratelimittest.Algorithms, ratelimittest.Dialects, Peers).
func GoodputCases() []GoodputCase {
	var cs []GoodputCase
	for _, alg := range rlt.Algorithms() {
		for _, d := range rlt.Dialects() {
			s := GoodputScenario(alg, d)
			for _, p := range Peers() {
				cs = append(cs, GoodputCase{Name: "Goodput/" + s.Name + "/" + p.Name, Scenario: s, Peer: p})
			}
		}
	}
	return cs
}

// Run runs c; call it in a synctest bubble (see InBubble).
func (c GoodputCase) Run() sim.Result { return RunGoodput(c.Scenario, c.Peer) }

// RunGoodput sends s's workload through p's User client to a ratelimittest
// handler enforcing s's policy in s's dialect, over a SimTransport, and
// measures it as internal/testkit/sim does: the attempts the server saw and
// refused, the requests that did not end in a 2xx, the time until the last
// request ended, and the ideal time (sim.Ideal). It must run in a synctest
// bubble, whose virtual time makes it fast and repeatable. Only the Policy,
// Dialect, Options, Requests, Workers, RTT, Timeout and Phase of s are used
// (one process).
func RunGoodput(s sim.Scenario, p Peer) sim.Result {
	if s.Timeout <= 0 {
		s.Timeout = SimTimeout
	}
	s.Processes = 1
	time.Sleep(s.Phase)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	opts := append([]rlt.Option{rlt.WithQuota(s.Policy), rlt.WithDialect(s.Dialect)}, s.Options...)
	h, err := rlt.NewHandler(api, opts...)
	if err != nil {
		panic(err)
	}
	c := p.User(&SimTransport{Handler: h, RTT: s.RTT})
	start := time.Now()
	res := sim.Result{Requests: s.Requests}
	res.Succeeded, res.Errors, res.Wall = sendAll(c, s.Workers, s.Requests, s.Timeout)
	res.Failed = s.Requests - res.Succeeded
	st := h.Stats()
	res.Attempts, res.Throttled = int(st.Served+st.Rejected), int(st.Rejected)
	res.Ideal = sim.Ideal(s, time.Since(start))
	return res
}

// sendAll sends n GETs through c from workers goroutines, each within
// timeout, and returns how many ended in a 2xx, why the others did not
// (by message), and the time until the last one ended.
func sendAll(c Client, workers, n int, timeout time.Duration) (succeeded int, failures map[string]int, wall time.Duration) {
	failures = map[string]int{}
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
		last time.Time
	)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				ok, msg := send(c, timeout)
				mu.Lock()
				if ok {
					succeeded++
				} else {
					failures[msg]++
				}
				last = time.Now()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return succeeded, failures, last.Sub(start)
}

// send sends one GET through c within timeout, reporting whether it ended
// in a 2xx, and if not, why.
func send(c Client, timeout time.Duration) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	status, err := c(ctx, http.MethodGet, nil)
	switch {
	case err != nil:
		return false, shortError(err)
	case status/100 != 2:
		return false, http.StatusText(status)
	}
	return true, ""
}

// shortError is err's message, cut to a length a table can hold.
func shortError(err error) string {
	const max = 120
	s := err.Error()
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

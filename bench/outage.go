package bench

import (
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// OutageHandler is an API in a total outage: it answers every request with
// 503 Service Unavailable (no Retry-After, no rate-limit headers, as a load
// balancer with no healthy backend does) until Until, and 200 from then on.
// A zero Until is an outage that never ends. It counts the requests it
// answered in each state, and is safe for concurrent use.
type OutageHandler struct {
	Until time.Time

	during, after atomic.Int64
}

// ServeHTTP implements http.Handler.
func (h *OutageHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.Until.IsZero() || time.Now().Before(h.Until) {
		h.during.Add(1)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "no healthy upstream")
		return
	}
	h.after.Add(1)
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, ResponseBody)
}

// Attempts returns how many requests h answered during the outage (503)
// and after it (200).
func (h *OutageHandler) Attempts() (during, after int) {
	return int(h.during.Load()), int(h.after.Load())
}

// Amplification is a run of Requests GETs from Workers goroutines against
// an OutageHandler whose outage never ends, every exchange taking RTT.
type Amplification struct {
	Requests, Workers int
	RTT               time.Duration
}

// DefaultAmplification is the run the report shows: 200 requests, 16
// workers, 20 ms round trips.
var DefaultAmplification = Amplification{Requests: 200, Workers: 16, RTT: SimRTT}

// AmplificationResult is what an Amplification run measured.
type AmplificationResult struct {
	Requests, Failed int
	Attempts         int           // what the server saw
	Wall             time.Duration // until the last request ended
	Errors           map[string]int
}

// PerRequest is the attempts per request.
func (r AmplificationResult) PerRequest() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.Attempts) / float64(r.Requests)
}

// Run runs a through p's User client; call it in a synctest bubble.
func (a Amplification) Run(p Peer) AmplificationResult {
	h := &OutageHandler{}
	c := p.User(&SimTransport{Handler: h, RTT: a.RTT})
	res := AmplificationResult{Requests: a.Requests}
	var succeeded int
	succeeded, res.Errors, res.Wall = sendAll(c, a.Workers, a.Requests, SimTimeout)
	res.Failed = a.Requests - succeeded
	res.Attempts, _ = h.Attempts()
	return res
}

// Recovery is a run through an outage and out of it: Workers goroutines
// each send a GET every Interval (worker i starting i*Interval/Workers in,
// so the load is even; a request still running at its worker's next tick
// makes it skip that tick), to an OutageHandler that answers 503 for the
// first Outage and 200 for After more. Every exchange takes RTT.
type Recovery struct {
	Workers  int
	Interval time.Duration
	Outage   time.Duration
	After    time.Duration
	RTT      time.Duration
	// Window and Share define recovered throughput: from the instant of
	// recovery on, every Window-long span holds at least Share of the
	// successes the workers offer.
	Window time.Duration
	Share  float64
}

// DefaultRecovery is the run the report shows: 16 workers each sending a
// request every 100 ms (160 requests a second), a 10 s outage, 20 s of
// health after it; recovered means 90% of 160/s in every half second.
var DefaultRecovery = Recovery{
	Workers: 16, Interval: 100 * time.Millisecond, Outage: 10 * time.Second, After: 20 * time.Second,
	RTT: SimRTT, Window: 500 * time.Millisecond, Share: 0.9,
}

// RecoveryResult is what a Recovery run measured. Durations after the
// outage are measured from its end; a negative one did not happen by the
// end of the run.
type RecoveryResult struct {
	// Requests started during the outage, and the attempts the server saw
	// in it (all answered 503).
	OutageRequests, OutageAttempts int
	// FirstSuccess: until the first 2xx that a caller got.
	FirstSuccess time.Duration
	// Recovered: until the throughput of successes is back (see
	// Recovery.Window and Share) for good.
	Recovered time.Duration
	// Requests that failed although they ended after the outage.
	FailedAfter int
	Succeeded   int
	Failed      int
	// Successes per Window, by the time they ended, from the start.
	Timeline []int
	Errors   map[string]int
}

// Offered is the requests per second r's workers offer.
func (r Recovery) Offered() float64 { return float64(r.Workers) / r.Interval.Seconds() }

// OutagePerRequest is the attempts per request started during the outage.
func (r RecoveryResult) OutagePerRequest() float64 {
	if r.OutageRequests == 0 {
		return 0
	}
	return float64(r.OutageAttempts) / float64(r.OutageRequests)
}

// Run runs r through p's User client; call it in a synctest bubble.
func (r Recovery) Run(p Peer) RecoveryResult {
	start := time.Now()
	healthy := start.Add(r.Outage)
	end := healthy.Add(r.After)
	h := &OutageHandler{Until: healthy}
	c := p.User(&SimTransport{Handler: h, RTT: r.RTT})
	res := RecoveryResult{Errors: map[string]int{}}
	var (
		mu        sync.Mutex
		wg        sync.WaitGroup
		successes []time.Duration // since start, when each success ended
	)
	for i := range r.Workers {
		wg.Go(func() {
			tick := start.Add(time.Duration(i) * r.Interval / time.Duration(r.Workers))
			for tick.Before(end) {
				time.Sleep(time.Until(tick))
				sent := time.Now()
				ok, msg := send(c, SimTimeout)
				done := time.Now()
				mu.Lock()
				if sent.Before(healthy) {
					res.OutageRequests++
				}
				if ok {
					res.Succeeded++
					successes = append(successes, done.Sub(start))
				} else {
					res.Failed++
					res.Errors[msg]++
					if !done.Before(healthy) {
						res.FailedAfter++
					}
				}
				mu.Unlock()
				// The next tick not yet past: a request that outlasts
				// its worker's interval skips ticks.
				tick = tick.Add(r.Interval)
				for now := time.Now(); tick.Before(now); {
					tick = tick.Add(r.Interval)
				}
			}
		})
	}
	wg.Wait()
	res.OutageAttempts, _ = h.Attempts()
	slices.Sort(successes)
	res.FirstSuccess = -1
	for _, s := range successes {
		if s >= r.Outage {
			res.FirstSuccess = s - r.Outage
			break
		}
	}
	res.Recovered = r.recovered(successes)
	for b := time.Duration(0); b < r.Outage+r.After; b += r.Window {
		res.Timeline = append(res.Timeline, count(successes, b, b+r.Window))
	}
	return res
}

// recoveryStep is the resolution of RecoveryResult.Recovered.
const recoveryStep = 10 * time.Millisecond

// recovered returns, from the outage's end, the first instant t from
// which every window [t', t'+Window) with t' >= t (in steps of
// recoveryStep, up to the run's end) holds at least Share of the offered
// successes; -1 if the last window does not. successes is sorted.
func (r Recovery) recovered(successes []time.Duration) time.Duration {
	need := r.Share * r.Offered() * r.Window.Seconds()
	end := r.Outage + r.After
	lastBelow := time.Duration(-1)
	for t := r.Outage; t+r.Window <= end; t += recoveryStep {
		if float64(count(successes, t, t+r.Window)) < need {
			lastBelow = t
		}
	}
	switch {
	case lastBelow < 0:
		return 0
	case lastBelow+recoveryStep+r.Window > end:
		return -1
	}
	return lastBelow + recoveryStep - r.Outage
}

// count returns how many of the sorted xs are in [lo, hi).
func count(xs []time.Duration, lo, hi time.Duration) int {
	i, _ := slices.BinarySearch(xs, lo)
	j, _ := slices.BinarySearch(xs, hi)
	return j - i
}

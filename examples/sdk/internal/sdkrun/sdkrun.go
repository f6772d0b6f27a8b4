// Package sdkrun is the harness of the SDK examples (examples/sdk/...): it
// sends a workload of calls through a vendor's SDK to an emulated API, counts
// what the server saw and what the calls got, and measures the wall time
// against the ideal, the least time in which the server would have admitted
// every call.
//
// The same workload runs in the examples' tests, over Memory inside a
// testing/synctest bubble (virtual time, no network), and in their main
// programs, over loopback in real time.
package sdkrun

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/ratelimittest"
)

// Memory is an http.RoundTripper that serves each request with Handler in
// memory, the exchange taking RTT (half each way). Its waits are timers, so
// inside a synctest bubble they take virtual time. It is safe for
// concurrent use.
type Memory struct {
	Handler http.Handler
	RTT     time.Duration
}

// RoundTrip implements http.RoundTripper.
func (m Memory) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	if err := (headway.SystemClock{}).Sleep(req.Context(), m.RTT/2); err != nil {
		return nil, err
	}
	in := req.Clone(req.Context())
	in.Body = io.NopCloser(strings.NewReader(string(body)))
	in.RemoteAddr = "192.0.2.1:1234"
	in.RequestURI = req.URL.RequestURI()
	rec := httptest.NewRecorder()
	if !serve(m.Handler, rec, in) {
		// The handler dropped the connection (http.ErrAbortHandler).
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	resp := rec.Result()
	resp.Request = req
	if err := (headway.SystemClock{}).Sleep(req.Context(), m.RTT-m.RTT/2); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// serve runs h and reports whether it answered: false when it aborted the
// exchange with http.ErrAbortHandler, as a handler that drops the
// connection does where it cannot hijack one.
func serve(h http.Handler, w http.ResponseWriter, r *http.Request) (answered bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			answered = false
		}
	}()
	h.ServeHTTP(w, r)
	return true
}

// Learning is how many refusals a run may spend, per policy the server
// enforces, while headway's pacing model learns a server it has not seen:
// the model probes when the candidate servers still consistent with the
// answers disagree ("unknown limits are learnt with O(1) refusals", the
// design card). With the model of pace at 5dc7455 the README's ways spend
// one or two per run (the issue asked for none; the pacing before b83f1e0
// spent none); a fix lowers it, and a regression past it fails.
const Learning = 2

// Result is what one workload measured.
type Result struct {
	// Name says which client (and how it was set up).
	Name string
	// Calls is how many calls were made; Succeeded and Failed how they
	// ended. Local counts the failed calls that the SDK refused itself,
	// without sending (go-github's rate-limit pre-check).
	Calls, Succeeded, Failed, Local int
	// Sent is what the server saw (Served + Rejected); Refused how many
	// of those it refused for quota.
	Sent, Refused int
	// Wall is the time until the last call ended; Ideal the least time in
	// which the server admits them all (see Ideal).
	Wall, Ideal time.Duration
	// Errors counts the failed calls by their message's first words.
	Errors map[string]int
}

// Slowdown is Wall over Ideal.
func (r Result) Slowdown() float64 {
	if r.Ideal <= 0 {
		return 0
	}
	return float64(r.Wall) / float64(r.Ideal)
}

// Header is the table's header, for Row.
const Header = "client                                        calls   ok failed local  sent refused    wall    ideal  x ideal"

// Row formats r as a line of the table.
func (r Result) Row() string {
	return fmt.Sprintf("%-44s %6d %4d %6d %5d %5d %7d %7.2fs %7.2fs %7.2fx",
		r.Name, r.Calls, r.Succeeded, r.Failed, r.Local, r.Sent, r.Refused, r.Wall.Seconds(), r.Ideal.Seconds(), r.Slowdown())
}

// String is Row and, when calls failed, the errors by count.
func (r Result) String() string {
	s := r.Row()
	keys := make([]string, 0, len(r.Errors))
	for k := range r.Errors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s += fmt.Sprintf("\n    %4d x %s", r.Errors[k], k)
	}
	return s
}

// Outcome is how one call ended: Err nil for a success; Local when the
// SDK refused the call itself, without sending it.
type Outcome struct {
	Err   error
	Local bool
}

// Run makes calls calls, numbered from 0, from workers goroutines, and
// returns what they got (Name, Sent, Refused and Ideal are the caller's to
// fill in). The time runs from Run's start to the end of the last call.
func Run(calls, workers int, call func(i int) Outcome) Result {
	res := Result{Calls: calls, Errors: map[string]int{}}
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	var last time.Time
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= calls {
					return
				}
				o := call(i)
				mu.Lock()
				switch {
				case o.Err == nil:
					res.Succeeded++
				default:
					res.Failed++
					if o.Local {
						res.Local++
					}
					res.Errors[short(o.Err.Error())]++
				}
				if now := time.Now(); now.After(last) {
					last = now
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Wall = last.Sub(start)
	return res
}

// short keeps the start of an error message, without numbers that differ
// from call to call, so that errors of one kind count together.
func short(msg string) string {
	var b strings.Builder
	for _, r := range strings.Join(strings.Fields(msg), " ") {
		if r >= '0' && r <= '9' {
			r = '#'
		}
		b.WriteRune(r)
		if b.Len() >= 110 {
			b.WriteString("...")
			break
		}
	}
	return b.String()
}

// Count fills in what the server saw.
func (r *Result) Count(s ratelimittest.Stats) {
	r.Sent, r.Refused = int(s.Served+s.Rejected), int(s.Rejected)
}

// Ideal returns the least time in which a server made by newHandler, its
// clock started at start, admits calls requests made by newRequest: an
// oracle sends each request the first millisecond the server would admit
// it, with no latency, and Ideal adds one round trip. newHandler must pass
// the clock it is given to the handler (ratelimittest.WithClock). Nothing
// sleeps: the oracle's server runs on a ManualClock.
func Ideal(start time.Time, calls int, rtt time.Duration, newHandler func(ratelimittest.Clock) http.Handler, newRequest func(i int) *http.Request) time.Duration {
	clock := ratelimittest.NewManualClock(start)
	h := newHandler(clock)
	var last time.Time
	var body []byte
	var req *http.Request
	for i, steps := 0, 0; i < calls && steps < 10_000_000; steps++ {
		if req == nil {
			req = newRequest(i)
			if req.Body != nil {
				body, _ = io.ReadAll(req.Body)
			}
		}
		if body != nil {
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code/100 == 2 {
			last = clock.Now()
			i, req, body = i+1, nil, nil
			continue
		}
		clock.Advance(time.Millisecond)
	}
	return last.Sub(start) + rtt
}

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headway-go/headway/internal/testkit/sim"
	rlt "github.com/headway-go/headway/ratelimittest"
)

var (
	simOut  = flag.String("sim.out", "", "run the report's simulations and write their results to this file as JSON (cmd/benchreport does)")
	simRun  = flag.String("sim.run", "", "with -sim.out: only the simulations whose names match this regexp")
	simRuns = flag.Int("sim.runs", 5, "with -sim.out: runs of each goodput case")
)

// TestSimulationsReport runs the simulations for cmd/benchreport, which
// builds this test binary and runs it with -sim.out: synctest bubbles need
// a *testing.T. Without -sim.out it is skipped.
func TestSimulationsReport(t *testing.T) {
	if *simOut == "" {
		t.Skip("-sim.out not set (cmd/benchreport sets it)")
	}
	var match func(string) bool
	if *simRun != "" {
		re, err := regexp.Compile(*simRun)
		if err != nil {
			t.Fatal(err)
		}
		match = re.MatchString
	}
	res := RunSimulations(match, *simRuns, func(f func()) {
		synctest.Test(t, func(*testing.T) { f() })
	}, os.Stderr)
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*simOut, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSimTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var served time.Duration
		start := time.Now()
		rt := &SimTransport{RTT: 20 * time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served = time.Since(start)
			if r.Body != nil {
				b, _ := io.ReadAll(r.Body)
				w.Header().Set("X-Got", string(b))
			}
			io.WriteString(w, "ok")
		})}
		req, _ := http.NewRequest(http.MethodPut, URL, strings.NewReader("body"))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if served != 10*time.Millisecond || time.Since(start) != 20*time.Millisecond || string(b) != "ok" || resp.Request != req {
			t.Errorf("served at %v, answered at %v, body %q; want 10ms, 20ms, ok", served, time.Since(start), b)
		}
		// The transport reads the request's body, so the handler sees none.
		if got := resp.Header.Get("X-Got"); got != "" {
			t.Errorf("handler read %q", got)
		}
		// A context that ends on the way back ends the round trip.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Millisecond)
		defer cancel()
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, URL, nil)
		if resp, err := rt.RoundTrip(req); !errors.Is(err, context.DeadlineExceeded) || resp != nil {
			t.Errorf("RoundTrip past the deadline = %v, %v", resp, err)
		}
	})
}

func TestOutageHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &OutageHandler{Until: time.Now().Add(time.Second)}
		get := func() int {
			rec := &recorder{header: http.Header{}}
			h.ServeHTTP(rec, httptestRequest())
			return rec.status
		}
		if s := get(); s != http.StatusServiceUnavailable {
			t.Errorf("during the outage: %d", s)
		}
		time.Sleep(time.Second)
		if s := get(); s != http.StatusOK {
			t.Errorf("after the outage: %d", s)
		}
		if d, a := h.Attempts(); d != 1 || a != 1 {
			t.Errorf("Attempts = %d, %d; want 1, 1", d, a)
		}
		forever := &OutageHandler{}
		time.Sleep(time.Hour)
		rec := &recorder{header: http.Header{}}
		forever.ServeHTTP(rec, httptestRequest())
		if rec.status != http.StatusServiceUnavailable || rec.header.Get("Retry-After") != "" {
			t.Errorf("endless outage: %d, Retry-After %q", rec.status, rec.header.Get("Retry-After"))
		}
	})
}

// recorder is the least http.ResponseWriter.
type recorder struct {
	header http.Header
	status int
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}
func (r *recorder) Write(b []byte) (int, error) { r.WriteHeader(http.StatusOK); return len(b), nil }

func httptestRequest() *http.Request {
	req, _ := http.NewRequest(http.MethodGet, URL, nil)
	return req
}

func TestRecovered(t *testing.T) {
	r := Recovery{Workers: 10, Interval: 100 * time.Millisecond, Outage: time.Second, After: 3 * time.Second, Window: 500 * time.Millisecond, Share: 0.9}
	// 100 successes a second from from on: a success every 10ms.
	from := func(at time.Duration) []time.Duration {
		var xs []time.Duration
		for t := at; t < r.Outage+r.After; t += 10 * time.Millisecond {
			xs = append(xs, t)
		}
		return xs
	}
	for _, tc := range []struct {
		name string
		xs   []time.Duration
		want time.Duration
	}{
		{"at once", from(r.Outage), 0},
		{"1.5s late", from(r.Outage + 1500*time.Millisecond), 1500*time.Millisecond - 50*time.Millisecond},
		{"never", nil, -1},
		{"too late for a whole window", from(r.Outage + r.After - 100*time.Millisecond), -1},
	} {
		if got := r.recovered(tc.xs); got != tc.want {
			t.Errorf("%s: recovered = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := r.Offered(); got != 100 {
		t.Errorf("Offered = %v, want 100", got)
	}
}

func TestMedianCell(t *testing.T) {
	rs := []sim.Result{
		{Attempts: 10, Throttled: 5, Failed: 1, Wall: 3 * time.Second, Ideal: time.Second, Errors: map[string]int{"x": 1}},
		{Attempts: 20, Throttled: 2, Failed: 0, Wall: time.Second, Ideal: time.Second, Errors: map[string]int{"x": 2}},
		{Attempts: 30, Throttled: 0, Failed: 5, Wall: 2 * time.Second, Ideal: time.Second},
	}
	c := MedianCell(rs)
	if c.Runs != 3 || c.Attempts != 20 || c.Throttled != 0.1 || c.Failed != 1 || c.Wall != 2*time.Second || c.Slowdown != 2 || c.Errors["x"] != 3 {
		t.Errorf("MedianCell = %+v", c)
	}
}

// TestGoodputRuns runs one goodput case per peer and checks the harness's
// bookkeeping (not how well any peer does: the report says that).
func TestGoodputRuns(t *testing.T) {
	s := GoodputScenario(rlt.FixedWindow, rlt.IETF)
	s.Requests = 120
	for _, p := range Peers() {
		t.Run(p.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := RunGoodput(s, p)
				if r.Requests != 120 || r.Succeeded+r.Failed != 120 || r.Attempts < 120 || r.Throttled > r.Attempts {
					t.Errorf("%+v", r)
				}
				// 50 fit in the first window, 50 in the next, 630ms in
				// (the run starts 370ms into a second), the last 20 in
				// the one after, from 1.63s: 16 of them then (one per
				// worker), and the other 4 once the first answers are
				// back (1.64s) and reach the server (1.65s); their
				// answers are back at 1.66s (internal/testkit/sim's oracle: the
				// last admission plus half a round trip).
				if want := 1630*time.Millisecond + 3*SimRTT/2; r.Ideal != want {
					t.Errorf("ideal %v, want %v", r.Ideal, want)
				}
				if r.Wall <= 0 || r.Failed > 0 && len(r.Errors) == 0 {
					t.Errorf("%+v", r)
				}
				if p.Name == "net-http" && (r.Failed != r.Throttled || r.Attempts != 120) {
					t.Errorf("net/http does not retry: %+v", r)
				}
			})
		})
	}
	if n := len(GoodputCases()); n != len(rlt.Algorithms())*len(rlt.Dialects())*len(Peers()) {
		t.Errorf("%d goodput cases", n)
	}
}

// TestOutageRuns checks the outage harness, and that each peer's user
// configuration makes the attempts its documentation promises.
func TestOutageRuns(t *testing.T) {
	want := map[string]float64{"net-http": 1, "go-retryablehttp": 5, "failsafe-go": 4, "resty": 4}
	a := Amplification{Requests: 20, Workers: 4, RTT: SimRTT}
	r := Recovery{Workers: 4, Interval: 100 * time.Millisecond, Outage: time.Second, After: 20 * time.Second, RTT: SimRTT, Window: 500 * time.Millisecond, Share: 0.9}
	for _, p := range Peers() {
		t.Run(p.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				res := a.Run(p)
				if res.Failed != 20 || res.Requests != 20 {
					t.Errorf("amplification: %+v", res)
				}
				if w, ok := want[p.Name]; ok && res.PerRequest() != w {
					t.Errorf("amplification: %.2f attempts per request, want %v", res.PerRequest(), w)
				}
				if got := res.PerRequest(); got < 1 || got > 5 {
					t.Errorf("amplification: %.2f attempts per request", got)
				}
			})
			synctest.Test(t, func(t *testing.T) {
				res := r.Run(p)
				if res.OutageRequests == 0 || res.OutageAttempts < res.OutageRequests || res.Succeeded == 0 {
					t.Errorf("recovery: %+v", res)
				}
				if res.FirstSuccess < 0 || res.Recovered < res.FirstSuccess-r.Window || len(res.Timeline) != 42 {
					t.Errorf("recovery: first success %v, recovered %v, %d windows", res.FirstSuccess, res.Recovered, len(res.Timeline))
				}
				if p.Name == "net-http" && (res.FirstSuccess > SimRTT || res.Recovered != 0 || res.OutagePerRequest() != 1) {
					t.Errorf("net/http: %+v", res)
				}
			})
		})
	}
}

// TestRunSimulations runs a few simulations as cmd/benchreport does, and
// checks that their results survive the trip through JSON.
func TestRunSimulations(t *testing.T) {
	re := regexp.MustCompile(`^Goodput/gcra/x-ratelimit/headway$|^Outage/amplification/net-http$`)
	var log strings.Builder
	res := RunSimulations(re.MatchString, 2, func(f func()) { synctest.Test(t, func(*testing.T) { f() }) }, &log)
	if len(res.Goodput) != 1 || len(res.Amplification) != 1 || len(res.Recovery) != 0 || res.Runs != 3 || !res.Any() {
		t.Fatalf("%+v", res)
	}
	if strings.Count(log.String(), "\n") != 2 {
		t.Errorf("log:\n%s", log.String())
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back SimResults
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got, want := back.Goodput["Goodput/gcra/x-ratelimit/headway"], res.Goodput["Goodput/gcra/x-ratelimit/headway"]; got.Wall != want.Wall || got.Runs != 2 {
		t.Errorf("after JSON: %+v, want %+v", got, want)
	}
	if back.RecoveryRun != DefaultRecovery || back.Amplification["net-http"].Attempts != res.Amplification["net-http"].Attempts {
		t.Errorf("after JSON: %+v", back)
	}
}

package main

// Black-box tests for the apisim command. The program is built once into a
// temporary directory, each test starts its own instance on a free port and
// learns the port from the start log line; the tests only speak HTTP to it.

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/stretchr/testify/require"
)

var apisimBin string

func TestMain(m *testing.M) {
	flag.Parse()
	// The tests mostly wait on timers and sockets: unless -parallel was given,
	// run far more of them at once than GOMAXPROCS (which is the default).
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", "64")
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "apisim-blackbox-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "blackbox: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = "/usr/local/go/bin/go"
	}
	apisimBin = filepath.Join(dir, "apisim")
	build := exec.Command(goTool, "build", "-o", apisimBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "blackbox: go build:", err)
		return 1
	}
	return m.Run()
}

// ---------------------------------------------------------------------------
// Process and HTTP helpers

type apisim struct {
	base    string // http://127.0.0.1:PORT
	logLine string // the start log line
	client  *http.Client
}

var listenRE = regexp.MustCompile(`http://(127\.0\.0\.1:[0-9]+)`)

// startAPISim starts the program with -addr 127.0.0.1:0 plus args and waits for
// its start log line. The process is killed when the test ends.
func startAPISim(t testing.TB, args ...string) *apisim {
	t.Helper()
	cmd := exec.Command(apisimBin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	var (
		mu      sync.Mutex
		allLogs strings.Builder
	)
	first := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		found := false
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			allLogs.WriteString(line + "\n")
			mu.Unlock()
			if !found && listenRE.MatchString(line) {
				found = true
				first <- line
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
		if t.Failed() {
			mu.Lock()
			t.Logf("apisim %v stderr:\n%s", args, allLogs.String())
			mu.Unlock()
		}
	})

	var line string
	select {
	case line = <-first:
	case <-done:
		mu.Lock()
		logs := allLogs.String()
		mu.Unlock()
		t.Fatalf("apisim %v exited before logging its address; stderr:\n%s", args, logs)
	case <-time.After(15 * time.Second):
		t.Fatalf("apisim %v did not log its address within 15s", args)
	}
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &apisim{
		base:    "http://" + listenRE.FindStringSubmatch(line)[1],
		logLine: line,
		client:  &http.Client{Transport: tr, Timeout: 10 * time.Second},
	}
}

type reply struct {
	status     int
	header     http.Header
	body       []byte
	sent, recv time.Time
}

func (s *apisim) do(method, path string, hdr map[string]string) (reply, error) {
	req, err := http.NewRequest(method, s.base+path, nil)
	if err != nil {
		return reply{}, err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	sent := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: body, sent: sent, recv: time.Now()}, nil
}

func (s *apisim) get(t testing.TB, path string) reply {
	t.Helper()
	r, err := s.do(http.MethodGet, path, nil)
	require.NoError(t, err)
	return r
}

type stats struct{ Served, Rejected int64 }

func (s *apisim) stats(t testing.TB) stats {
	t.Helper()
	r := s.get(t, "/_stats")
	require.Equal(t, http.StatusOK, r.status, "GET /_stats: %s", r.body)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.body, &m), "GET /_stats body %q", r.body)
	var st stats
	for key, dst := range map[string]*int64{"served": &st.Served, "rejected": &st.Rejected} {
		raw, ok := m[key]
		require.True(t, ok, "GET /_stats body %q lacks %q", r.body, key)
		require.NoError(t, json.Unmarshal(raw, dst), "GET /_stats %q is not an integer in %q", key, r.body)
	}
	return st
}

// ---------------------------------------------------------------------------
// Load generation

// overload sends rate requests per second for dur, spread over workers that
// each pace themselves; a worker that falls behind skips the slots it missed.
func overload(t testing.TB, s *apisim, workers int, rate float64, dur time.Duration) []reply {
	t.Helper()
	period := time.Duration(float64(workers) / rate * float64(time.Second))
	start := time.Now().Add(20 * time.Millisecond)
	end := start.Add(dur)
	var (
		mu   sync.Mutex
		all  []reply
		errs []error
		wg   sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			next := start.Add(time.Duration(w) * period / time.Duration(workers))
			for next.Before(end) {
				time.Sleep(time.Until(next))
				r, err := s.do(http.MethodGet, fmt.Sprintf("/v1/items/%d", w), nil)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					all = append(all, r)
				}
				mu.Unlock()
				next = next.Add(period)
				if now := time.Now(); next.Before(now) {
					next = now
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs, "transport errors during the overload")
	slices.SortFunc(all, func(a, b reply) int { return a.recv.Compare(b.recv) })
	return all
}

// maxInWindow returns the most admissions that provably happened within one
// half-open span of length d: the server decided each request somewhere
// between its send and its receipt, so an admission counts for the span
// [x, x+d) only if its whole round trip lies inside it. Round-trip jitter can
// thus only hide an excess, never invent one.
func maxInWindow(admitted []reply, d time.Duration) (best int, at time.Time) {
	for _, a := range admitted {
		x := a.sent
		n := 0
		for _, b := range admitted {
			if !b.sent.Before(x) && b.recv.Before(x.Add(d)) {
				n++
			}
		}
		if n > best {
			best, at = n, x
		}
	}
	return best, at
}

// latency returns the median and the largest round trip.
func latency(rs []reply) (median, worst time.Duration) {
	ds := make([]time.Duration, 0, len(rs))
	for _, r := range rs {
		ds = append(ds, r.recv.Sub(r.sent))
	}
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)-1]
}

// ---------------------------------------------------------------------------
// Retry-After

var delaySecondsRE = regexp.MustCompile(`^[0-9]+$`)

// checkRetryAfter checks the Retry-After of a 429 for the given -retry-after
// mode and returns how long the client is told to wait from r.recv (0 for none).
func checkRetryAfter(t testing.TB, mode string, r reply, maxWait time.Duration) time.Duration {
	t.Helper()
	vals := r.header.Values("Retry-After")
	switch mode {
	case "none":
		require.Empty(t, vals, "-retry-after none: 429 must not carry Retry-After")
		return 0
	case "seconds":
		require.Len(t, vals, 1, "-retry-after seconds: 429 must carry exactly one Retry-After")
		v := vals[0]
		require.Regexp(t, delaySecondsRE, v, "Retry-After %q is not delay-seconds", v)
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, 1, "Retry-After %q: want an integer >= 1", v)
		ceil := int((maxWait + time.Second - 1) / time.Second)
		require.LessOrEqual(t, n, ceil,
			"Retry-After %q is longer than this algorithm can ever make a client wait (%v)", v, maxWait)
		return time.Duration(n) * time.Second
	case "date":
		require.Len(t, vals, 1, "-retry-after date: 429 must carry exactly one Retry-After")
		v := vals[0]
		when, err := http.ParseTime(v)
		require.NoError(t, err, "Retry-After %q is not an HTTP-date", v)
		require.Equal(t, when.UTC().Format(http.TimeFormat), v, "Retry-After %q is not an IMF-fixdate", v)
		// A positive wait rounded up to the second: after the request.
		require.True(t, when.After(r.sent),
			"Retry-After %q is not after the request was sent (%v)", v, r.sent.UTC())
		require.False(t, when.After(r.recv.Add(maxWait+time.Second)),
			"Retry-After %q is further than %v after the reply (%v)", v, maxWait, r.recv.UTC())
		return max(when.Sub(r.recv), 0)
	}
	t.Fatalf("unknown mode %q", mode)
	return 0
}

// ---------------------------------------------------------------------------
// Algorithms under steady overload

type algCase struct {
	alg   string
	burst int // 0: flag not given (burst = limit)
}

func (c algCase) name() string {
	if c.burst == 0 {
		return c.alg
	}
	return fmt.Sprintf("%s-burst%d", c.alg, c.burst)
}

var algorithms = []string{"fixed-window", "sliding-log", "sliding-counter", "token-bucket", "leaky-bucket", "gcra"}

// bounds returns how many admissions a correct limiter may make over a run
// of overload, and the most admissions any span of window-50ms may provably
// hold. The server decided each request somewhere between its send and its
// receipt; the bounds only use what follows from that, so a slow machine can
// loosen them but not break them:
//   - upper bounds use outer = last receipt - first send;
//   - lower bounds use rejections: a 429 means the quota was used up then
//     (for windows: L admissions in that window; for buckets: less than one
//     token left);
//   - for the sliding counter, when requests provably kept arriving densely
//     (no gap of W/40), the rate-based bounds of a steady overload apply.
func bounds(alg string, limit, burst int, window time.Duration, replies []reply) (lo, hi, perWindow int, why string) {
	W, L, B := window.Seconds(), float64(limit), float64(burst)
	bySent := slices.Clone(replies)
	slices.SortFunc(bySent, func(a, b reply) int { return a.sent.Compare(b.sent) })
	minSent, maxSent := bySent[0].sent, bySent[len(bySent)-1].sent
	minRecv, maxRecv := bySent[0].recv, bySent[0].recv
	var rejected, admitted []reply
	for _, r := range bySent {
		minRecv, maxRecv = minTime(minRecv, r.recv), maxTime(maxRecv, r.recv)
		if r.status == http.StatusTooManyRequests {
			rejected = append(rejected, r)
		} else {
			admitted = append(admitted, r)
		}
	}
	outer := maxRecv.Sub(minSent).Seconds()
	inner := max(maxSent.Sub(minRecv), 0).Seconds()
	allGaps := possibleGaps(bySent)
	dense := slices.Max(allGaps) < W/40

	// chain counts rejections that are pairwise at least sep apart.
	chain := func(sep float64) int {
		n := 0
		var last time.Time
		for _, r := range rejected {
			if n == 0 || r.sent.Sub(last).Seconds() >= sep {
				n++
				last = r.recv
			}
		}
		return n
	}

	why = fmt.Sprintf("outer %.3fs, inner %.3fs, longest possible gap %.0fms, %d rejections", outer, inner, slices.Max(allGaps)*1000, len(rejected))
	switch alg {
	case "fixed-window":
		// Rejections W apart are in different windows, each holding L. At
		// most ceil(T/W)+1 aligned windows are touched, each holding at most L.
		return limit * chain(W), int((math.Ceil(outer/W) + 1) * L), 2 * limit, why
	case "sliding-log":
		// A rejection at t means L admissions in (t-W, t] (and, rejections
		// not being logged, a constant overload keeps rejecting and
		// admitting); no W holds more than L.
		return limit * chain(W), int(math.Ceil(outer/W) * L), limit, why
	case "sliding-counter":
		// A rejection at t means about L admissions in the current and the
		// previous aligned window; and, windows being aligned like the fixed
		// ones, one at fraction f of a window means about L*f admissions in
		// that window alone. At most L per aligned window. A dense
		// overload gets at least L-2 in every whole window and about L per W
		// in the partial ones, and at most L + L*T/W (+1 per rounding).
		lo = max((limit-1)*chain(2*W), weightedLowerBound(rejected, limit, window))
		hi = int((math.Ceil(outer/W) + 1) * L)
		if dense {
			lo = max(lo, int(math.Floor(L*inner/W-2*math.Ceil(inner/W)))-1)
			hi = min(hi, int(math.Floor(L+L*outer/W))+3)
		}
		return lo, hi, 2 * limit, why
	case "token-bucket", "leaky-bucket", "gcra":
		// The three are the same meter: a bucket of burst tokens refilled
		// at L/W, and a request is rejected when less than one is left. At
		// the first rejection at least burst-1 were taken. Between two
		// rejections less than (burst-1)/rate apart the bucket cannot fill
		// up, so no refill is lost: over a run of such rejections from t1 to
		// t2, more than rate*(t2-t1)-1 tokens were taken.
		r := L / W
		capGap := (B - 1) / r
		gaps := possibleGaps(rejected)
		seg := func(a, b int) {
			minS, maxS, minR, maxR := rejected[a].sent, rejected[b].sent, rejected[a].recv, rejected[a].recv
			for _, x := range rejected[a : b+1] {
				minR, maxR = minTime(minR, x.recv), maxTime(maxR, x.recv)
			}
			pre := 0
			for _, x := range admitted {
				if !x.recv.After(minS) {
					pre++
				}
			}
			pre = max(pre, burst-1)
			during := 0
			if maxR.Sub(maxS).Seconds() < capGap && maxS.After(minR) {
				during = max(int(math.Floor(r*maxS.Sub(minR).Seconds()))-1, 0)
			}
			lo = max(lo, pre+during)
		}
		if len(rejected) > 0 {
			start := 0
			for j, g := range gaps { // g is the gap before rejected[j+1]
				if g >= capGap {
					seg(start, j)
					start = j + 1
				}
			}
			seg(start, len(rejected)-1)
		}
		return lo, int(B+math.Ceil(r*outer)) + 1, burst + limit, why
	}
	panic(alg)
}

// weightedLowerBound: for a sliding counter with windows aligned to
// multiples of window since the epoch, a rejection at fraction f of window k
// means prev*(1-f) + cur >= L-1 with prev <= L, so the window already holds
// cur >= L*f - 1 admissions. Windows are disjoint, so these add up.
func weightedLowerBound(rejected []reply, limit int, window time.Duration) int {
	latest := map[int64]float64{} // window index -> largest provable fraction
	for _, r := range rejected {
		k := r.sent.UnixNano() / int64(window)
		if r.recv.UnixNano()/int64(window) != k {
			continue // not provably within one window
		}
		f := float64(r.sent.UnixNano()-k*int64(window)) / float64(window)
		latest[k] = max(latest[k], f)
	}
	n := 0
	for _, f := range latest {
		n += max(int(math.Ceil(float64(limit)*f-1-1e-9)), 0)
	}
	return n
}

// possibleGaps returns, for replies sorted by send time, the longest span
// after the send of each (but the last) in which possibly none of the later
// ones reached the server: once a later-sent one has been answered, it has.
func possibleGaps(bySent []reply) []float64 {
	n := len(bySent)
	if n < 2 {
		return []float64{0}
	}
	suffixMin := make([]time.Time, n)
	for i := n - 1; i >= 0; i-- {
		suffixMin[i] = bySent[i].recv
		if i+1 < n {
			suffixMin[i] = minTime(suffixMin[i], suffixMin[i+1])
		}
	}
	gaps := make([]float64, 0, n-1)
	for j := 1; j < n; j++ {
		gaps = append(gaps, suffixMin[j].Sub(bySent[j-1].sent).Seconds())
	}
	return gaps
}

// epochFloor returns the latest multiple of d since the Unix epoch not after t.
func epochFloor(t time.Time, d time.Duration) time.Time {
	return time.Unix(0, t.UnixNano()-t.UnixNano()%int64(d))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// maxRetryWait is the longest wait a 429 may ask for under overload.
func maxRetryWait(alg string, window time.Duration) time.Duration {
	if alg == "sliding-counter" {
		// The rest of the current window and then some of the next.
		return 2 * window
	}
	return window
}

// overloadSem keeps only a few overload runs going at a time so that the
// round trips stay short on small machines.
var overloadSem = make(chan struct{}, 7)

func TestAlgorithmsUnderOverload(t *testing.T) {
	t.Parallel()
	const (
		limit   = 20
		window  = time.Second
		workers = 4
		rate    = 100.0
		dur     = 2500 * time.Millisecond
	)
	var cases []algCase
	for _, a := range algorithms {
		cases = append(cases, algCase{alg: a})
	}
	for _, a := range []string{"token-bucket", "leaky-bucket", "gcra"} {
		cases = append(cases, algCase{alg: a, burst: 5})
	}
	for _, c := range cases {
		for _, mode := range []string{"seconds", "date", "none"} {
			if c.burst != 0 && mode != "seconds" {
				continue
			}
			t.Run(c.name()+"/retry-after-"+mode, func(t *testing.T) {
				t.Parallel()
				args := []string{"-algorithm", c.alg, "-limit", strconv.Itoa(limit), "-window", window.String(), "-retry-after", mode}
				burst := limit
				if c.burst != 0 {
					burst = c.burst
					args = append(args, "-burst", strconv.Itoa(c.burst))
				}
				var (
					replies, admitted       []reply
					lo, hi, perWindow, n429 int
					why                     string
				)
				// A starved client (a busy machine) cannot overload the
				// server; such a run proves nothing and is repeated.
				for attempt := 1; ; attempt++ {
					s := startAPISim(t, args...)
					require.Contains(t, s.logLine, c.alg, "start line should say which algorithm it enforces")
					require.Contains(t, s.logLine, strconv.Itoa(limit), "start line should say the limit")

					overloadSem <- struct{}{}
					replies = overload(t, s, workers, rate, dur)
					<-overloadSem

					admitted, n429 = nil, 0
					for _, r := range replies {
						switch r.status {
						case http.StatusOK:
							admitted = append(admitted, r)
							require.Empty(t, r.header.Values("Retry-After"), "a 200 should not carry Retry-After")
							checkIETFUnderLoad(t, r, mode, maxRetryWait(c.alg, window))
						case http.StatusTooManyRequests:
							n429++
							checkRetryAfter(t, mode, r, maxRetryWait(c.alg, window))
							checkIETFUnderLoad(t, r, mode, maxRetryWait(c.alg, window))
						default:
							t.Fatalf("unexpected status %d: %s", r.status, r.body)
						}
					}
					st := s.stats(t)
					require.Equal(t, int64(len(replies)), st.Served+st.Rejected, "served+rejected must equal the requests sent")
					require.Equal(t, int64(len(admitted)), st.Served, "served must equal the 200s the client saw")
					require.Equal(t, int64(n429), st.Rejected, "rejected must equal the 429s the client saw")

					lo, hi, perWindow, why = bounds(c.alg, limit, burst, window, replies)
					med, worst := latency(replies)
					t.Logf("%s burst %d: sent %d (round trip median %v, max %v), admitted %d (bounds %d..%d; %s)",
						c.alg, burst, len(replies), med.Round(10*time.Microsecond), worst.Round(10*time.Microsecond), len(admitted), lo, hi, why)
					if len(replies) > hi && n429 > 0 {
						break
					}
					require.Less(t, attempt, 3, "the client never managed to overload the server")
				}
				require.GreaterOrEqual(t, len(admitted), lo, "%s admitted too few requests", c.alg)
				require.LessOrEqual(t, len(admitted), hi, "%s admitted too many requests", c.alg)

				span := window - 50*time.Millisecond
				most, at := maxInWindow(admitted, span)
				require.LessOrEqual(t, most, perWindow, "%s: %d admissions observed within %v starting %v", c.alg, most, span, at.Format("15:04:05.000"))
			})
		}
	}
}

// checkIETFUnderLoad checks the default (ietf) fields of a reply of an
// overload run: one policy, RateLimit naming it with 0 <= r <= q and a reset
// t no further than the longest wait; on a 429, r=0 and t no sooner than
// Retry-After (the quota cannot be back before a request can be).
func checkIETFUnderLoad(t *testing.T, r reply, mode string, maxWait time.Duration) {
	t.Helper()
	pol, err := httpsfv.UnmarshalList(r.header.Values("RateLimit-Policy"))
	require.NoError(t, err, "RateLimit-Policy %q", r.header.Values("RateLimit-Policy"))
	require.Len(t, pol, 1, "RateLimit-Policy %q", r.header.Values("RateLimit-Policy"))
	pi := sfItem(t, pol[0], "RateLimit-Policy")
	q := sfInt(t, pi.Params, "q", "RateLimit-Policy")
	require.Positive(t, sfInt(t, pi.Params, "w", "RateLimit-Policy"))
	rl, err := httpsfv.UnmarshalList(r.header.Values("RateLimit"))
	require.NoError(t, err, "RateLimit %q", r.header.Values("RateLimit"))
	require.Len(t, rl, 1, "RateLimit %q", r.header.Values("RateLimit"))
	ri := sfItem(t, rl[0], "RateLimit")
	require.Equal(t, pi.Value, ri.Value, "RateLimit must name the policy of RateLimit-Policy")
	rem := sfInt(t, ri.Params, "r", "RateLimit")
	require.True(t, rem >= 0 && rem <= q, "RateLimit r=%d out of 0..q=%d", rem, q)
	reset := sfInt(t, ri.Params, "t", "RateLimit")
	require.True(t, reset >= 0 && time.Duration(reset)*time.Second <= maxWait+time.Second, "RateLimit t=%d out of 0..%v", reset, maxWait)
	if r.status == http.StatusTooManyRequests {
		require.Zero(t, rem, "a 429 should say r=0: %q", r.header.Values("RateLimit"))
		if mode == "seconds" {
			ra, err := strconv.ParseInt(r.header.Get("Retry-After"), 10, 64)
			require.NoError(t, err)
			require.GreaterOrEqual(t, reset, ra, "RateLimit t=%d is sooner than Retry-After %d", reset, ra)
		}
	}
}

// TestSlidingLogNeverExceedsLimit checks the client-observed admission times of
// a sliding log under a bursty, uneven overload: no span shorter than the
// window (minus 50ms for round-trip jitter) holds more than limit admissions.
func TestSlidingLogNeverExceedsLimit(t *testing.T) {
	t.Parallel()
	const limit = 10
	window := 700 * time.Millisecond
	s := startAPISim(t, "-algorithm", "sliding-log", "-limit", strconv.Itoa(limit), "-window", window.String())
	var (
		mu       sync.Mutex
		admitted []reply
		all      []reply
		total    int
		wg       sync.WaitGroup
	)
	end := time.Now().Add(2200 * time.Millisecond)
	for w := range 6 {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				r, err := s.do(http.MethodPost, "/log", nil)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total++
				all = append(all, r)
				if r.status == http.StatusOK {
					admitted = append(admitted, r)
				}
				mu.Unlock()
				// Uneven pacing: bursts and pauses of different lengths.
				time.Sleep(time.Duration((i*7+w*13)%40) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	span := window - 50*time.Millisecond
	most, at := maxInWindow(admitted, span)
	med, worst := latency(all)
	t.Logf("sent %d (round trip median %v, max %v), admitted %d, at most %d within %v", total, med, worst, len(admitted), most, span)
	require.LessOrEqual(t, most, limit, "%d admissions within %v starting %v", most, span, at.Format("15:04:05.000"))
	// Rejections a window apart each prove limit admissions (rejected requests
	// must not be logged, or a constant overload would starve the log).
	lo, _, _, why := bounds("sliding-log", limit, limit, window, all)
	require.GreaterOrEqual(t, len(admitted), lo, "a sliding log should admit limit per window under overload (%s)", why)
	st := s.stats(t)
	require.Equal(t, int64(total), st.Served+st.Rejected)
	require.Equal(t, int64(len(admitted)), st.Served)
}

// TestRetryAfterIsHonoured waits exactly as long as each 429 says and expects
// the next request to be admitted.
func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	const limit = 2
	window := 3 * time.Second
	for _, alg := range algorithms {
		for _, mode := range []string{"seconds", "date"} {
			t.Run(alg+"/"+mode, func(t *testing.T) {
				t.Parallel()
				s := startAPISim(t, "-algorithm", alg, "-limit", strconv.Itoa(limit), "-window", window.String(), "-retry-after", mode)
				for cycle := range 2 {
					var rejected reply
					for i := 0; ; i++ {
						require.Less(t, i, 10*limit, "cycle %d: never got a 429", cycle)
						r := s.get(t, "/retry")
						if r.status == http.StatusTooManyRequests {
							rejected = r
							break
						}
						require.Equal(t, http.StatusOK, r.status)
					}
					wait := checkRetryAfter(t, mode, rejected, maxRetryWait(alg, window))
					time.Sleep(time.Until(rejected.recv.Add(wait)))
					r := s.get(t, "/retry")
					require.Equal(t, http.StatusOK, r.status,
						"cycle %d: waited as told by Retry-After %q (429 received %s) and was rejected at %s; body %q",
						cycle, rejected.header.Get("Retry-After"), rejected.recv.UTC().Format("15:04:05.000"),
						r.sent.UTC().Format("15:04:05.000"), r.body)
				}
			})
		}
	}
}

// TestFixedWindowBoundary checks that fixed windows are aligned and that up to
// twice the limit gets through across a boundary.
func TestFixedWindowBoundary(t *testing.T) {
	t.Parallel()
	const limit = 10
	window := 1500 * time.Millisecond
	s := startAPISim(t, "-algorithm", "fixed-window", "-limit", strconv.Itoa(limit), "-window", window.String(), "-dialect", "openai")

	// The openai dialect gives the time to the window's end in milliseconds;
	// the server computed it between the request's send and its receipt.
	probe := s.get(t, "/probe")
	require.Equal(t, http.StatusOK, probe.status)
	d, err := time.ParseDuration(probe.header.Get("X-Ratelimit-Reset-Requests"))
	require.NoError(t, err)
	early, late := probe.sent.Add(d-2*time.Millisecond), probe.recv.Add(d+2*time.Millisecond)
	// Windows are aligned: the window ends on a multiple of the window length.
	aligned := epochFloor(late, window)
	require.False(t, aligned.Before(early),
		"window end, between %s and %s, is not at a multiple of %v since the epoch",
		early.UTC().Format("15:04:05.000"), late.UTC().Format("15:04:05.000"), window)

	burst := func() (ok int, extra reply) {
		for range limit {
			if s.get(t, "/burst").status == http.StatusOK {
				ok++
			}
		}
		return ok, s.get(t, "/burst")
	}
	// Skip to 250ms before the end of a window nobody used yet, use it up,
	// and use up the next one right after the boundary. Attempts where a
	// burst did not fit in its window (a busy machine) are repeated.
	boundary := aligned
	for attempt := 1; ; attempt++ {
		require.LessOrEqual(t, attempt, 3, "machine too busy: the bursts never fitted in their windows")
		boundary = boundary.Add(2 * window)
		time.Sleep(time.Until(boundary.Add(-250 * time.Millisecond)))
		start := time.Now()
		first, extra1 := burst()
		if !extra1.recv.Before(boundary) {
			t.Logf("attempt %d: first burst ended %v after the boundary; retrying", attempt, extra1.recv.Sub(boundary))
			continue
		}
		require.Equal(t, limit, first, "a fresh window must admit limit requests")
		require.Equal(t, http.StatusTooManyRequests, extra1.status, "request limit+1 in one window must be rejected")
		time.Sleep(time.Until(boundary.Add(20 * time.Millisecond)))
		second, extra2 := burst()
		if !extra2.recv.Before(boundary.Add(window)) {
			t.Logf("attempt %d: second burst ended %v after the next boundary; retrying", attempt, extra2.recv.Sub(boundary.Add(window)))
			continue
		}
		require.Equal(t, limit, second, "the window after the boundary must admit limit requests again")
		require.Equal(t, http.StatusTooManyRequests, extra2.status, "request limit+1 in one window must be rejected")
		t.Logf("%d admitted within %v across the boundary", first+second, extra2.recv.Sub(start))
		return
	}
}

// TestSlidingCounterWeighting fills one window of a sliding counter and, half
// way through the next one, expects the previous window to weigh half:
// about limit/2 more admissions (a fixed window or a sliding log would admit
// the whole limit again). Windows are assumed aligned like the fixed ones.
func TestSlidingCounterWeighting(t *testing.T) {
	t.Parallel()
	const limit = 10
	window := 2 * time.Second
	s := startAPISim(t, "-algorithm", "sliding-counter", "-limit", strconv.Itoa(limit), "-window", window.String())
	k0 := epochFloor(time.Now(), window).Add(window)
	time.Sleep(time.Until(k0.Add(50 * time.Millisecond)))
	for i := range limit {
		require.Equal(t, http.StatusOK, s.get(t, "/w").status, "request %d in a fresh window", i+1)
	}
	full := s.get(t, "/w")
	require.True(t, full.recv.Before(k0.Add(window)), "machine too busy: filling the window took until %v after it ended", full.recv.Sub(k0.Add(window)))
	require.Equal(t, http.StatusTooManyRequests, full.status)

	next := k0.Add(window)
	time.Sleep(time.Until(next.Add(window / 2)))
	admitted := 0
	var first, lastOK, rejected reply
	for i := range 2 * limit {
		r := s.get(t, "/w")
		if i == 0 {
			first = r
		}
		if r.status != http.StatusOK {
			rejected = r
			break
		}
		admitted++
		lastOK = r
	}
	require.Equal(t, http.StatusTooManyRequests, rejected.status)
	require.Positive(t, admitted, "half way through the next window, the previous one should weigh only half")
	frac := func(at time.Time) float64 { return float64(at.Sub(next)) / float64(window) }
	// With prev = limit: admitted while limit*(1-f) + count < limit (give or
	// take one for < vs <=), so the count is about limit*f.
	lo := math.Ceil(limit*frac(rejected.sent)) - 1
	hi := math.Floor(limit*frac(lastOK.recv)) + 1
	t.Logf("admitted %d between %.3f and %.3f of the window after a full one (want %v..%v)", admitted, frac(first.sent), frac(rejected.recv), lo, hi)
	require.True(t, float64(admitted) >= lo && float64(admitted) <= hi,
		"previous window full, current at %.3f..%.3f: admitted %d, want %v..%v", frac(first.sent), frac(rejected.recv), admitted, lo, hi)
}

// ---------------------------------------------------------------------------
// /_stats, paths and flags

func TestStats(t *testing.T) {
	t.Parallel()
	s := startAPISim(t, "-limit", "3", "-window", "1h")
	st := s.stats(t)
	require.Equal(t, stats{}, st, "a fresh server has served and rejected nothing")

	// Every path and method is the API.
	reqs := []struct{ method, path string }{
		{http.MethodGet, "/"}, {http.MethodPost, "/v1/chat/completions"}, {http.MethodPut, "/a/b/c?x=1"},
		{http.MethodDelete, "/repos/x"}, {http.MethodGet, "/stats"}, {http.MethodPatch, "/_statsx"},
	}
	var codes []int
	for _, rq := range reqs {
		r, err := s.do(rq.method, rq.path, nil)
		require.NoError(t, err)
		codes = append(codes, r.status)
	}
	require.Equal(t, []int{200, 200, 200, 429, 429, 429}, codes)

	r := s.get(t, "/_stats")
	require.Equal(t, http.StatusOK, r.status, "/_stats must not be rate limited")
	require.Contains(t, r.header.Get("Content-Type"), "application/json")
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m))
	require.ElementsMatch(t, []string{"served", "rejected"}, mapsKeys(m), "body %s", r.body)
	require.Equal(t, stats{Served: 3, Rejected: 3}, s.stats(t))
	require.Equal(t, stats{Served: 3, Rejected: 3}, s.stats(t), "/_stats must not count itself")
}

func mapsKeys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestBadFlagsExit2(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-no-such-flag"},
		{"-limit", "abc"},
		{"-window", "soon"},
		{"-algorithm", "leaky-window"},
		{"-dialect", "klingon"},
		{"-retry-after", "later"},
		{"-burst", "x"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(apisimBin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			require.NoError(t, cmd.Start())
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				var ee *exec.ExitError
				require.True(t, errors.As(err, &ee), "want exit status 2, got %v; stderr %q", err, stderr.String())
				require.Equal(t, 2, ee.ExitCode(), "stderr %q", stderr.String())
				require.NotEmpty(t, stderr.String(), "a bad flag should be explained on stderr")
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("apisim %v kept running; stderr %q", args, stderr.String())
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Dialects

// dialect header expectations, all in canonical form.
type dialectCase struct {
	name string
	// required on every response, and only on 429s; allowed may appear too.
	required, required429, allowed []string
	// check inspects the i-th response (i counts from 0; the first limit are
	// 200s, then 429s) and may compare it with the previous one.
	check func(t *testing.T, i int, r, prev reply)
}

const (
	dLimit  = 5
	dWindow = time.Hour
)

// rlHeaders are the response fields that are not about rate limits.
var plainHeaders = map[string]bool{"Content-Type": true, "Content-Length": true, "Date": true, "X-Content-Type-Options": true, "Retry-After": true}

func intHeader(t *testing.T, r reply, name string) int64 {
	t.Helper()
	vals := r.header.Values(name)
	require.Len(t, vals, 1, "%s: want one field line, got %q", name, vals)
	require.Regexp(t, `^[0-9]+$`, vals[0], "%s: %q is not a non-negative integer", name, vals[0])
	n, err := strconv.ParseInt(vals[0], 10, 64)
	require.NoError(t, err)
	return n
}

// wantRemaining is the remaining count after the i-th response.
func wantRemaining(i int) int64 { return int64(max(dLimit-1-i, 0)) }

func epochNear(t *testing.T, r reply, name string, v float64) {
	t.Helper()
	lo := float64(r.sent.Unix()) - 1
	hi := float64(r.recv.Add(dWindow).Unix()) + 1
	require.True(t, v >= lo && v <= hi, "%s %v is not a Unix epoch (s) within the window from now (%d..%d)", name, v, int64(lo), int64(hi))
}

func sfItem(t *testing.T, m httpsfv.Member, what string) httpsfv.Item {
	t.Helper()
	it, ok := m.(httpsfv.Item)
	require.True(t, ok, "%s: member %#v is not an item", what, m)
	return it
}

func sfInt(t *testing.T, p *httpsfv.Params, key, what string) int64 {
	t.Helper()
	v, ok := p.Get(key)
	require.True(t, ok, "%s: parameter %q missing", what, key)
	n, ok := v.(int64)
	require.True(t, ok, "%s: parameter %q = %#v is not an integer", what, key, v)
	return n
}

var goDurationRE = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(h|m|s|ms|us|µs|ns))+$`)

var dialectCases = []dialectCase{
	{
		name:     "ietf",
		required: []string{"Ratelimit", "Ratelimit-Policy"},
		check: func(t *testing.T, i int, r, prev reply) {
			pol, err := httpsfv.UnmarshalList(r.header.Values("RateLimit-Policy"))
			require.NoError(t, err, "RateLimit-Policy %q", r.header.Values("RateLimit-Policy"))
			require.Len(t, pol, 1)
			pi := sfItem(t, pol[0], "RateLimit-Policy")
			name, ok := pi.Value.(string)
			require.True(t, ok, "RateLimit-Policy item %#v is not a String", pi.Value)
			require.Equal(t, int64(dLimit), sfInt(t, pi.Params, "q", "RateLimit-Policy"))
			require.Equal(t, int64(dWindow/time.Second), sfInt(t, pi.Params, "w", "RateLimit-Policy"))

			rl, err := httpsfv.UnmarshalList(r.header.Values("RateLimit"))
			require.NoError(t, err, "RateLimit %q", r.header.Values("RateLimit"))
			require.Len(t, rl, 1)
			ri := sfItem(t, rl[0], "RateLimit")
			require.Equal(t, name, ri.Value, "RateLimit must name the policy of RateLimit-Policy")
			require.Equal(t, wantRemaining(i), sfInt(t, ri.Params, "r", "RateLimit"))
			tt := sfInt(t, ri.Params, "t", "RateLimit")
			require.True(t, tt >= 0 && tt <= int64(dWindow/time.Second), "RateLimit t=%d out of 0..%d", tt, int64(dWindow/time.Second))
			if r.status == http.StatusTooManyRequests {
				ra, err := strconv.ParseInt(r.header.Get("Retry-After"), 10, 64)
				require.NoError(t, err)
				require.InDelta(t, ra, tt, 1, "RateLimit t and Retry-After disagree on a fixed window")
			}
		},
	},
	{
		name:     "ietf-draft-07",
		required: []string{"Ratelimit", "Ratelimit-Policy"},
		check: func(t *testing.T, i int, r, prev reply) {
			pol, err := httpsfv.UnmarshalList(r.header.Values("RateLimit-Policy"))
			require.NoError(t, err, "RateLimit-Policy %q", r.header.Values("RateLimit-Policy"))
			require.Len(t, pol, 1)
			pi := sfItem(t, pol[0], "RateLimit-Policy")
			require.Equal(t, int64(dLimit), pi.Value, "RateLimit-Policy %q", r.header.Get("RateLimit-Policy"))
			require.Equal(t, int64(dWindow/time.Second), sfInt(t, pi.Params, "w", "RateLimit-Policy"))

			d, err := httpsfv.UnmarshalDictionary(r.header.Values("RateLimit"))
			require.NoError(t, err, "RateLimit %q is not a dictionary", r.header.Values("RateLimit"))
			require.ElementsMatch(t, []string{"limit", "remaining", "reset"}, d.Names(), "RateLimit %q", r.header.Get("RateLimit"))
			get := func(k string) int64 {
				m, _ := d.Get(k)
				it := sfItem(t, m, "RateLimit "+k)
				n, ok := it.Value.(int64)
				require.True(t, ok, "RateLimit %s=%#v is not an integer", k, it.Value)
				return n
			}
			require.Equal(t, int64(dLimit), get("limit"))
			require.Equal(t, wantRemaining(i), get("remaining"))
			reset := get("reset")
			require.True(t, reset >= 0 && reset <= int64(dWindow/time.Second), "reset=%d out of 0..%d", reset, int64(dWindow/time.Second))
		},
	},
	{
		name:     "ietf-draft-04",
		required: []string{"Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Reset", "Ratelimit-Policy"},
		check: func(t *testing.T, i int, r, prev reply) {
			pol, err := httpsfv.UnmarshalList(r.header.Values("RateLimit-Policy"))
			require.NoError(t, err, "RateLimit-Policy %q", r.header.Values("RateLimit-Policy"))
			require.Len(t, pol, 1)
			pi := sfItem(t, pol[0], "RateLimit-Policy")
			require.Equal(t, int64(dLimit), pi.Value)
			require.Equal(t, int64(dWindow/time.Second), sfInt(t, pi.Params, "w", "RateLimit-Policy"))
			require.Equal(t, int64(dLimit), intHeader(t, r, "RateLimit-Limit"))
			require.Equal(t, wantRemaining(i), intHeader(t, r, "RateLimit-Remaining"))
			reset := intHeader(t, r, "RateLimit-Reset")
			require.LessOrEqual(t, reset, int64(dWindow/time.Second), "RateLimit-Reset is delta seconds, not an epoch")
		},
	},
	{
		name:     "x-ratelimit",
		required: []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"},
		check: func(t *testing.T, i int, r, prev reply) {
			require.Equal(t, int64(dLimit), intHeader(t, r, "X-RateLimit-Limit"))
			require.Equal(t, wantRemaining(i), intHeader(t, r, "X-RateLimit-Remaining"))
			epochNear(t, r, "X-RateLimit-Reset", float64(intHeader(t, r, "X-RateLimit-Reset")))
		},
	},
	{
		name:     "github",
		required: []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "X-Ratelimit-Used", "X-Ratelimit-Resource"},
		check: func(t *testing.T, i int, r, prev reply) {
			require.Equal(t, int64(dLimit), intHeader(t, r, "X-RateLimit-Limit"))
			rem := intHeader(t, r, "X-RateLimit-Remaining")
			require.Equal(t, wantRemaining(i), rem)
			require.Equal(t, int64(dLimit)-rem, intHeader(t, r, "X-RateLimit-Used"))
			epochNear(t, r, "X-RateLimit-Reset", float64(intHeader(t, r, "X-RateLimit-Reset")))
			require.Regexp(t, `^[a-z_]+$`, r.header.Get("X-RateLimit-Resource"))
		},
	},
	{
		name: "openai",
		required: []string{
			"X-Ratelimit-Limit-Requests", "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Requests",
			"X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Requests", "X-Ratelimit-Reset-Tokens",
		},
		allowed: []string{"Retry-After-Ms"},
		check: func(t *testing.T, i int, r, prev reply) {
			require.Equal(t, int64(dLimit), intHeader(t, r, "X-RateLimit-Limit-Requests"))
			require.Equal(t, int64(1000*dLimit), intHeader(t, r, "X-RateLimit-Limit-Tokens"), "-tokens defaults to 1000 x limit")
			require.Equal(t, wantRemaining(i), intHeader(t, r, "X-RateLimit-Remaining-Requests"))
			admitted := int64(min(i+1, dLimit))
			require.Equal(t, int64(1000*dLimit)-100*admitted, intHeader(t, r, "X-RateLimit-Remaining-Tokens"), "each request costs -token-cost 100")
			for _, h := range []string{"X-RateLimit-Reset-Requests", "X-RateLimit-Reset-Tokens"} {
				v := r.header.Get(h)
				require.Regexp(t, goDurationRE, v, "%s %q is not a Go duration", h, v)
				d, err := time.ParseDuration(v)
				require.NoError(t, err)
				require.True(t, d >= 0 && d <= dWindow, "%s %v out of 0..%v", h, d, dWindow)
			}
		},
	},
	{
		name: "anthropic",
		required: []string{
			"Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset",
			"Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset",
		},
		allowed: []string{
			"Anthropic-Ratelimit-Input-Tokens-Limit", "Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset",
			"Anthropic-Ratelimit-Output-Tokens-Limit", "Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset",
		},
		check: func(t *testing.T, i int, r, prev reply) {
			require.Equal(t, int64(dLimit), intHeader(t, r, "Anthropic-Ratelimit-Requests-Limit"))
			require.Equal(t, wantRemaining(i), intHeader(t, r, "Anthropic-Ratelimit-Requests-Remaining"))
			require.Equal(t, int64(1000*dLimit), intHeader(t, r, "Anthropic-Ratelimit-Tokens-Limit"))
			admitted := int64(min(i+1, dLimit))
			require.Equal(t, int64(1000*dLimit)-100*admitted, intHeader(t, r, "Anthropic-Ratelimit-Tokens-Remaining"))
			for _, h := range []string{"Anthropic-Ratelimit-Requests-Reset", "Anthropic-Ratelimit-Tokens-Reset"} {
				v := r.header.Get(h)
				at, err := time.Parse(time.RFC3339, v)
				require.NoError(t, err, "%s %q is not RFC 3339", h, v)
				epochNear(t, r, h, float64(at.Unix()))
			}
		},
	},
	{
		name:        "discord",
		required:    []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "X-Ratelimit-Reset-After", "X-Ratelimit-Bucket"},
		required429: []string{"X-Ratelimit-Scope"},
		allowed:     []string{"X-Ratelimit-Global"},
		check: func(t *testing.T, i int, r, prev reply) {
			require.Equal(t, int64(dLimit), intHeader(t, r, "X-RateLimit-Limit"))
			require.Equal(t, wantRemaining(i), intHeader(t, r, "X-RateLimit-Remaining"))
			floatRE := `^[0-9]+(\.[0-9]+)?$`
			resetS := r.header.Get("X-RateLimit-Reset")
			require.Regexp(t, floatRE, resetS)
			reset, _ := strconv.ParseFloat(resetS, 64)
			epochNear(t, r, "X-RateLimit-Reset", reset)
			afterS := r.header.Get("X-RateLimit-Reset-After")
			require.Regexp(t, floatRE, afterS)
			after, _ := strconv.ParseFloat(afterS, 64)
			require.LessOrEqual(t, after, dWindow.Seconds())
			// Reset is now + Reset-After.
			now := float64(r.recv.UnixNano()) / 1e9
			require.InDelta(t, now+after, reset, 1.1, "X-RateLimit-Reset %s vs now %.3f + Reset-After %s", resetS, now, afterS)
			require.NotEmpty(t, r.header.Get("X-RateLimit-Bucket"))
			if i > 0 {
				require.Equal(t, prev.header.Get("X-RateLimit-Bucket"), r.header.Get("X-RateLimit-Bucket"), "the bucket id should be stable")
			}
			if r.status == http.StatusTooManyRequests {
				require.Contains(t, r.header.Get("Content-Type"), "application/json")
				var body struct {
					RetryAfter *float64 `json:"retry_after"`
					Global     *bool    `json:"global"`
					Message    string   `json:"message"`
				}
				require.NoError(t, json.Unmarshal(r.body, &body), "429 body %q", r.body)
				require.NotNil(t, body.RetryAfter, "429 body %s lacks retry_after", r.body)
				require.Greater(t, *body.RetryAfter, 0.0)
				// On a fixed window the wait and the reset coincide.
				require.InDelta(t, after, *body.RetryAfter, 0.01, "retry_after vs X-RateLimit-Reset-After")
				if body.Global != nil {
					require.False(t, *body.Global)
				}
			}
		},
	},
	{
		name:     "shopify",
		required: []string{"X-Shopify-Shop-Api-Call-Limit"},
		check: func(t *testing.T, i int, r, prev reply) {
			v := r.header.Values("X-Shopify-Shop-Api-Call-Limit")
			require.Len(t, v, 1)
			m := regexp.MustCompile(`^([0-9]+)/([0-9]+)$`).FindStringSubmatch(v[0])
			require.NotNil(t, m, "X-Shopify-Shop-Api-Call-Limit %q is not used/capacity", v[0])
			used, _ := strconv.Atoi(m[1])
			capacity, _ := strconv.Atoi(m[2])
			require.Equal(t, dLimit, capacity)
			require.Equal(t, min(i+1, dLimit), used)
		},
	},
	{
		name: "none",
		check: func(t *testing.T, i int, r, prev reply) {
			for k := range r.header {
				l := strings.ToLower(k)
				require.False(t, strings.Contains(l, "rate") || strings.Contains(l, "limit") || strings.Contains(l, "quota"),
					"-dialect none sent %s: %q", k, r.header.Values(k))
			}
		},
	},
}

func TestDialects(t *testing.T) {
	t.Parallel()
	// The dialect checks use a one-hour fixed window; stay clear of the top of
	// the hour so that no run straddles a window boundary.
	if left := time.Until(epochFloor(time.Now(), time.Hour).Add(time.Hour)); left < 3*time.Second {
		time.Sleep(left + 100*time.Millisecond)
	}
	for _, dc := range dialectCases {
		t.Run(dc.name, func(t *testing.T) {
			t.Parallel()
			s := startAPISim(t, "-dialect", dc.name, "-limit", strconv.Itoa(dLimit), "-window", dWindow.String())
			require.Contains(t, s.logLine, dc.name)
			allowed := map[string]bool{}
			for _, list := range [][]string{dc.required, dc.required429, dc.allowed} {
				for _, h := range list {
					allowed[h] = true
				}
			}
			var prev reply
			for i := range dLimit + 2 {
				r := s.get(t, "/dialect")
				want := http.StatusOK
				if i >= dLimit {
					want = http.StatusTooManyRequests
				}
				require.Equal(t, want, r.status, "request %d", i+1)
				for _, h := range dc.required {
					require.NotEmpty(t, r.header.Values(h), "response %d (%d) lacks %s; headers %v", i+1, r.status, h, r.header)
				}
				if r.status == http.StatusTooManyRequests {
					for _, h := range dc.required429 {
						require.NotEmpty(t, r.header.Values(h), "429 lacks %s; headers %v", h, r.header)
					}
					require.Regexp(t, delaySecondsRE, r.header.Get("Retry-After"))
				}
				for h := range r.header {
					require.True(t, plainHeaders[h] || allowed[h], "-dialect %s: unexpected header %s: %q", dc.name, h, r.header.Values(h))
				}
				dc.check(t, i, r, prev)
				prev = r
			}
		})
	}
}

// TestOpenAITokens: the openai dialect reports a token quota that rejects on
// its own and honours X-Tokens.
func TestOpenAITokens(t *testing.T) {
	t.Parallel()
	s := startAPISim(t, "-dialect", "openai", "-limit", "5", "-window", "1h", "-tokens", "1000", "-token-cost", "400")
	rem := func(r reply) (req, tok int64) {
		return intHeader(t, r, "X-RateLimit-Remaining-Requests"), intHeader(t, r, "X-RateLimit-Remaining-Tokens")
	}
	var got [][3]int64
	for _, hdr := range []map[string]string{nil, nil, nil, {"X-Tokens": "150"}, {"X-Tokens": "60"}} {
		r, err := s.do(http.MethodPost, "/v1/chat/completions", hdr)
		require.NoError(t, err)
		req, tok := rem(r)
		got = append(got, [3]int64{int64(r.status), req, tok})
		require.Equal(t, int64(1000), intHeader(t, r, "X-RateLimit-Limit-Tokens"))
	}
	require.Equal(t, [][3]int64{
		{200, 4, 600},
		{200, 3, 200},
		{429, 3, 200}, // out of tokens: the request quota is not charged
		{200, 2, 50},
		{429, 2, 50},
	}, got)
}

// TestSeveralDialects: a comma-separated -dialect sends each dialect's fields.
func TestSeveralDialects(t *testing.T) {
	t.Parallel()
	s := startAPISim(t, "-dialect", "ietf,x-ratelimit", "-limit", "4", "-window", "1h")
	r := s.get(t, "/")
	require.Equal(t, http.StatusOK, r.status)
	for _, h := range []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		require.NotEmpty(t, r.header.Values(h), "missing %s in %v", h, r.header)
	}
	require.Equal(t, "3", r.header.Get("X-RateLimit-Remaining"))
}

// TestExtraPolicy: -policy adds another enforced policy that the ietf dialect
// describes too.
func TestExtraPolicy(t *testing.T) {
	t.Parallel()
	s := startAPISim(t, "-limit", "100", "-window", "1s", "-policy", "3/1h")
	var codes []int
	for range 4 {
		codes = append(codes, s.get(t, "/").status)
	}
	require.Equal(t, []int{200, 200, 200, 429}, codes)
	r := s.get(t, "/")
	pol, err := httpsfv.UnmarshalList(r.header.Values("RateLimit-Policy"))
	require.NoError(t, err)
	var ws []int64
	for _, m := range pol {
		it := sfItem(t, m, "RateLimit-Policy")
		ws = append(ws, sfInt(t, it.Params, "w", "RateLimit-Policy"))
	}
	require.ElementsMatch(t, []int64{1, 3600}, ws, "RateLimit-Policy %q", r.header.Values("RateLimit-Policy"))
}

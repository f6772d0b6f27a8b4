package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The CLI waits on the real clock. Every test keeps its real waiting small:
// Retry-After 0 or a few milliseconds, -base-delay of a few milliseconds,
// few attempts.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cli is the outcome of one ratecurl run.
type cli struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, stdin string, args ...string) cli {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(stdin), &stdout, &stderr)
	return cli{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func runCLIContext(t *testing.T, ctx context.Context, stdin string, args ...string) cli {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runContext(ctx, args, strings.NewReader(stdin), &stdout, &stderr)
	return cli{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// report mirrors the -json output.
type report struct {
	Requests       int                `json:"requests"`
	Succeeded      int                `json:"succeeded"`
	Failed         int                `json:"failed"`
	Errors         int                `json:"errors"`
	Attempts       int                `json:"attempts"`
	Retries        int                `json:"retries"`
	Throttled      int                `json:"throttled"`
	Status         map[string]int     `json:"status"`
	GaveUp         map[string]int     `json:"gave_up"`
	ErrorMessages  map[string]int     `json:"error_messages"`
	WaitedSeconds  float64            `json:"waited_seconds"`
	WallSeconds    float64            `json:"wall_seconds"`
	LatencySeconds map[string]float64 `json:"latency_seconds"`
	Interrupted    bool               `json:"interrupted"`
}

// runJSON runs ratecurl -json and decodes its single JSON object strictly.
func runJSON(t *testing.T, args ...string) (int, report, cli) {
	t.Helper()
	return decodeReport(t, runCLI(t, "", append([]string{"-json"}, args...)...))
}

func runJSONContext(t *testing.T, ctx context.Context, args ...string) (int, report, cli) {
	t.Helper()
	return decodeReport(t, runCLIContext(t, ctx, "", append([]string{"-json"}, args...)...))
}

// decodeReport decodes the single JSON object on stdout, strictly, and
// checks the invariants of every report.
func decodeReport(t *testing.T, out cli) (int, report, cli) {
	t.Helper()
	require.True(t, strings.HasSuffix(out.stdout, "}\n"), "stdout: %q", out.stdout)
	dec := json.NewDecoder(strings.NewReader(out.stdout))
	dec.DisallowUnknownFields()
	var r report
	require.NoError(t, dec.Decode(&r), "stdout: %q", out.stdout)
	require.False(t, dec.More(), "more than one JSON value on stdout: %q", out.stdout)
	require.Equal(t, r.Requests, r.Succeeded+r.Failed, "requests = succeeded + failed")
	errSum := 0
	for _, n := range r.ErrorMessages {
		errSum += n
	}
	require.Equal(t, r.Errors, errSum, "error_messages add up to errors")
	return out.code, r, out
}

// server is an httptest server that records what it was sent.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	hits     int
	bodies   []string
	methods  []string
	keys     []string
	ctypes   []string
	newConns atomic.Int64
}

// newServer starts a server whose handler is given the request's number
// (from 1) among all the requests the server has seen.
func newServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request, hit int)) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.hits++
		hit := s.hits
		s.bodies = append(s.bodies, string(body))
		s.methods = append(s.methods, r.Method)
		s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
		s.ctypes = append(s.ctypes, r.Header.Get("Content-Type"))
		s.mu.Unlock()
		h(w, r, hit)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.newConns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *server) seen() (hits int, methods, bodies, keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits, slicesClone(s.methods), slicesClone(s.bodies), slicesClone(s.keys)
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// statusHandler answers every request with code and the given headers.
func statusHandler(code int, kv ...string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		w.WriteHeader(code)
		io.WriteString(w, http.StatusText(code))
	}
}

func TestJSONShapeAndCountsEveryThirdThrottled(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request, hit int) {
		if hit%3 == 0 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, "slow down")
			return
		}
		io.WriteString(w, strings.Repeat("x", 4<<10))
	})

	// This server refuses every third request whatever the rate, so the
	// rate that pacing would learn from its 429s cannot help: the test is
	// about the retry layer and the report.
	out := runCLI(t, "", "-json", "-n", "20", "-c", "4", "-max-attempts", "10", "-base-delay", "2ms", "-no-pace", srv.URL)
	require.Equal(t, exitOK, out.code, "stderr: %s", out.stderr)

	// The shape: exactly these keys, with these JSON types.
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(out.stdout), &raw))
	want := map[string]string{
		"requests": "number", "succeeded": "number", "failed": "number", "errors": "number",
		"attempts": "number", "retries": "number", "throttled": "number",
		"status": "object", "gave_up": "object", "error_messages": "object",
		"waited_seconds": "number", "wall_seconds": "number", "latency_seconds": "object",
		"interrupted": "bool",
	}
	got := map[string]string{}
	for k, v := range raw {
		switch v.(type) {
		case float64:
			got[k] = "number"
		case map[string]any:
			got[k] = "object"
		case bool:
			got[k] = "bool"
		default:
			got[k] = "other"
		}
	}
	require.Equal(t, want, got)

	code, r, _ := decodeReport(t, out)
	require.Equal(t, exitOK, code)
	// Every 429 is retried and the last hit is a 200, so the server saw
	// H = 20 + H/3 (rounded down) requests: 29, 9 of them 429s.
	hits, _, _, _ := srv.seen()
	require.Equal(t, 29, hits)
	require.Equal(t, report{
		Requests: 20, Succeeded: 20, Failed: 0, Errors: 0,
		Attempts: 29, Retries: 9, Throttled: 9,
		Status: map[string]int{"200": 20}, GaveUp: map[string]int{}, ErrorMessages: map[string]int{},
		WaitedSeconds: r.WaitedSeconds, WallSeconds: r.WallSeconds, LatencySeconds: r.LatencySeconds,
	}, r)
	// A 429 with Retry-After: 0 still waits at least the base delay.
	require.GreaterOrEqual(t, r.WaitedSeconds, 9*0.002)
	require.Greater(t, r.WallSeconds, 0.0)
	require.Less(t, r.WallSeconds, 5.0)
	require.Len(t, r.LatencySeconds, 5)
	require.LessOrEqual(t, r.LatencySeconds["min"], r.LatencySeconds["p50"])
	require.LessOrEqual(t, r.LatencySeconds["p50"], r.LatencySeconds["max"])
	// Bodies are drained, so connections are reused. (A few more than one
	// per worker may be dialled while connections are being returned: see
	// TestConnectionsReused for the exact count.)
	require.LessOrEqual(t, srv.newConns.Load(), int64(2*4))
}

func TestConnectionsReused(t *testing.T) {
	// Every body, of 200s, of discarded 429s and of final 503s, is read to
	// the end and closed, so one worker keeps using one connection.
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request, hit int) {
		switch hit % 4 {
		case 1:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		io.WriteString(w, strings.Repeat("x", 8<<10))
	})
	code, r, _ := runJSON(t, "-n", "10", "-max-attempts", "2", "-base-delay", "1ms", srv.URL)
	require.Equal(t, exitFailed, code)
	require.Equal(t, 10, r.Requests)
	require.Positive(t, r.Status["503"])
	require.Positive(t, r.Throttled)
	require.Equal(t, int64(1), srv.newConns.Load())
}

func TestRetryAfterZeroIsNoLicenceToStorm(t *testing.T) {
	// Default backoff: a 429 with Retry-After: 0 waits the base delay (500ms).
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request, hit int) {
		if hit == 1 {
			statusHandler(http.StatusTooManyRequests, "Retry-After", "0")(w, nil, hit)
			return
		}
		io.WriteString(w, "ok")
	})
	code, r, _ := runJSON(t, srv.URL)
	require.Equal(t, exitOK, code)
	require.Equal(t, 2, r.Attempts)
	require.Equal(t, 1, r.Throttled)
	require.GreaterOrEqual(t, r.WaitedSeconds, 0.5)
}

func TestPostNotRepeatedAfter503(t *testing.T) {
	srv := newServer(t, statusHandler(http.StatusServiceUnavailable))
	code, r, _ := runJSON(t, "-d", "order=42", "-base-delay", "1ms", srv.URL)
	require.Equal(t, exitFailed, code)
	hits, methods, bodies, _ := srv.seen()
	require.Equal(t, 1, hits)
	require.Equal(t, []string{"POST"}, methods)
	require.Equal(t, []string{"order=42"}, bodies)
	require.Equal(t, 1, r.Attempts)
	require.Equal(t, 0, r.Retries)
	require.Equal(t, map[string]int{"503": 1}, r.Status)
	require.Equal(t, 1, r.Failed)
	require.Equal(t, 0, r.Errors)
}

func TestPostRepeatedAfter503WithIdempotencyKey(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request, hit int) {
		if hit <= 2 {
			statusHandler(http.StatusServiceUnavailable)(w, nil, hit)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	code, r, out := runJSON(t, "-d", "order=42", "-H", "Idempotency-Key: k1", "-base-delay", "2ms", srv.URL)
	require.Equal(t, exitOK, code, out.stderr)
	hits, methods, bodies, keys := srv.seen()
	require.Equal(t, 3, hits)
	require.Equal(t, []string{"POST", "POST", "POST"}, methods)
	require.Equal(t, []string{"order=42", "order=42", "order=42"}, bodies)
	require.Equal(t, []string{"k1", "k1", "k1"}, keys)
	require.Equal(t, 3, r.Attempts)
	require.Equal(t, 2, r.Retries)
	require.Equal(t, map[string]int{"201": 1}, r.Status)
}

// TestIdempotencyKeysFlag: each of the -n requests gets its own key, kept
// on its retries, so a POST is repeated after a 503 (-H would send one key
// to all of them).
func TestIdempotencyKeysFlag(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request, hit int) {
		if hit%2 == 1 {
			statusHandler(http.StatusServiceUnavailable)(w, nil, hit)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	code, r, out := runJSON(t, "-n", "3", "-d", "order=42", "-idempotency-keys", "-base-delay", "2ms", srv.URL)
	require.Equal(t, exitOK, code, out.stderr)
	hits, _, _, keys := srv.seen()
	require.Equal(t, 6, hits)
	require.Equal(t, map[string]int{"201": 3}, r.Status)
	for i := 0; i < 6; i += 2 {
		require.Len(t, keys[i], 32)
		require.Equal(t, keys[i], keys[i+1], "a request's retry carries its key")
	}
	require.NotEqual(t, keys[0], keys[2])
	require.NotEqual(t, keys[2], keys[4])
	require.NotEqual(t, keys[0], keys[4])
}

func TestPostRepeatedAfter429(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request, hit int) {
		if hit == 1 {
			statusHandler(http.StatusTooManyRequests, "Retry-After-Ms", "10")(w, nil, hit)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	code, r, out := runJSON(t, "-d", `{"id":7}`, "-H", "Content-Type: application/json", "-base-delay", "2ms", srv.URL)
	require.Equal(t, exitOK, code, out.stderr)
	hits, methods, bodies, _ := srv.seen()
	require.Equal(t, 2, hits)
	require.Equal(t, []string{"POST", "POST"}, methods)
	require.Equal(t, []string{`{"id":7}`, `{"id":7}`}, bodies)
	require.Equal(t, []string{"application/json", "application/json"}, srv.ctypes)
	require.Equal(t, 2, r.Attempts)
	require.Equal(t, 1, r.Throttled)
	require.Equal(t, map[string]int{"201": 1}, r.Status)
	require.GreaterOrEqual(t, r.WaitedSeconds, 0.010, "Retry-After-Ms is law")
}

func TestHugeRetryAfterFailsFast(t *testing.T) {
	srv := newServer(t, statusHandler(http.StatusTooManyRequests, "Retry-After", "99999999999"))
	code, r, _ := runJSON(t, "-n", "3", "-max-wait", "200ms", srv.URL)
	require.Equal(t, exitFailed, code)
	require.Equal(t, 3, r.Errors)
	require.Less(t, r.WallSeconds, 0.15)
}

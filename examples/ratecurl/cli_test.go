package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// These tests drive the CLI end to end against httptest servers. Real waits
// stay tiny (-base-delay 1ms, Retry-After 0 or a few ms) except in
// TestRetryAfterDateForms, which waits about one second on purpose.

func Test501NotRetried(t *testing.T) {
	srv := newServer(t, statusHandler(http.StatusNotImplemented))
	code, r, out := runJSON(t, "-base-delay", "1ms", srv.URL)
	require.Equal(t, exitFailed, code, out.stderr)
	hits, _, _, _ := srv.seen()
	require.Equal(t, 1, hits, "501 is never retried")
	require.Equal(t, 1, r.Requests)
	require.Equal(t, 1, r.Attempts)
	require.Equal(t, 0, r.Retries)
	require.Equal(t, 1, r.Failed)
	require.Equal(t, 0, r.Errors)
	require.Equal(t, map[string]int{"501": 1}, r.Status)
}

func TestServerSaysDoNotRetry(t *testing.T) {
	t.Run("503 with X-Should-Retry false", func(t *testing.T) {
		srv := newServer(t, statusHandler(http.StatusServiceUnavailable, "X-Should-Retry", "false"))
		code, r, out := runJSON(t, "-base-delay", "1ms", srv.URL)
		require.Equal(t, exitFailed, code, out.stderr)
		hits, _, _, _ := srv.seen()
		require.Equal(t, 1, hits)
		require.Equal(t, 1, r.Attempts)
		require.Equal(t, map[string]int{"503": 1}, r.Status)
		require.Equal(t, 0, r.Errors)
	})
	t.Run("409 with Stripe-Should-Retry true", func(t *testing.T) {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
			if hit == 1 {
				statusHandler(http.StatusConflict, "Stripe-Should-Retry", "true")(w, r, hit)
				return
			}
			io.WriteString(w, "ok")
		})
		code, r, out := runJSON(t, "-base-delay", "1ms", srv.URL)
		require.Equal(t, exitOK, code, out.stderr)
		hits, _, _, _ := srv.seen()
		require.Equal(t, 2, hits, "a 409 the server says to retry is retried")
		require.Equal(t, 2, r.Attempts)
		require.Equal(t, 1, r.Retries)
		require.Equal(t, map[string]int{"200": 1}, r.Status)
	})
}

func TestGetRetriedAfter503UntilAttemptsRunOut(t *testing.T) {
	srv := newServer(t, statusHandler(http.StatusServiceUnavailable))
	code, r, out := runJSON(t, "-max-attempts", "3", "-base-delay", "1ms", srv.URL)
	require.Equal(t, exitFailed, code, out.stderr)
	hits, methods, _, _ := srv.seen()
	require.Equal(t, 3, hits)
	require.Equal(t, []string{"GET", "GET", "GET"}, methods)
	require.Equal(t, 1, r.Requests)
	require.Equal(t, 3, r.Attempts)
	require.Equal(t, 2, r.Retries)
	require.Equal(t, map[string]int{"503": 1}, r.Status)
	require.Equal(t, 1, r.Failed)
	require.Equal(t, 0, r.Errors, "the last 503 is a response, not an error")
	require.Empty(t, r.GaveUp)
}

func TestNoRetry(t *testing.T) {
	t.Run("503", func(t *testing.T) {
		srv := newServer(t, statusHandler(http.StatusServiceUnavailable))
		code, r, out := runJSON(t, "-no-retry", "-base-delay", "1ms", srv.URL)
		require.Equal(t, exitFailed, code, out.stderr)
		hits, _, _, _ := srv.seen()
		require.Equal(t, 1, hits)
		require.Equal(t, 1, r.Attempts)
		require.Equal(t, map[string]int{"503": 1}, r.Status)
	})
	t.Run("429", func(t *testing.T) {
		srv := newServer(t, statusHandler(http.StatusTooManyRequests))
		code, r, out := runJSON(t, "-no-retry", "-base-delay", "1ms", srv.URL)
		require.Equal(t, exitFailed, code, out.stderr)
		hits, _, _, _ := srv.seen()
		require.Equal(t, 1, hits)
		require.Equal(t, 1, r.Attempts)
		require.Equal(t, 0, r.Retries)
		require.Equal(t, 1, r.Throttled)
		require.Equal(t, map[string]int{"429": 1}, r.Status)
		require.Equal(t, 0, r.Errors, "without retries a 429 is returned as it came")
	})
	t.Run("all 200", func(t *testing.T) {
		srv := newServer(t, statusHandler(http.StatusOK))
		code, r, out := runJSON(t, "-no-retry", "-n", "10", "-c", "2", srv.URL)
		require.Equal(t, exitOK, code, out.stderr)
		hits, _, _, _ := srv.seen()
		require.Equal(t, 10, hits)
		require.Equal(t, 10, r.Requests)
		require.Equal(t, 10, r.Succeeded)
		require.Equal(t, 10, r.Attempts)
		require.Equal(t, 0, r.Retries)
		require.Equal(t, map[string]int{"200": 10}, r.Status)
	})
}

func TestSingleRequestPrintsBody(t *testing.T) {
	body := "line one\nline two\x00\xff no trailing newline"
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		io.WriteString(w, body)
	})
	out := runCLI(t, "", srv.URL)
	require.Equal(t, exitOK, out.code, out.stderr)
	require.Equal(t, body, out.stdout)
	require.Empty(t, out.stderr)
	hits, _, _, _ := srv.seen()
	require.Equal(t, 1, hits)
}

func TestSingleFailedRequestPrintsBodyAndStatus(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request, hit int) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "down for maintenance (hit %d)\n", hit)
	})
	out := runCLI(t, "", "-max-attempts", "2", "-base-delay", "1ms", srv.URL)
	require.Equal(t, exitFailed, out.code, out.stderr)
	hits, _, _, _ := srv.seen()
	require.Equal(t, 2, hits)
	// Only the final response's body is printed; the retried one is discarded.
	require.Equal(t, "down for maintenance (hit 2)\n", out.stdout)
	require.Equal(t, "ratecurl: GET "+srv.URL+": 503 Service Unavailable\n", out.stderr)
}

func TestManyRequestsWithoutJSON(t *testing.T) {
	srv := newServer(t, statusHandler(http.StatusOK))
	out := runCLI(t, "", "-n", "5", "-c", "2", srv.URL)
	require.Equal(t, exitOK, out.code, out.stderr)
	require.Empty(t, out.stdout, "bodies are discarded with -n > 1")
	hits, _, _, _ := srv.seen()
	require.Equal(t, 5, hits)
	require.Equal(t, 1, strings.Count(out.stderr, "\n"), "one summary line: %q", out.stderr)
	require.True(t, strings.HasPrefix(out.stderr,
		"ratecurl: 5 requests: 5 succeeded, 0 failed (0 errors); 5 attempts, 0 retries, 0 throttled; waited "),
		"stderr: %q", out.stderr)
	require.True(t, strings.HasSuffix(out.stderr, "; status 200×5\n"), "stderr: %q", out.stderr)
}

func TestFlagsAfterURL(t *testing.T) {
	srv := newServer(t, statusHandler(http.StatusOK))
	code, r, out := decodeReport(t, runCLI(t, "", srv.URL, "-json", "-n", "2"))
	require.Equal(t, exitOK, code, out.stderr)
	hits, _, _, _ := srv.seen()
	require.Equal(t, 2, hits)
	require.Equal(t, 2, r.Requests)
	require.Equal(t, 2, r.Succeeded)
	require.Empty(t, out.stderr)

	// Flags on both sides of the URL.
	srv2 := newServer(t, statusHandler(http.StatusOK))
	code, r, out = decodeReport(t, runCLI(t, "", "-n", "3", srv2.URL, "-json", "-c", "2"))
	require.Equal(t, exitOK, code, out.stderr)
	hits, _, _, _ = srv2.seen()
	require.Equal(t, 3, hits)
	require.Equal(t, 3, r.Requests)
}

func TestDoubleDashEndsFlags(t *testing.T) {
	srv := newServer(t, statusHandler(http.StatusOK))

	// Flags before "--" apply; the URL follows it.
	code, r, out := decodeReport(t, runCLI(t, "", "-json", "-n", "2", "--", srv.URL))
	require.Equal(t, exitOK, code, out.stderr)
	require.Equal(t, 2, r.Requests)
	hits, _, _, _ := srv.seen()
	require.Equal(t, 2, hits)

	// After "--" a flag is a positional argument: two "URLs".
	out = runCLI(t, "", "--", srv.URL, "-json")
	require.Equal(t, exitUsage, out.code)
	require.Contains(t, out.stderr, "want exactly one URL, got 2")
	require.Empty(t, out.stdout)
	out = runCLI(t, "", srv.URL, "--", "-json")
	require.Equal(t, exitUsage, out.code)
	require.Contains(t, out.stderr, "want exactly one URL, got 2")
	hits, _, _, _ = srv.seen()
	require.Equal(t, 2, hits, "usage errors send nothing")

	// "--" as the value of a flag does not end the flags.
	code, r, out = decodeReport(t, runCLI(t, "", "-d", "--", srv.URL, "-json"))
	require.Equal(t, exitOK, code, out.stderr)
	require.Equal(t, 1, r.Requests)
	hits, methods, bodies, _ := srv.seen()
	require.Equal(t, 3, hits)
	require.Equal(t, "POST", methods[2])
	require.Equal(t, "--", bodies[2])

	// Nor does a "--" that is the value of a flag whose own name was
	// itself the value of the flag before it (-d's value is "-d").
	out = runCLI(t, "", "-d", "-d", "--", srv.URL, "-json")
	require.Equal(t, exitUsage, out.code, "stdout %q, stderr %q", out.stdout, out.stderr)
	require.Contains(t, out.stderr, "want exactly one URL, got 2")
	hits, _, _, _ = srv.seen()
	require.Equal(t, 3, hits)
}

func TestBodyFromFile(t *testing.T) {
	// Bytes curl -d would mangle (newlines, NUL, '&', a CR) are sent exactly.
	data := "a=1&b=two words\r\nline 2\n\x00\xfe\n"
	file := filepath.Join(t.TempDir(), "body.bin")
	require.NoError(t, os.WriteFile(file, []byte(data), 0o600))

	srv := newServer(t, statusHandler(http.StatusOK))
	code, _, out := runJSON(t, "-d", "@"+file, srv.URL)
	require.Equal(t, exitOK, code, out.stderr)

	out = runCLI(t, data, "-json", "-d", "@-", srv.URL)
	require.Equal(t, exitOK, out.code, out.stderr)

	// Several -d are joined with '&'.
	out = runCLI(t, "", "-json", "-d", "@"+file, "-d", "x=y", srv.URL)
	require.Equal(t, exitOK, out.code, out.stderr)

	hits, methods, bodies, _ := srv.seen()
	require.Equal(t, 3, hits)
	require.Equal(t, []string{"POST", "POST", "POST"}, methods)
	require.Equal(t, []string{data, data, data + "&x=y"}, bodies)
	require.Equal(t, []string{
		"application/x-www-form-urlencoded", "application/x-www-form-urlencoded", "application/x-www-form-urlencoded",
	}, srv.ctypes)

	// -X overrides the default POST.
	out = runCLI(t, "", "-json", "-X", "PUT", "-d", "@"+file, srv.URL)
	require.Equal(t, exitOK, out.code, out.stderr)
	_, methods, bodies, _ = srv.seen()
	require.Equal(t, "PUT", methods[3])
	require.Equal(t, data, bodies[3])
}

func TestHeaders(t *testing.T) {
	var (
		mu    sync.Mutex
		hdrs  []http.Header
		hosts []string
	)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		mu.Lock()
		hdrs = append(hdrs, r.Header.Clone())
		hosts = append(hosts, r.Host)
		mu.Unlock()
	})
	code, _, out := runJSON(t, "-H", "X-A: 1", "-H", "X-B: two words", srv.URL)
	require.Equal(t, exitOK, code, out.stderr)
	code, _, out = runJSON(t, "-H", "Host: example.test", srv.URL)
	require.Equal(t, exitOK, code, out.stderr)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, hdrs, 2)
	require.Equal(t, []string{"1"}, hdrs[0].Values("X-A"))
	require.Equal(t, []string{"two words"}, hdrs[0].Values("X-B"))
	require.Equal(t, "ratecurl (headway)", hdrs[0].Get("User-Agent"))
	require.Equal(t, strings.TrimPrefix(srv.URL, "http://"), hosts[0])

	require.Equal(t, "example.test", hosts[1])
	require.Empty(t, hdrs[1].Values("X-A"))
}

func TestBadUsage(t *testing.T) {
	srv := newServer(t, statusHandler(http.StatusOK))
	missing := filepath.Join(t.TempDir(), "missing-file")
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"no URL", []string{"-n", "2"}, "missing URL"},
		{"two URLs", []string{srv.URL, srv.URL + "/x"}, "want exactly one URL, got 2"},
		{"unknown flag", []string{"-bogus", srv.URL}, "flag provided but not defined: -bogus"},
		{"n zero", []string{"-n", "0", srv.URL}, "-n must be at least 1, got 0"},
		{"c zero", []string{"-c", "0", srv.URL}, "-c must be at least 1, got 0"},
		{"bad jitter", []string{"-jitter", "bogus", srv.URL}, `bad -jitter "bogus"`},
		{"header without colon", []string{"-H", "X-A 1", srv.URL}, `bad -H "X-A 1": want 'Name: value'`},
		{"missing body file", []string{"-d", "@" + missing, srv.URL}, "-d @" + missing + ": open "},
		{"max-attempts zero", []string{"-max-attempts", "0", srv.URL}, "-max-attempts must be at least 1, got 0"},
		{"ftp URL", []string{"ftp://example.com/file"}, `invalid URL "ftp://example.com/file": want an http:// or https:// URL`},
		{"URL without host", []string{"http:///path"}, `invalid URL "http:///path": no host`},
		{"bad method", []string{"-X", "GE T", srv.URL}, `invalid method "GE T"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := runCLI(t, "", tc.args...)
			require.Equal(t, exitUsage, out.code, "stderr: %s", out.stderr)
			require.Empty(t, out.stdout)
			require.Contains(t, out.stderr, "ratecurl: "+tc.want)
			require.Contains(t, out.stderr, "ratecurl -h lists the flags")
		})
	}
	hits, _, _, _ := srv.seen()
	require.Equal(t, 0, hits, "bad usage sends nothing")

	out := runCLI(t, "", "-h")
	require.Equal(t, exitOK, out.code)
	require.Empty(t, out.stdout)
	require.True(t, strings.HasPrefix(out.stderr, "usage: ratecurl [flags] URL\n"), "stderr: %q", out.stderr)
	require.Contains(t, out.stderr, "-max-attempts")
	require.Contains(t, out.stderr, "-no-retry")
}

func TestTimeout(t *testing.T) {
	srv := newServer(t, func(_ http.ResponseWriter, r *http.Request, _ int) {
		<-r.Context().Done() // until the client gives up
	})
	start := time.Now()
	code, r, out := runJSON(t, "-timeout", "50ms", "-base-delay", "1ms", srv.URL)
	require.Equal(t, exitFailed, code, out.stderr)
	require.Less(t, time.Since(start), 2*time.Second)
	hits, _, _, _ := srv.seen()
	require.Equal(t, 1, hits, "the caller's deadline is not retried")
	require.Equal(t, 1, r.Requests)
	require.Equal(t, 1, r.Failed)
	require.Equal(t, 1, r.Errors)
	require.Equal(t, 1, r.Attempts)
	require.Empty(t, r.Status)
	require.Len(t, r.ErrorMessages, 1)
	for msg := range r.ErrorMessages {
		require.Contains(t, msg, "context deadline exceeded")
	}
}

func TestConnectionErrorsAreCountedAndRetried(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	code, r, out := runJSON(t, "-max-attempts", "2", "-base-delay", "1ms", "http://"+addr+"/")
	require.Equal(t, exitFailed, code, out.stderr)
	require.Equal(t, 1, r.Requests)
	require.Equal(t, 1, r.Failed)
	require.Equal(t, 1, r.Errors)
	require.Equal(t, 2, r.Attempts, "a refused connection is retried")
	require.Equal(t, 1, r.Retries)
	require.Empty(t, r.Status)
	require.Empty(t, r.GaveUp)
	require.Len(t, r.ErrorMessages, 1)
	for msg, n := range r.ErrorMessages {
		require.Contains(t, msg, "connection refused")
		require.Equal(t, 1, n)
	}
	require.Contains(t, out.stderr, "connection refused")
}

func TestCancelStopsAndReports(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	srv := newServer(t, func(_ http.ResponseWriter, r *http.Request, _ int) {
		once.Do(func() { close(started) })
		<-r.Context().Done()
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	cancelledAt := make(chan time.Time, 1)
	go func() {
		select {
		case <-started:
			cancelledAt <- time.Now()
			cancel()
		case <-done:
			cancelledAt <- time.Time{}
		}
	}()
	code, r, out := runJSONContext(t, ctx, "-n", "5", "-c", "1", "-base-delay", "1ms", srv.URL)
	returned := time.Now()
	close(done)
	cancelled := <-cancelledAt

	require.Equal(t, exitFailed, code, out.stderr)
	require.True(t, r.Interrupted)
	require.False(t, cancelled.IsZero(), "the handler was never reached")
	require.Less(t, returned.Sub(cancelled), time.Second, "run returns promptly after cancellation")
	hits, _, _, _ := srv.seen()
	require.Equal(t, 1, hits, "nothing is sent after cancellation")
	require.Equal(t, 1, r.Requests)
	require.Equal(t, 1, r.Failed)
	require.Equal(t, 1, r.Errors)
	for msg := range r.ErrorMessages {
		require.Contains(t, msg, "context canceled")
	}
}

var retryLine = regexp.MustCompile(`^ratecurl: (request \d+: )?attempt (\d+) got (\d{3}) [^,]*, (no retry-after|retry-after \S+); waiting (\S+) before attempt (\d+)$`)

// retryLines returns the -v retry lines of stderr, split into their parts.
func retryLines(t *testing.T, stderr string) [][]string {
	t.Helper()
	var lines [][]string
	for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		if m := retryLine.FindStringSubmatch(l); m != nil {
			lines = append(lines, m)
		}
	}
	return lines
}

func TestVerbose(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
		switch hit {
		case 1:
			statusHandler(http.StatusServiceUnavailable)(w, r, hit)
		case 2:
			statusHandler(http.StatusTooManyRequests, "Retry-After-Ms", "3")(w, r, hit)
		default:
			io.WriteString(w, "ok")
		}
	})
	out := runCLI(t, "", "-v", "-base-delay", "1ms", srv.URL)
	require.Equal(t, exitOK, out.code, out.stderr)
	require.Equal(t, "ok", out.stdout)

	lines := retryLines(t, out.stderr)
	require.Len(t, lines, 2, "one line per retry; stderr: %s", out.stderr)
	require.Equal(t, []string{"", "1", "503", "no retry-after", "2"},
		[]string{lines[0][1], lines[0][2], lines[0][3], lines[0][4], lines[0][6]})
	require.Equal(t, []string{"", "2", "429", "retry-after 3ms", "3"},
		[]string{lines[1][1], lines[1][2], lines[1][3], lines[1][4], lines[1][6]})
	for i, l := range lines {
		d, err := time.ParseDuration(l[5])
		require.NoError(t, err, "line %d", i)
		require.GreaterOrEqual(t, d, time.Duration(0))
		if i == 1 {
			require.GreaterOrEqual(t, d, 3*time.Millisecond, "Retry-After-Ms is honoured")
		}
	}
	require.Contains(t, out.stderr, "ratecurl: 200 OK after 3 attempts (1 throttled), waited ")
	require.Equal(t, 3, strings.Count(out.stderr, "\n"), "stderr: %s", out.stderr)

	// With -n > 1 each line names its request.
	srv2 := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
		if hit == 1 {
			statusHandler(http.StatusServiceUnavailable)(w, r, hit)
		}
	})
	out = runCLI(t, "", "-v", "-n", "2", "-c", "1", "-base-delay", "1ms", srv2.URL)
	require.Equal(t, exitOK, out.code, out.stderr)
	lines = retryLines(t, out.stderr)
	require.Len(t, lines, 1, "stderr: %s", out.stderr)
	require.Equal(t, "request 1: ", lines[0][1])
	require.Equal(t, "503", lines[0][3])
}

func TestRetryAfterDateForms(t *testing.T) {
	t.Run("date against a skewed Date header", func(t *testing.T) {
		// The server's clock is 3 hours behind ours: its Retry-After, one
		// second after its own Date, is measured from that Date, not from
		// our clock (which would make it 3 hours in the past, i.e. now).
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
			if hit == 1 {
				date := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
				w.Header().Set("Date", date.Format(http.TimeFormat))
				w.Header().Set("Retry-After", date.Add(time.Second).Format(http.TimeFormat))
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			io.WriteString(w, "ok")
		})
		code, r, out := runJSON(t, "-v", "-base-delay", "1ms", srv.URL)
		require.Equal(t, exitOK, code, out.stderr)
		hits, _, _, _ := srv.seen()
		require.Equal(t, 2, hits)
		require.Equal(t, 2, r.Attempts)
		require.Equal(t, 1, r.Throttled)
		require.Equal(t, map[string]int{"200": 1}, r.Status)
		require.GreaterOrEqual(t, r.WaitedSeconds, 1.0)
		require.Less(t, r.WaitedSeconds, 1.5)
		require.Contains(t, out.stderr, "retry-after 1s;")
	})

	// Every HTTP-date form is read. The server's clock is 3 hours ahead and
	// its Retry-After is its own Date: no wait beyond the backoff, where
	// our clock would read 3 hours and give up (longer than -max-wait).
	when := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second)
	for name, layout := range map[string]string{
		"IMF-fixdate": http.TimeFormat,
		"RFC 850":     "Monday, 02-Jan-06 15:04:05 GMT",
		"asctime":     "Mon Jan _2 15:04:05 2006",
		"UTC zone":    "Mon, 02 Jan 2006 15:04:05 UTC",
	} {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
				if hit == 1 {
					w.Header().Set("Date", when.Format(http.TimeFormat))
					w.Header().Set("Retry-After", when.Format(layout))
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				io.WriteString(w, "ok")
			})
			code, r, out := runJSON(t, "-v", "-base-delay", "1ms", "-max-wait", "10s", srv.URL)
			require.Equal(t, exitOK, code, out.stderr)
			hits, _, _, _ := srv.seen()
			require.Equal(t, 2, hits)
			require.Equal(t, 1, r.Throttled)
			require.Less(t, r.WaitedSeconds, 0.5)
			lines := retryLines(t, out.stderr)
			require.Len(t, lines, 1, "stderr: %s", out.stderr)
			require.Equal(t, "retry-after 0s", lines[0][4], "the date was read")
		})
	}
}

// TestVerbosePrintsWaits: -v says why the pacing layer holds a request back
// (here: the key's first answer, then the server's pause). The first answer
// takes 100 ms, as a remote server's would: on loopback under load the
// second request's goroutine could start after it arrived, and there was no
// first answer to wait for.
func TestVerbosePrintsWaits(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
		if hit == 1 {
			time.Sleep(100 * time.Millisecond)
			statusHandler(http.StatusTooManyRequests, "Retry-After-Ms", "40")(w, r, hit)
			return
		}
		io.WriteString(w, "ok")
	})
	out := runCLI(t, "", "-v", "-n", "2", "-c", "2", srv.URL)
	require.Equal(t, exitOK, out.code, out.stderr)
	require.Contains(t, out.stderr, ": holding back up to ")
	require.Contains(t, out.stderr, "waiting for the key's first answer")
	require.Regexp(t, `request \d: holding back [0-9.]+ms: paused by the server: Retry-After`, out.stderr)

	// -no-pace: nothing is held back.
	out = runCLI(t, "", "-v", "-n", "2", "-c", "2", "-no-pace", srv.URL)
	require.Equal(t, exitOK, out.code, out.stderr)
	require.NotContains(t, out.stderr, "holding back")
}

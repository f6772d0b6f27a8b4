package realservers

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headway-go/headway"
)

// result is what one workload measured.
type result struct {
	requests, attempts, refused, failed int
	wall                                time.Duration
}

// counting counts what the server saw and refused.
type counting struct {
	next              http.Handler
	attempts, refused atomic.Int64
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.attempts.Add(1)
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	c.next.ServeHTTP(rec, r)
	if rec.status == http.StatusTooManyRequests {
		c.refused.Add(1)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// tracer records each exchange and each wait, for a failing test to show.
type tracer struct {
	next  http.RoundTripper
	start time.Time
	mu    sync.Mutex
	lines []string
}

func (tr *tracer) log(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.lines = append(tr.lines, fmt.Sprintf("%8.1fms ", float64(time.Since(tr.start).Microseconds())/1000)+fmt.Sprintf(format, args...))
}

func (tr *tracer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := tr.next.RoundTrip(r)
	if err != nil {
		tr.log("error %v", err)
		return nil, err
	}
	var hs []string
	for name, vs := range resp.Header {
		if n := strings.ToLower(name); strings.Contains(n, "rate") || n == "retry-after" || n == "date" {
			hs = append(hs, name+": "+strings.Join(vs, ", "))
		}
	}
	slices.Sort(hs)
	tr.log("%d %s", resp.StatusCode, strings.Join(hs, "; "))
	return resp, nil
}

func (tr *tracer) wait(e headway.WaitEvent) { tr.log("  waits %v: %s", e.Wait, e.Reason) }

// run sends n GETs from workers goroutines through a headway client to a
// loopback server behind limiter.
func run(t *testing.T, limiter func(http.Handler) http.Handler, n, workers int, opts ...headway.Option) result {
	t.Helper()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"ok":true}`) })
	c := &counting{next: limiter(api)}
	srv := httptest.NewServer(c)
	defer srv.Close()
	tr := &tracer{next: srv.Client().Transport, start: time.Now()}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("what the client saw:\n%s", strings.Join(tr.lines, "\n"))
		}
	})
	base := &http.Client{Transport: tr}
	client := headway.Wrap(base, append([]headway.Option{headway.WithMaxWait(time.Minute), headway.WithOnWait(tr.wait)}, opts...)...)
	var failed atomic.Int64
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				resp, err := client.Get(srv.URL + "/items")
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
				}
			}
		}()
	}
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	r := result{requests: n, attempts: int(c.attempts.Load()), refused: int(c.refused.Load()), failed: int(failed.Load()), wall: time.Since(start)}
	t.Logf("%d requests: %d attempts, %d refused, %d failed, %v", r.requests, r.attempts, r.refused, r.failed, r.wall.Round(time.Millisecond))
	return r
}

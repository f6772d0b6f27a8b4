package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/headway-go/headway"
)

// maxErrorMessages bounds the distinct messages in the report's
// error_messages; further ones are counted under otherMessages.
const (
	maxErrorMessages = 10
	otherMessages    = "(other messages)"
)

// summary adds up the results of all requests.
type summary struct {
	requests, succeeded, failed, errors int
	attempts, retries, throttled        int
	waited                              time.Duration
	status                              map[string]int
	gaveUp                              map[string]int
	messages                            map[string]int
	latencies                           []time.Duration
	start                               time.Time
	wall                                time.Duration
	interrupted                         bool
}

func newSummary() *summary {
	return &summary{
		status:   map[string]int{},
		gaveUp:   map[string]int{},
		messages: map[string]int{},
		start:    time.Now(),
	}
}

func (s *summary) add(res result) {
	s.requests++
	if res.ok() {
		s.succeeded++
	} else {
		s.failed++
	}
	s.attempts += res.attempts
	s.retries += res.retries
	s.throttled += res.throttled
	s.waited += res.waited
	var rle *headway.RateLimitError
	switch {
	case res.status != 0:
		s.status[strconv.Itoa(res.status)]++
	case errors.As(res.err, &rle) && rle.StatusCode != 0:
		// headway gave up on a 429: that was the final response, though
		// the request ends in the typed error (counted in errors too).
		s.status[strconv.Itoa(rle.StatusCode)]++
	}
	if res.err != nil {
		s.errors++
		msg := messageKey(res.err)
		if _, seen := s.messages[msg]; !seen && len(s.messages) >= maxErrorMessages {
			msg = otherMessages
		}
		s.messages[msg]++
		if errors.As(res.err, &rle) {
			s.gaveUp[rle.Reason.String()]++
		}
	}
	s.latencies = append(s.latencies, res.took)
}

// finish stops the clock.
func (s *summary) finish(interrupted bool) {
	s.wall = time.Since(s.start)
	s.interrupted = interrupted
}

// allSucceeded reports whether all n requests were sent and succeeded.
func (s *summary) allSucceeded(n int) bool {
	return !s.interrupted && s.requests == n && s.succeeded == n
}

// messageKey is the error's message without the parts of a RateLimitError
// that differ from one request to the next (the time waited so far, the body
// excerpt, the remaining pause of a request held back, the exact time left
// before a deadline), so that equal failures are counted together.
func messageKey(err error) string {
	var rle *headway.RateLimitError
	if !errors.As(err, &rle) {
		return err.Error()
	}
	c := *rle
	c.Waited, c.Body, c.Header = 0, nil, nil
	if c.StatusCode == 0 { // held back by the pacing layer: RetryAfter is what was left of a pause
		c.RetryAfter, c.HasRetryAfter = 0, false
	}
	if c.Reason == headway.ReasonDeadline {
		c.Bound = c.Bound.Round(100 * time.Millisecond)
	}
	return c.Error()
}

// jsonReport is the -json output. Maps are always objects, never null.
type jsonReport struct {
	Requests  int `json:"requests"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Errors    int `json:"errors"`
	Attempts  int `json:"attempts"`
	Retries   int `json:"retries"`
	Throttled int `json:"throttled"`
	// Status counts final responses by code, a 429 that headway gave up
	// on included (that request also counts in Errors).
	Status        map[string]int `json:"status"`
	GaveUp        map[string]int `json:"gave_up"`
	ErrorMessages map[string]int `json:"error_messages"`
	WaitedSeconds float64        `json:"waited_seconds"`
	WallSeconds   float64        `json:"wall_seconds"`
	// LatencySeconds has min, p50, p90, p99 and max of the requests' total
	// times (retries and body included); {} when no request finished.
	LatencySeconds map[string]float64 `json:"latency_seconds"`
	// Interrupted is true when the run was cancelled (Ctrl-C) before every
	// request was sent; requests then counts those that were.
	Interrupted bool `json:"interrupted"`
}

func (s *summary) report() jsonReport {
	return jsonReport{
		Requests:       s.requests,
		Succeeded:      s.succeeded,
		Failed:         s.failed,
		Errors:         s.errors,
		Attempts:       s.attempts,
		Retries:        s.retries,
		Throttled:      s.throttled,
		Status:         s.status,
		GaveUp:         s.gaveUp,
		ErrorMessages:  s.messages,
		WaitedSeconds:  seconds(s.waited),
		WallSeconds:    seconds(s.wall),
		LatencySeconds: s.latency(),
		Interrupted:    s.interrupted,
	}
}

// latency returns the latency percentiles (nearest rank).
func (s *summary) latency() map[string]float64 {
	m := map[string]float64{}
	if len(s.latencies) == 0 {
		return m
	}
	l := slices.Clone(s.latencies)
	slices.Sort(l)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(l)))) - 1
		return l[min(max(i, 0), len(l)-1)]
	}
	m["min"] = seconds(l[0])
	m["p50"] = seconds(rank(0.50))
	m["p90"] = seconds(rank(0.90))
	m["p99"] = seconds(rank(0.99))
	m["max"] = seconds(l[len(l)-1])
	return m
}

// seconds returns d in seconds, rounded to the microsecond.
func seconds(d time.Duration) float64 {
	return math.Round(d.Seconds()*1e6) / 1e6
}

func writeJSON(w io.Writer, r jsonReport) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// text is the one-line summary printed on stderr for -n > 1 without -json.
func (s *summary) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ratecurl: %d request%s: %d succeeded, %d failed (%d error%s); %d attempts, %d retries, %d throttled; waited %v, took %v",
		s.requests, plural(s.requests), s.succeeded, s.failed, s.errors, plural(s.errors),
		s.attempts, s.retries, s.throttled,
		s.waited.Round(time.Millisecond), s.wall.Round(time.Millisecond))
	if len(s.status) > 0 {
		b.WriteString("; status")
		for _, code := range slices.Sorted(maps.Keys(s.status)) {
			fmt.Fprintf(&b, " %s×%d", code, s.status[code])
		}
	}
	if len(s.gaveUp) > 0 {
		b.WriteString("; gave up:")
		for i, reason := range slices.Sorted(maps.Keys(s.gaveUp)) {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, " %s×%d", reason, s.gaveUp[reason])
		}
	}
	if s.interrupted {
		b.WriteString("; interrupted")
	}
	return b.String()
}

// maxErrorLines bounds the per-request error lines on stderr; the summary
// counts the rest.
const maxErrorLines = 20

// console serialises stderr, which workers (-v) and the collector share, and
// keeps a progress line at the bottom when stderr is a terminal.
type console struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	progress string // the progress line on screen, if any
	errLines int
}

func newConsole(w io.Writer, tty bool) *console { return &console{w: w, tty: tty} }

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// printf prints one line, above the progress line if there is one.
func (c *console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.line(fmt.Sprintf(format, args...))
}

// errorf prints an error line; after maxErrorLines of them it says once
// that the rest are only counted.
func (c *console) errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errLines++
	switch {
	case c.errLines <= maxErrorLines:
		c.line(fmt.Sprintf(format, args...))
	case c.errLines == maxErrorLines+1:
		c.line("ratecurl: more errors; only counted from now on")
	}
}

func (c *console) line(s string) {
	if c.progress != "" {
		fmt.Fprintf(c.w, "\r\033[K%s\n%s", s, c.progress)
		return
	}
	fmt.Fprintln(c.w, s)
}

// setProgress replaces the progress line (terminals only).
func (c *console) setProgress(s string) {
	if !c.tty {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.progress = s
	fmt.Fprintf(c.w, "\r%s\033[K", s)
}

// endProgress leaves the last progress line on screen and moves below it.
func (c *console) endProgress() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.progress != "" {
		fmt.Fprintln(c.w)
		c.progress = ""
	}
}

// progress draws "37/300 done, 2 failed" at most every progressEvery.
type progress struct {
	con  *console
	n    int
	last time.Time
	on   bool
}

const progressEvery = 100 * time.Millisecond

func newProgress(con *console, n int) *progress {
	return &progress{con: con, n: n, on: con.tty && n > 1}
}

func (p *progress) update(s *summary) {
	if !p.on || time.Since(p.last) < progressEvery {
		return
	}
	p.last = time.Now()
	p.con.setProgress(fmt.Sprintf("%d/%d done, %d failed", s.requests, p.n, s.failed))
}

func (p *progress) finish(s *summary) {
	if !p.on {
		return
	}
	p.last = time.Time{}
	p.update(s)
	p.con.endProgress()
}

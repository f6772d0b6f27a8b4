package ratelimittest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Handler is the rate-limiting middleware: it decides each request against
// its policies, writes the rate-limit headers of its dialects, and either
// passes the request to the wrapped handler or refuses it. It is safe for
// concurrent use.
type Handler struct {
	next  http.Handler
	cfg   *config
	lim   *limiter
	tl    timeline
	count counters
}

// NewHandler returns middleware that enforces opts in front of next (nil
// next answers 200 with a small JSON body). It reports an invalid option or
// policy as an error.
func NewHandler(next http.Handler, opts ...Option) (*Handler, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	rules := make([]*rule, len(cfg.policies))
	for i, p := range cfg.policies {
		if rules[i], err = compile(p); err != nil {
			return nil, fmt.Errorf("ratelimittest: policy %d: %w", i+1, err)
		}
		rules[i].rounded, rules[i].endResets = cfg.faults.rounded, cfg.faults.endResets
	}
	if err := uniqueNames(rules); err != nil {
		return nil, err
	}
	if next == nil {
		next = http.HandlerFunc(defaultAPI)
	}
	h := &Handler{next: next, cfg: cfg, lim: newLimiter(rules), tl: newTimeline(cfg.clock)}
	h.lim.chargeRefused = cfg.charge
	h.count.logSize = cfg.logSize
	return h, nil
}

// uniqueNames makes the policies' names unique, since clients find IETF
// policies by name: a given name may not repeat, and a made-up name that
// repeats an earlier one gets a suffix ("10-per-1s-2").
func uniqueNames(rules []*rule) error {
	named := map[string]bool{}
	for _, r := range rules {
		if r.named {
			if named[r.name] {
				return fmt.Errorf("ratelimittest: the policy name %q is used twice", r.name)
			}
			named[r.name] = true
		}
	}
	taken := map[string]bool{}
	for _, r := range rules {
		if !r.named {
			base := r.name
			for k := 2; taken[r.name] || named[r.name]; k++ {
				r.name = fmt.Sprintf("%s-%d", base, k)
			}
		}
		taken[r.name] = true
	}
	return nil
}

// defaultAPI is the API behind the limiter when none is given.
func defaultAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "method": r.Method, "path": r.URL.Path})
}

// Stats returns the counters so far.
func (h *Handler) Stats() Stats { return h.count.stats() }

// Admissions returns the log of admitted requests, oldest first (the last
// ones only, if more than the log holds; see WithAdmissionLog).
func (h *Handler) Admissions() []Admission { return h.count.admissions() }

// String says what the handler enforces, for a log line.
func (h *Handler) String() string {
	var b strings.Builder
	for i, r := range h.lim.rules {
		if i > 0 {
			b.WriteString(" and ")
		}
		b.WriteString(r.String())
	}
	if h.cfg.partitioned {
		b.WriteString(", per key")
	} else {
		b.WriteString(", one shared quota")
	}
	dialects := joinNames(h.cfg.dialects)
	if dialects == "" {
		dialects = string(None)
	}
	fmt.Fprintf(&b, "; headers %s; rejections %d with Retry-After %s", dialects, h.cfg.rejectStatus, h.cfg.retryAfter)
	if h.cfg.charge {
		b.WriteString(", charged to the quota")
	}
	f := h.cfg.faults
	var fs []string
	if e := f.serverErrors; e.Every > 0 {
		fs = append(fs, fmt.Sprintf("%d of every %d admitted answered %d", e.Burst, e.Every, e.Status))
	}
	if f.dropEvery > 0 {
		fs = append(fs, fmt.Sprintf("every %d-th admitted connection dropped", f.dropEvery))
	}
	if f.latency > 0 {
		fs = append(fs, fmt.Sprintf("latency %v", f.latency))
	}
	if f.misleading {
		fs = append(fs, "misleading headers (looser policy only)")
	}
	if f.missingEvery > 0 {
		fs = append(fs, fmt.Sprintf("headers missing on every %d-th response", f.missingEvery))
	}
	if f.dateSkew != 0 {
		fs = append(fs, fmt.Sprintf("Date skewed by %v", f.dateSkew))
	}
	if f.fullWindow {
		fs = append(fs, "Retry-After the refusing policy's whole window")
	}
	if f.truncRA {
		fs = append(fs, "Retry-After rounded down")
	}
	if f.coarse {
		fs = append(fs, "resets in whole seconds")
	}
	if f.resetOne {
		fs = append(fs, "every reset 1s")
	}
	if f.floor {
		fs = append(fs, "instant resets rounded down")
	}
	if f.rounded {
		fs = append(fs, "sliding counts rounded")
	}
	if f.endResets {
		fs = append(fs, "a sliding counter resets at its window's end")
	}
	if len(fs) > 0 {
		b.WriteString("; faults: " + strings.Join(fs, ", "))
	}
	return b.String()
}

// Fits reports whether r would be admitted now, and if not how long until
// it would be, if nothing else is admitted first (a negative wait when none
// would: r costs more than a policy can ever admit). It is the question
// ServeHTTP asks, without its effects: nothing is charged, counted or
// logged, no anchored window opens, and the latency fault does not apply,
// so a test oracle or an assertion can ask as often as it likes without
// spending the quota, refused requests included under WithChargeRefused.
// The wait is exact, to the nanosecond, like the algorithms.
func (h *Handler) Fits(r *http.Request) (ok bool, wait time.Duration) {
	key := h.cfg.partition(r)
	var costBuf [4]int64
	costs := costBuf[:]
	if n := len(h.lim.rules); n > len(costBuf) {
		costs = make([]int64, n)
	}
	for i, rl := range h.lim.rules {
		costs[i] = rl.costOf(r)
	}
	ok, w := h.lim.fits(key, h.tl.ns(h.cfg.clock.Now()), costs[:len(h.lim.rules)])
	return ok, time.Duration(w)
}

// ServeHTTP decides r and answers it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := &h.cfg.faults
	if f.latency > 0 {
		if sleep(r.Context(), h.cfg.clock, f.latency) != nil {
			return // the client went away
		}
	}
	key := h.cfg.partition(r)
	var costBuf [4]int64
	var statusBuf [4]policyStatus
	costs, status := costBuf[:], statusBuf[:]
	if n := len(h.lim.rules); n > len(costBuf) {
		costs, status = make([]int64, n), make([]policyStatus, n)
	}
	for i, rl := range h.lim.rules {
		costs[i] = rl.costOf(r)
	}
	d := h.lim.decide(key, h.tl.ns(h.cfg.clock.Now()), costs, status)

	v := view{
		status:      d.status,
		wall:        h.tl.time(d.now).Add(f.dateSkew),
		refused:     !d.admitted,
		wait:        d.wait,
		key:         key,
		partitioned: h.cfg.partitioned,
		fullWindow:  f.fullWindow,
		coarse:      f.coarse,
		resetOne:    f.resetOne,
		floor:       f.floor,
		truncRA:     f.truncRA,
	}
	if f.misleading {
		v.status = mislead(v.status, d.admitted)
	}
	hdr := w.Header()
	hdr.Set("Date", v.wall.UTC().Format(http.TimeFormat))
	n := h.count.responses.Add(1)
	if f.missingEvery == 0 || n%int64(f.missingEvery) != 0 {
		for _, dl := range h.cfg.dialects {
			v.write(hdr, dl)
		}
	}
	kc := h.count.key(key)
	if !d.admitted {
		h.count.rejected.Add(1)
		if kc != nil {
			kc.rejected.Add(1)
		}
		h.reject(w, &v)
		return
	}
	if kc != nil {
		kc.served.Add(1)
	}
	h.count.record(Admission{Time: h.tl.time(d.now), Key: key})
	a := h.count.served.Add(1)
	if f.dropEvery > 0 && a%int64(f.dropEvery) == 0 {
		h.count.dropped.Add(1)
		drop(w)
		return
	}
	if e := f.serverErrors; e.Every > 0 && (a-1)%int64(e.Every) >= int64(e.Every-e.Burst) {
		h.count.failed.Add(1)
		http.Error(w, "injected server error", e.Status)
		return
	}
	h.next.ServeHTTP(w, r)
}

// mislead keeps only what stacked limiters would show: on admission the
// request policy with the most units left, on refusal the refusing ones.
func mislead(st []policyStatus, admitted bool) []policyStatus {
	if admitted {
		best := -1
		for i := range st {
			if st[i].rule.unit == UnitRequests && (best < 0 || st[i].remaining > st[best].remaining) {
				best = i
			}
		}
		if best < 0 {
			return st
		}
		return st[best : best+1]
	}
	out := st[:0:0]
	for _, s := range st {
		if s.refused {
			out = append(out, s)
		}
	}
	return out
}

func (h *Handler) reject(w http.ResponseWriter, v *view) {
	hdr := w.Header()
	if v.wait == never {
		// No wait would help, so this is not "too many requests" and
		// carries no Retry-After.
		hdr.Set("Content-Type", "text/plain; charset=utf-8")
		hdr.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		fmt.Fprintln(w, "Content Too Large: this request costs more than the quota can ever admit")
		return
	}
	if ra := v.retryAfter(h.cfg.retryAfter); ra != "" {
		hdr.Set("Retry-After", ra)
	}
	for _, d := range h.cfg.dialects {
		if d == Discord {
			hdr.Set("Content-Type", "application/json")
			w.WriteHeader(h.cfg.rejectStatus)
			fmt.Fprintf(w, `{"message": "You are being rate limited.", "retry_after": %s, "global": false}`+"\n", v.retryAfterBody())
			return
		}
	}
	hdr.Set("Content-Type", "text/plain; charset=utf-8")
	hdr.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(h.cfg.rejectStatus)
	fmt.Fprintf(w, "Too Many Requests: retry in %v\n", time.Duration(v.wait))
}

// drop closes the connection without a response.
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // HTTP/2, or a writer that cannot hijack
}

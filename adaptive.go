package headway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway/internal/decide"
	"github.com/headway-go/headway/pace"
	"github.com/headway-go/headway/ratelimit"
)

// pacer is the pacing layer: the RoundTripper glue over package pace,
// which decides. For each request it asks the key's state for a lease,
// sleeps on the clock until one is granted (or refuses at once when the
// wait cannot fit), sends, and reports the response (or its absence) back.
type pacer struct {
	next   http.RoundTripper
	c      *config
	store  pace.Store
	mem    *pace.MemoryStore // store, when it is the in-process one on the pacer's clock
	credit bool              // requests may go on credit (credit.go), unless governed
	cfg    pace.Config
	quotas []quotaRoute

	waiters sync.Map                   // key -> *keyWaiters
	last    atomic.Pointer[keyWaiters] // the key's waiters looked up last
	added   atomic.Int64               // keys added, for sweeping waiters
	// lastSweep is when the waiters were last swept (Unix nanoseconds).
	lastSweep atomic.Int64
	sweeper   background
	parser    ratelimit.Parser
	// storeRTT is how long a shared store's reserve took lately (ns, a
	// moving average): reserving ahead is for stores slow enough to
	// need it (shared.go).
	storeRTT atomic.Int64
}

// lease is a request's reservation, from hold to observe.
// It is small, as it goes by value from hold to observe: what only a
// request that asked the key's state needs is in slow.
type lease struct {
	kw    *keyWaiters // key's waiters when the lease was granted; nil: no lease was taken
	route string      // the request's route, as keyWaiters.enter named it
	// fast is the request's number in kw.fast when it went on credit
	// (credit.go), 0 otherwise.
	fast uint64
	w    slot       // on credit, its place in its key's window (learncap.go)
	slow *slowLease // nil on credit
}

// slowLease is the part of a lease granted by the key's state.
type slowLease struct {
	lease pace.Lease
	caps  []int // the in-flight caps it counts under (WithMaxInFlight)
	w     slot  // its place in its key's window (learncap.go)
}

// key returns the lease's key.
func (l *lease) key() string { return l.kw.key }

// paced returns the lease the key's state granted: the zero Lease for a
// request on credit (whose lease, if any, was lent since: see
// lease.lent).
func (l *lease) paced() pace.Lease {
	if l.slow == nil {
		return pace.Lease{}
	}
	return l.slow.lease
}

// caps returns the in-flight caps l counts under.
func (l *lease) caps() []int {
	if l.slow == nil {
		return nil
	}
	return l.slow.caps
}

// slot returns l's place in its key's window (learncap.go).
func (l *lease) slot() slot {
	if l.slow == nil {
		return l.w
	}
	return l.slow.w
}

func newPacer(next http.RoundTripper, c *config) *pacer {
	p := &pacer{next: next, c: c, store: c.store, quotas: c.quotas}
	if p.store == nil {
		p.mem = pace.NewMemoryStore(c.clock.Now)
		p.store = p.mem
	}
	for _, q := range c.quotas {
		p.cfg.Quotas = append(p.cfg.Quotas, q.quota)
	}
	p.credit = p.mem != nil && c.onAttempt == nil && !c.noCredit
	return p
}

// CloseIdleConnections closes the idle connections of the transport below.
func (p *pacer) CloseIdleConnections() { decide.CloseIdle(p.next) }

func (p *pacer) below() http.RoundTripper { return p.next }

// RoundTrip implements http.RoundTripper, for the pacing layer alone
// (WithoutRetries).
func (p *pacer) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	if applied(req.Context(), p.c, paceLayer) {
		// A headway stack above paces this request already.
		return p.next.RoundTrip(req)
	}
	l, waited, err := p.hold(req, p.c.key(req))
	if st := statsFrom(req.Context()); st != nil {
		st.Waited += waited
	}
	if err != nil {
		return refuse(req, err)
	}
	resp, _, err := p.observe(req, l)
	return resp, err
}

// describe returns what the decisions need to know of req, but its route,
// which keyWaiters.enter names.
func (p *pacer) describe(req *http.Request) pace.Request {
	r := pace.Request{Cost: costFrom(req.Context())}
	for i := range p.quotas {
		if p.quotas[i].match(req) {
			r.Quotas = append(r.Quotas, i)
		}
	}
	return r
}

// whyInFlight says why a request waits for room under an in-flight cap.
const whyInFlight = "waiting for requests in flight to finish (WithMaxInFlight)"

// capsOf returns the in-flight caps that govern req, as indices in
// config.caps.
func (p *pacer) capsOf(req *http.Request) []int {
	var caps []int
	for i := range p.c.caps {
		if p.c.caps[i].match(req) {
			caps = append(caps, i)
		}
	}
	return caps
}

// hold waits until req may be sent and returns its lease and how long it
// waited, or refuses it: a *RateLimitError (StatusCode 0) when the wait
// cannot fit in max wait or before the context's deadline, the context's
// error when it ends first.
func (p *pacer) hold(req *http.Request, key string) (lease, time.Duration, error) {
	if p.credit && costFrom(req.Context()) == nil && !p.governed(req) {
		if l, at, since, ok := p.holdFast(req, key); ok {
			if len(p.c.limiters) == 0 {
				return l, 0, nil
			}
			clk, start := p.c.clock, at.Add(since)
			if err := p.limit(req, key, start); err != nil {
				p.cancel(l)
				return lease{}, clk.Now().Sub(start), err
			}
			return l, clk.Now().Sub(start), nil
		}
	}
	return p.holdSlow(req, key, p.describe(req), p.capsOf(req))
}

// governed reports whether a quota the caller declared (WithQuota) or an
// in-flight cap (WithMaxInFlight) governs req: it then goes on no credit.
func (p *pacer) governed(req *http.Request) bool {
	for i := range p.quotas {
		if p.quotas[i].match(req) {
			return true
		}
	}
	for i := range p.c.caps {
		if p.c.caps[i].match(req) {
			return true
		}
	}
	return false
}

// holdSlow is hold for a request that does not go on credit: it asks the
// key's state, in the key's line.
func (p *pacer) holdSlow(req *http.Request, key string, preq pace.Request, caps []int) (lease, time.Duration, error) {
	ctx := req.Context()
	clk := p.c.clock
	start := clk.Now()
	p.sweepWaitersDue(start)
	t := ticket{prio: priorityFrom(ctx), since: start, deadline: start.Add(p.c.maxWait)}
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline && dl.Before(t.deadline) {
		t.deadline = dl
	}
	preq.Deadline = t.deadline // no unit held back to learn past it
	var kw *keyWaiters
	for {
		kw = p.keyWaiters(key)
		var ok bool
		if t, ok = kw.enter(req.Method, req.URL.Path, &preq, caps, t); ok {
			break
		}
	}
	defer func() {
		if left := kw.leave(t, clk, p.c.aging); len(left) > 0 {
			p.givePoolBack(key, left)
		}
	}()
	shared := p.shared()
	inLine := func() error {
		select {
		case <-t.wait():
			if w := t.w; w.refused {
				// The line's pace cannot let it go before its deadline.
				e := &RateLimitError{
					Method: req.Method, URL: decide.Redact(req.URL),
					Reason: ReasonWaitTooLong, Bound: p.c.maxWait,
					Wait: w.start.Sub(start), Why: "in the line to " + key + ", behind requests held by: " + why(w.why),
				}
				if hasDeadline && !dl.After(start.Add(p.c.maxWait)) {
					e.Reason, e.Bound = ReasonDeadline, max(dl.Sub(start), 0)
				}
				return e
			}
			return nil
		case <-ctx.Done():
			return canceled(req, 0, "waiting for the earlier requests to "+key, ctx)
		}
	}
	now := start // the turn came at once: no time to account for
	if t.w != nil {
		if err := inLine(); err != nil {
			return lease{}, clk.Now().Sub(start), err
		}
		now = clk.Now()
	}
	var reported pace.Why
	for first := true; ; first = false {
		version := kw.version()
		if !first {
			now = clk.Now()
			// A request of a higher priority may have come meanwhile.
			var yielded bool
			if t, yielded = kw.yield(t, clk, now, p.c.aging); yielded {
				if err := inLine(); err != nil {
					return lease{}, clk.Now().Sub(start), err
				}
				now = clk.Now()
				version = kw.version()
			}
		}
		room := kw.acquire(caps, p.c.caps)
		held := whyInFlight
		// A cap of the caller's says how many the server takes at once:
		// only the others learn it. A place in the window is taken once
		// the request is granted (enterWindow): a request told to wait
		// holds none meanwhile.
		if room && len(caps) == 0 && !kw.windowRoom() {
			kw.release(caps, false)
			room, held = false, whyLearntCap
		}
		if !room {
			// As many requests as a cap allows are in flight: wait for one
			// to finish, within max wait.
			left := p.c.maxWait - now.Sub(start)
			if left <= 0 {
				return lease{}, now.Sub(start), &RateLimitError{
					Method: req.Method, URL: decide.Redact(req.URL),
					Reason: ReasonWaitTooLong, Bound: p.c.maxWait, Wait: now.Sub(start), Why: held,
				}
			}
			stalled := held == whyLearntCap && left > windowStall
			if stalled {
				left = windowStall
			}
			if err := sleepUntilChanged(ctx, clk, left, kw.changedSince(version)); err != nil {
				return lease{}, clk.Now().Sub(start), canceled(req, 0, held, ctx)
			}
			if stalled {
				kw.stallWindow(version) // no answer came: the window grows
			}
			continue
		}
		var d pace.Decision
		var err error
		if shared {
			l, ok, stale := kw.takePooled(t, &preq, now, p.poolAge())
			p.givePoolBack(key, stale)
			if ok {
				// Reserved ahead for it by a request before it.
				return lease{kw: kw, route: preq.Route, slow: &slowLease{lease: l, caps: caps, w: kw.enterWindow(len(caps) == 0)}}, now.Sub(start), nil
			}
			var extra []pace.Lease
			n := 0
			if p.slowStore() {
				n = kw.ahead(t, &preq, caps, len(p.c.limiters) > 0)
			}
			if d, extra, err = p.reserveAhead(ctx, key, now, preq, n); err == nil && len(extra) > 0 {
				kw.pool(t, preq.Route, extra, clk.Now())
			}
		} else {
			d, err = p.reserve(ctx, kw, key, now, preq)
		}
		if err != nil {
			kw.release(caps, false)
			if ctx.Err() != nil {
				return lease{}, now.Sub(start), canceled(req, 0, "reading the pacing state of "+key, ctx)
			}
			// The store could not be read or written (a shared store that
			// fails closed): the request is not sent unpaced.
			return lease{}, now.Sub(start), fmt.Errorf("headway: pacing state of %s: %w", key, err)
		}
		if d.OK {
			l := lease{kw: kw, route: preq.Route, slow: &slowLease{lease: d.Lease, caps: caps, w: kw.enterWindow(len(caps) == 0)}}
			if len(p.c.limiters) == 0 {
				return l, now.Sub(start), nil
			}
			if err := p.limit(req, key, now); err != nil {
				p.cancel(l)
				return lease{}, clk.Now().Sub(start), err
			}
			return l, clk.Now().Sub(start), nil
		}
		kw.release(caps, false)
		wait := max(d.At.Sub(now), 0)
		if d.Pace.Limit > 0 {
			kw.project(t.q, d, now)
		}
		if d.Definite {
			if err := p.fits(req, key, now, wait, d); err != nil {
				return lease{}, now.Sub(start), err
			}
		}
		if d.Why != reported {
			reported = d.Why
			p.waiting(req, key, wait, d)
		}
		if p.mem == nil {
			// Another process, or another transport on the same store,
			// changes the key's state without this process hearing of
			// it: look again soon.
			wait = min(wait, sharedPoll(wait))
		}
		if err := sleepUntilChanged(ctx, clk, wait, kw.changedSince(version)); err != nil {
			left := max(now.Add(wait).Sub(clk.Now()), 0)
			return lease{}, clk.Now().Sub(start), canceled(req, left, why(d), ctx)
		}
	}
}

// sharedPoll is how long a request waiting for wait sleeps before it reads
// a shared store again: often enough that a window another process saw
// open, or an answer it was waiting for that another process received, is
// not missed by more than a few milliseconds, and rarely enough for long
// waits (a pause of an hour) that thousands of waiters do not load the
// store: a sixteenth of the wait, between 10 ms and 1 s.
func sharedPoll(wait time.Duration) time.Duration {
	return min(max(wait/16, 10*time.Millisecond), time.Second)
}

// reserve asks key's state for a lease at now. On the in-process store the
// decision is made under the key's lock without a closure that escapes, so
// that it costs no allocation.
func (p *pacer) reserve(ctx context.Context, kw *keyWaiters, key string, now time.Time, preq pace.Request) (pace.Decision, error) {
	if p.mem != nil {
		return reserveAt(p.mem, kw, key, now, preq, &p.cfg)
	}
	if m, ok := p.store.(*pace.MemoryStore); ok {
		return reserveIn(m, ctx, key, now, preq, &p.cfg)
	}
	var d pace.Decision
	err := pace.Apply(ctx, p.store, key, func(s *pace.State) error {
		d = s.Reserve(now, preq, &p.cfg)
		return nil
	})
	return d, err
}

// reserveAt is reserveIn on the pacer's own store, whose clock is the
// pacer's: now is what it says. The requests kw sent on credit are booked
// first, and its credit counted again after (credit.go).
func reserveAt(m *pace.MemoryStore, kw *keyWaiters, key string, now time.Time, preq pace.Request, cfg *pace.Config) (d pace.Decision, err error) {
	err = m.UpdateInPlaceAt(now, key, func(s *pace.State) error {
		kw.fast.update(s, now, time.Time{}, cfg, "", "", false, func() { d = s.Reserve(now, preq, cfg) })
		return nil
	})
	return d, err
}

func reserveIn(m *pace.MemoryStore, ctx context.Context, key string, now time.Time, preq pace.Request, cfg *pace.Config) (d pace.Decision, err error) {
	err = m.UpdateInPlace(ctx, key, func(s *pace.State) error {
		d = s.Reserve(now, preq, cfg)
		return nil
	})
	return d, err
}

// fits refuses a definite wait longer than max wait, or past the context's
// deadline.
func (p *pacer) fits(req *http.Request, key string, now time.Time, wait time.Duration, d pace.Decision) error {
	refuse := func(reason Reason, bound time.Duration) error {
		e := &RateLimitError{
			Method: req.Method, URL: decide.Redact(req.URL),
			Reason: reason, Bound: bound, Wait: wait, Why: why(d),
		}
		if d.Why == pace.WhyPaused {
			e.RetryAfter, e.HasRetryAfter = wait, true
		}
		return e
	}
	if wait > p.c.maxWait {
		return refuse(ReasonWaitTooLong, p.c.maxWait)
	}
	if dl, ok := req.Context().Deadline(); ok && !now.Add(wait).Before(dl) {
		return refuse(ReasonDeadline, max(dl.Sub(now), 0))
	}
	return nil
}

// canceled is the error of a request whose context ended while the pacing
// layer held it back: a *RateLimitError with ReasonCanceled that wraps the
// context's error (its cause, when it has one), saying what it waited for
// and how long it still had to wait (0 when unknown).
func canceled(req *http.Request, left time.Duration, why string, ctx context.Context) error {
	err := context.Cause(ctx)
	if err == nil {
		err = ctx.Err()
	}
	return &RateLimitError{
		Method: req.Method, URL: decide.Redact(req.URL),
		Reason: ReasonCanceled, Err: err, Wait: left, Why: why,
	}
}

// why describes a decision to wait in a few words.
func why(d pace.Decision) string {
	if d.Detail == "" {
		return d.Why.String()
	}
	return d.Why.String() + ": " + d.Detail
}

// waiting reports a wait to the hook and the logger.
func (p *pacer) waiting(req *http.Request, key string, wait time.Duration, d pace.Decision) {
	p.report(req, key, wait, d.Definite, why(d))
}

// report reports a wait of req for reason to the hook and the logger.
func (p *pacer) report(req *http.Request, key string, wait time.Duration, definite bool, reason string) {
	ev := WaitEvent{Request: req, Key: key, Wait: wait, Definite: definite, Reason: reason}
	if p.c.onWait != nil {
		p.c.onWait(ev)
	}
	if p.c.logger.Enabled(req.Context(), slog.LevelDebug) {
		p.c.logger.LogAttrs(req.Context(), slog.LevelDebug, "headway: waiting",
			slog.String("method", req.Method), slog.String("url", decide.Redact(req.URL)),
			slog.String("key", key), slog.Duration("wait", wait), slog.String("reason", ev.Reason))
	}
}

// sleepUntilChanged waits for d on clk, or until changed is closed (the
// key's state changed in this process), or until ctx is done.
func sleepUntilChanged(ctx context.Context, clk Clock, d time.Duration, changed <-chan struct{}) error {
	if d <= 0 {
		return ctx.Err()
	}
	sleep, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-changed:
			cancel()
		case <-sleep.Done():
		}
	}()
	clk.Sleep(sleep, d)
	return ctx.Err()
}

// observe sends req under its lease and returns the response with what its
// headers said, after reporting both to the key's state.
func (p *pacer) observe(req *http.Request, l lease) (*http.Response, ratelimit.Observation, error) {
	resp, err := roundTrip(p.next, req)
	if l.fast != 0 && err == nil && resp.StatusCode < 400 && l.kw.fast.answered(l.fast, p.c.clock) {
		// Sent on credit and admitted: booked later, its headers unread
		// (credit.go). Anything else goes through the lease lent to it.
		if l.w.n > 0 {
			// It held a place in the key's window: an admission.
			l.kw.windowAnswer(l.w, resp.StatusCode, false, false)
			l.kw.finish(nil)
		}
		return resp, ratelimit.Observation{}, nil
	}
	now := p.c.clock.Now()
	var a pace.Answer
	if err == nil {
		a = p.answer(resp, now)
	}
	p.complete(l, req, now, a)
	if err != nil {
		return nil, ratelimit.Observation{}, err
	}
	return resp, a.Obs, nil
}

// answer reads what resp, received at now, says.
func (p *pacer) answer(resp *http.Response, now time.Time) pace.Answer {
	a := pace.Answer{Obs: parse(&p.parser, resp, now)}
	if v := resp.Header.Get("Date"); v != "" {
		a.Date, _ = p.parser.ParseDate(v)
	}
	return a
}

// complete reports the answer to a lease (a zero Answer: none came).
func (p *pacer) complete(l lease, req *http.Request, now time.Time, a pace.Answer) {
	if l.kw == nil {
		return
	}
	kw := l.kw
	if kw.dead.Load() {
		kw = p.keyWaiters(l.key())
	} else if !kw.used.Load() {
		kw.used.Store(true)
	}
	if l.kw.windowAnswer(l.slot(), a.Obs.Status, len(a.Obs.Policies) > 0, a.Obs.HasRetryAfter) {
		// A cap on requests in flight refused it (learncap.go): the
		// state, which models rates, hears of no answer.
		a = pace.Answer{}
	}
	// The bucket the answer counted l's route in ("" when it named none),
	// and the route whose credit to count (none when no answer came); an
	// answer that named no bucket (no headers) places a route only the
	// first time, as the state does (a proxy's 502 does not move it).
	bucket, route, moved := "", "", false
	if a.Obs.Status != 0 {
		route = l.route
	}
	if len(a.Obs.Policies) > 0 {
		bucket, moved = pace.BucketOf(&a.Obs.Policies[0]), true
		if route != "" {
			kw.learnRoute(route, bucket)
		}
	}
	var err error
	if p.mem != nil {
		err = completeAt(p.mem, kw, l, now, a, route, bucket, moved, &p.cfg)
	} else if m, ok := p.store.(*pace.MemoryStore); ok {
		// The in-process store does not block, and reads no context.
		err = completeIn(m, l, now, a, &p.cfg)
	} else {
		err = p.completeShared(l, now, a)
	}
	if err != nil {
		// The lease expires by itself (pace.Config.LeaseTTL).
		p.c.logger.LogAttrs(context.Background(), slog.LevelWarn, "headway: pacing state not updated",
			slog.String("key", l.key()), slog.String("error", err.Error()))
	}
	// Which wakes kw's waiters when l.kw is kw (the lease kept it from
	// being swept when it counted in flight).
	l.kw.finish(l.caps())
	if kw != l.kw {
		kw.signal()
	}
}

// completeAt is completeIn on the pacer's own store, whose clock is the
// pacer's: now is what it says. As in reserveAt, kw's requests sent on
// credit are booked first (l may be one of them), and its credit counted
// again after, bucket's for route (when not empty) included.
func completeAt(m *pace.MemoryStore, kw *keyWaiters, l lease, now time.Time, a pace.Answer, route, bucket string, moved bool, cfg *pace.Config) error {
	return m.UpdateInPlaceAt(now, l.key(), func(s *pace.State) error {
		upTo := l.paced().At()
		if l.fast != 0 {
			upTo = time.Time{} // all: its own lease is lent then
		}
		kw.fast.update(s, now, upTo, cfg, route, bucket, moved, func() {
			pl, ok := l.paced(), true
			if l.fast != 0 {
				pl, ok = kw.fast.lentFor(l.fast)
			}
			if ok {
				s.Complete(now, pl, a, cfg)
			}
		})
		return nil
	})
}

func completeIn(m *pace.MemoryStore, l lease, now time.Time, a pace.Answer, cfg *pace.Config) error {
	return m.UpdateInPlace(context.Background(), l.key(), func(s *pace.State) error {
		s.Complete(now, l.paced(), a, cfg)
		return nil
	})
}

// completeShared reports the answer to a store that may block (a shared
// one): the request's own context may be done, and the report must still
// land.
func (p *pacer) completeShared(l lease, now time.Time, a pace.Answer) error {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	return pace.Apply(ctx, p.store, l.key(), func(s *pace.State) error {
		s.Complete(now, l.paced(), a, &p.cfg)
		return nil
	})
}

// cancel takes back a lease whose request never left.
func (p *pacer) cancel(l lease) {
	if l.kw == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	pace.Apply(ctx, p.store, l.key(), func(s *pace.State) error {
		if l.fast == 0 {
			s.Cancel(l.paced(), &p.cfg)
		} else if pl, ok := l.lent(s, p.c.clock.Now(), &p.cfg); ok {
			s.Cancel(pl, &p.cfg)
		}
		return nil
	})
	l.kw.windowAnswer(l.slot(), 0, false, false)
	l.kw.finish(l.caps())
	if kw := p.keyWaiters(l.key()); kw != l.kw {
		kw.signal()
	}
}

// storeTimeout bounds a report to the store made outside any request's
// context.
const storeTimeout = 5 * time.Second

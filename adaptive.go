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
	cfg    pace.Config
	quotas []quotaRoute

	waiters sync.Map     // key -> *keyWaiters
	added   atomic.Int64 // keys added, for sweeping waiters
}

// lease is a request's reservation, from hold to observe.
type lease struct {
	key   string
	lease pace.Lease
	ok    bool // a lease was taken (false: the store failed open)
}

func newPacer(next http.RoundTripper, c *config) *pacer {
	p := &pacer{next: next, c: c, store: c.store, quotas: c.quotas}
	if p.store == nil {
		p.store = pace.NewMemoryStore(c.clock.Now)
	}
	for _, q := range c.quotas {
		p.cfg.Quotas = append(p.cfg.Quotas, q.quota)
	}
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
	l, waited, err := p.hold(req)
	if st := statsFrom(req.Context()); st != nil {
		st.Waited += waited
	}
	if err != nil {
		return refuse(req, err)
	}
	resp, _, err := p.observe(req, l)
	return resp, err
}

// describe returns what the decisions need to know of req.
func (p *pacer) describe(req *http.Request) pace.Request {
	r := pace.Request{Route: req.Method + " " + req.URL.Path, Cost: costFrom(req.Context())}
	for i := range p.quotas {
		if p.quotas[i].matches(req) {
			r.Quotas = append(r.Quotas, i)
		}
	}
	return r
}

// hold waits until req may be sent and returns its lease and how long it
// waited, or refuses it: a *RateLimitError (StatusCode 0) when the wait
// cannot fit in max wait or before the context's deadline, the context's
// error when it ends first.
func (p *pacer) hold(req *http.Request) (lease, time.Duration, error) {
	ctx := req.Context()
	key := p.c.key(req)
	preq := p.describe(req)
	clk := p.c.clock
	start := clk.Now()
	var kw *keyWaiters
	var turn <-chan struct{}
	var leave func()
	for {
		kw = p.keyWaiters(key)
		if turn, leave = kw.enqueue(kw.queueOf(preq)); turn != nil {
			break
		}
	}
	defer leave()
	select {
	case <-turn:
	case <-ctx.Done():
		return lease{}, clk.Now().Sub(start), fmt.Errorf("headway: waiting for earlier requests to %s: %w", key, ctx.Err())
	}
	var reported pace.Why
	for {
		changed := kw.changes()
		now := clk.Now()
		var d pace.Decision
		err := pace.Apply(ctx, p.store, key, func(s *pace.State) error {
			d = s.Reserve(now, preq, &p.cfg)
			return nil
		})
		if err != nil {
			if ctx.Err() != nil {
				return lease{}, now.Sub(start), ctx.Err()
			}
			// The store could not be read or written (a shared store that
			// fails closed): the request is not sent unpaced.
			return lease{}, now.Sub(start), fmt.Errorf("headway: pacing state of %s: %w", key, err)
		}
		if d.OK {
			return lease{key: key, lease: d.Lease, ok: true}, now.Sub(start), nil
		}
		wait := max(d.At.Sub(now), 0)
		if d.Definite {
			if err := p.fits(req, key, now, wait, d); err != nil {
				return lease{}, now.Sub(start), err
			}
		}
		if d.Why != reported {
			reported = d.Why
			p.waiting(req, key, wait, d)
		}
		if err := sleepUntilChanged(ctx, clk, wait, changed); err != nil {
			return lease{}, clk.Now().Sub(start), fmt.Errorf("headway: %s for %s: %w", d.Why, key, err)
		}
	}
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

// why describes a decision to wait in a few words.
func why(d pace.Decision) string {
	if d.Detail == "" {
		return d.Why.String()
	}
	return d.Why.String() + ": " + d.Detail
}

// waiting reports a wait to the hook and the logger.
func (p *pacer) waiting(req *http.Request, key string, wait time.Duration, d pace.Decision) {
	ev := WaitEvent{Request: req, Key: key, Wait: wait, Bounded: !d.Definite, Reason: why(d)}
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
	now := p.c.clock.Now()
	var a pace.Answer
	if err == nil {
		a.Obs = parse(resp, now)
		if v := resp.Header.Get("Date"); v != "" {
			a.Date, _ = ratelimit.ParseDate(v)
		}
	}
	p.complete(l, req, now, a)
	if err != nil {
		return nil, ratelimit.Observation{}, err
	}
	return resp, a.Obs, nil
}

// complete reports the answer to a lease (a zero Answer: none came).
func (p *pacer) complete(l lease, req *http.Request, now time.Time, a pace.Answer) {
	if !l.ok {
		return
	}
	kw := p.keyWaiters(l.key)
	if len(a.Obs.Policies) > 0 {
		kw.learnRoute(l.lease.Route, pace.BucketOf(&a.Obs.Policies[0]))
	}
	// The request's own context may be done: the report must still land.
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := pace.Apply(ctx, p.store, l.key, func(s *pace.State) error {
		s.Complete(now, l.lease, a, &p.cfg)
		return nil
	}); err != nil {
		// The lease expires by itself (pace.Config.LeaseTTL).
		p.c.logger.LogAttrs(ctx, slog.LevelWarn, "headway: pacing state not updated",
			slog.String("key", l.key), slog.String("error", err.Error()))
	}
	kw.signal()
}

// cancel takes back a lease whose request never left.
func (p *pacer) cancel(l lease) {
	if !l.ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	pace.Apply(ctx, p.store, l.key, func(s *pace.State) error {
		s.Cancel(l.lease, &p.cfg)
		return nil
	})
	p.keyWaiters(l.key).signal()
}

// storeTimeout bounds a report to the store made outside any request's
// context.
const storeTimeout = 5 * time.Second

// keyWaiters are the requests of one key waiting in this process: a queue
// per kind of request, so that requests wait in order and only the first
// of each queue asks the state, and a channel closed whenever the key's
// state changes here.
type keyWaiters struct {
	mu      sync.Mutex
	changed chan struct{}
	queues  map[string][]chan struct{}
	routes  map[string]string // route -> the server-named bucket it was last counted in
	waiting int
	used    atomic.Bool // since the last sweep
	dead    bool        // swept: join the key's new waiters instead
}

// maxRoutes bounds keyWaiters.routes.
const maxRoutes = 256

// keyWaiters returns key's waiters, creating them.
func (p *pacer) keyWaiters(key string) *keyWaiters {
	if v, ok := p.waiters.Load(key); ok {
		kw := v.(*keyWaiters)
		kw.used.Store(true)
		return kw
	}
	v, loaded := p.waiters.LoadOrStore(key, &keyWaiters{changed: make(chan struct{})})
	if !loaded {
		p.sweepWaiters()
	}
	kw := v.(*keyWaiters)
	kw.used.Store(true)
	return kw
}

// sweepWaiters forgets, every sweepEvery new keys, the keys nobody waited
// on since the previous sweep.
func (p *pacer) sweepWaiters() {
	if p.added.Add(1)%sweepEvery != 0 {
		return
	}
	p.waiters.Range(func(k, v any) bool {
		kw := v.(*keyWaiters)
		if kw.used.Swap(false) {
			return true
		}
		kw.mu.Lock()
		if kw.waiting == 0 {
			kw.dead = true
			p.waiters.Delete(k)
		}
		kw.mu.Unlock()
		return true
	})
}

// changes returns the channel that the next change of the key closes.
func (kw *keyWaiters) changes() <-chan struct{} {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	return kw.changed
}

// signal wakes the waiters: the key's state changed.
func (kw *keyWaiters) signal() {
	kw.mu.Lock()
	close(kw.changed)
	kw.changed = make(chan struct{})
	kw.mu.Unlock()
}

// enqueue joins queue q. turn is closed when it is the caller's turn; leave
// must be called once the caller is done asking (granted or gone). turn is
// nil when kw was swept meanwhile: the caller must fetch the key's waiters
// again.
func (kw *keyWaiters) enqueue(q string) (turn <-chan struct{}, leave func()) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	if kw.dead {
		return nil, nil
	}
	me := make(chan struct{})
	if kw.queues == nil {
		kw.queues = map[string][]chan struct{}{}
	}
	kw.queues[q] = append(kw.queues[q], me)
	kw.waiting++
	if len(kw.queues[q]) == 1 {
		close(me)
	}
	return me, func() { kw.leave(q, me) }
}

// leave removes me from queue q, passing the turn on if it had it.
func (kw *keyWaiters) leave(q string, me chan struct{}) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	kw.waiting--
	line := kw.queues[q]
	for i, c := range line {
		if c != me {
			continue
		}
		line = append(line[:i], line[i+1:]...)
		if i == 0 && len(line) > 0 {
			close(line[0])
		}
		break
	}
	if len(line) == 0 {
		delete(kw.queues, q)
	} else {
		kw.queues[q] = line
	}
}

// queueOf names the queue a request waits in: requests counted in the same
// server-named bucket and governed by the same declared quotas wait in line
// together, so that a spent bucket holds back only its own requests.
func (kw *keyWaiters) queueOf(r pace.Request) string {
	kw.mu.Lock()
	b := kw.routes[r.Route]
	kw.mu.Unlock()
	if len(r.Quotas) == 0 {
		return b
	}
	return fmt.Sprint(b, r.Quotas)
}

// learnRoute remembers the bucket a route was counted in.
func (kw *keyWaiters) learnRoute(route, bucket string) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	if kw.routes[route] == bucket {
		return
	}
	if kw.routes == nil {
		kw.routes = map[string]string{}
	}
	if len(kw.routes) >= maxRoutes {
		clear(kw.routes)
	}
	kw.routes[route] = bucket
}

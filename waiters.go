package headway

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway/pace"
)

// keyWaiters are the requests of one key waiting in this process: a line
// per kind of request, so that requests wait in order and only the one
// whose turn it is asks the state; the requests in flight per in-flight
// cap (WithMaxInFlight); and a count of the key's changes here, with a
// channel closed at the next one for those who sleep on it.
type keyWaiters struct {
	mu      sync.Mutex
	changes atomic.Uint64 // the key's state changed this many times here
	changed chan struct{} // closed at the next change; nil while no one waits for it
	main    waitLine      // the line named "", most requests'
	lines   map[string]*waitLine
	routes  map[string]string // route -> the server-named bucket it was last counted in
	names   map[string]string // "METHOD /path" -> the same, interned
	waiting int               // requests in a line, their turn come or not
	queued  atomic.Int32      // waiting, read without mu (holdFast)
	flight  []int             // requests in flight under each in-flight cap (index as config.caps)
	flying  int               // their sum: a key with requests in flight is not swept
	used    atomic.Bool       // since the last sweep
	dead    atomic.Bool       // swept: join the key's new waiters instead (set under mu)
	key     string            // the key, for pacer.last
	fast    fastBook          // the key's credit, and the requests sent on it (credit.go)
	// The window on requests in flight of a key that names no quota
	// (learncap.go): nil until its first grant, and once noWindow.
	lc       *learntCap
	noWindow bool
	// windowed reports lc != nil (set under mu, read without it): a
	// request on credit takes its place in the window too (holdFast).
	windowed atomic.Bool
}

// A waitLine is one line: whether a request has its turn (and its
// priority), and those waiting for it, by priority, each priority in the
// order they came.
type waitLine struct {
	busy   bool
	holder int     // the priority of the request whose turn it is
	levels []level // highest priority first; none is empty
	n      int     // waiters in levels that have not left

	// What the request whose turn it is was last told (a definite wait
	// until paceAt, under a quota of pace): the line projects from it when
	// those behind may go at the earliest, and refuses at once those whose
	// deadline comes first (see project).
	pace    pace.Pace
	paceAt  time.Time
	paceWhy pace.Decision // its Why and Detail
	swept   time.Time     // when the line was last checked against pace
	// sweptDefinite says that check projected from a definite wait.
	sweptDefinite bool
	sweptAt       time.Time // the start that check projected from
	// pool holds leases reserved ahead for the requests in the line
	// (shared.go).
	pool []pooled
}

// level is the waiters of one priority, in the order they came. Those
// that left before their turn stay, marked gone, until they reach the
// front.
type level struct {
	prio int
	q    ring[*waiter]
	live int // those in q that have not left
}

// A waiter is a request waiting for its turn in a line.
type waiter struct {
	ch       chan struct{} // closed when its turn comes, or it is refused
	prio     int
	since    time.Time // when it joined the line, for aging
	deadline time.Time // the earliest of its context's deadline and its max wait (zero: none)
	route    string    // its request's route, for leases reserved ahead (shared.go)
	gone     bool      // left before its turn, or refused
	granted  bool      // its turn came
	// refused says that it cannot be sent before its deadline: it may go
	// at start at the earliest, for the reason why.
	refused bool
	start   time.Time
	why     pace.Decision // its Why and Detail
}

// A ticket is a request's place in a line: w is nil when the turn was the
// request's at once.
type ticket struct {
	q        string
	prio     int
	since    time.Time
	deadline time.Time // see waiter.deadline
	route    string
	w        *waiter
}

// wait returns the channel closed when t's turn comes (nil: it has it).
func (t ticket) wait() <-chan struct{} {
	if t.w == nil {
		return nil
	}
	return t.w.ch
}

// maxRoutes bounds keyWaiters.routes.
const maxRoutes = 256

// keyWaiters returns key's waiters, creating them. The key used last is
// found without the map: most clients call one API.
func (p *pacer) keyWaiters(key string) *keyWaiters {
	if kw := p.last.Load(); kw != nil && kw.key == key && !kw.dead.Load() {
		if !kw.used.Load() {
			kw.used.Store(true) // (a load only, most of the time: no write to share)
		}
		return kw
	}
	v, ok := p.waiters.Load(key)
	if !ok {
		var loaded bool
		if v, loaded = p.waiters.LoadOrStore(key, &keyWaiters{key: key}); !loaded {
			p.sweepWaiters()
		}
	}
	kw := v.(*keyWaiters)
	if !kw.used.Load() {
		kw.used.Store(true)
	}
	p.last.Store(kw)
	return kw
}

// sweepWaiters forgets, every sweepEvery new keys, the keys nobody waited
// on since the previous sweep.
func (p *pacer) sweepWaiters() {
	if p.added.Add(1)%sweepEvery != 0 {
		return
	}
	p.sweepWaitersNow()
}

// sweepWaitersDue sweeps the waiters when a sweepInterval has passed since
// the last sweep, new keys or not, so that an idle client's keys go too.
// It costs one atomic load when none is due.
func (p *pacer) sweepWaitersDue(now time.Time) {
	last := p.lastSweep.Load()
	t := now.UnixNano()
	switch {
	case last == 0:
		p.lastSweep.CompareAndSwap(0, t)
	case t-last >= int64(sweepInterval) && p.lastSweep.CompareAndSwap(last, t):
		p.sweepWaitersNow()
	}
}

// sweepInterval is the most time between two sweeps of the waiters while
// requests come.
const sweepInterval = time.Minute

// sweepWaitersNow forgets, in the background, the keys nobody waited on
// since the previous sweep.
func (p *pacer) sweepWaitersNow() {
	p.sweeper.run(func() {
		p.waiters.Range(func(k, v any) bool {
			kw := v.(*keyWaiters)
			if kw.used.Swap(false) {
				return true
			}
			if p.mem != nil && kw.fast.pending() {
				// Requests sent on credit that no update has booked:
				// the key's state hears of them now, and its waiters
				// may go.
				now := p.c.clock.Now()
				p.mem.UpdateInPlaceAt(now, k.(string), func(s *pace.State) error {
					kw.fast.update(s, now, time.Time{}, &p.cfg, "", "", false, func() {})
					return nil
				})
			}
			kw.mu.Lock()
			kw.fast.mu.Lock() // take (credit.go) reads dead under it
			if kw.waiting == 0 && kw.flying == 0 && kw.fast.idle() {
				kw.dead.Store(true)
				p.waiters.Delete(k)
			}
			kw.fast.mu.Unlock()
			kw.mu.Unlock()
			return true
		})
	})
}

// version returns the number of the key's changes so far, for
// changedSince.
func (kw *keyWaiters) version() uint64 { return kw.changes.Load() }

// closedChan is a channel that is closed.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// changedSince returns a channel closed once the key has changed after
// version v (at once if it already has).
func (kw *keyWaiters) changedSince(v uint64) <-chan struct{} {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	if kw.changes.Load() != v {
		return closedChan
	}
	if kw.changed == nil {
		kw.changed = make(chan struct{})
	}
	return kw.changed
}

// signal wakes the waiters: the key's state changed.
func (kw *keyWaiters) signal() {
	kw.mu.Lock()
	kw.wake()
	kw.mu.Unlock()
}

// wake is signal with kw.mu held.
func (kw *keyWaiters) wake() {
	kw.changes.Add(1)
	if kw.changed != nil {
		close(kw.changed)
		kw.changed = nil
	}
}

// maxNames bounds keyWaiters.names.
const maxNames = 256

// enter names r's route (method+" "+path, the same string for the same
// route while it is remembered, so that a route seen before costs no
// allocation) and joins, with t's priority, arrival and deadline, the line
// of requests like r, returning the caller's ticket: its wait is closed when it is the
// caller's turn, or nil if the turn is the caller's at once. leave must be
// called with it once the caller is done asking (granted or gone). ok is
// false when kw was swept meanwhile: the caller must fetch the key's
// waiters again.
func (kw *keyWaiters) enter(method, path string, r *pace.Request, caps []int, t ticket) (ticket, bool) {
	var buf [128]byte
	name := routeName(&buf, method, path)
	kw.mu.Lock()
	defer kw.mu.Unlock()
	if kw.dead.Load() {
		return ticket{}, false
	}
	route, known := kw.names[string(name)]
	if !known {
		route = string(name)
		if kw.names == nil {
			kw.names = map[string]string{}
		}
		if len(kw.names) >= maxNames {
			clear(kw.names)
		}
		kw.names[route] = route
	}
	r.Route = route
	kw.waiting++
	kw.queued.Add(1)
	t.q, t.route = kw.lineName(r, caps), route
	return kw.enqueue(t, false), true
}

// routeName writes a request's route, "METHOD /path", in buf (when it
// fits: no allocation) and returns it.
func routeName(buf *[128]byte, method, path string) []byte {
	return append(append(append(buf[:0], method...), ' '), path...)
}

// line returns line q, nil when there is none; kw.mu is held.
func (kw *keyWaiters) line(q string) *waitLine {
	if q == "" {
		return &kw.main
	}
	return kw.lines[q]
}

// lineOf returns line q, creating it; kw.mu is held.
func (kw *keyWaiters) lineOf(q string) *waitLine {
	wl := kw.line(q)
	if wl == nil {
		if kw.lines == nil {
			kw.lines = map[string]*waitLine{}
		}
		wl = &waitLine{}
		kw.lines[q] = wl
	}
	return wl
}

// enqueue puts t in its line, at the back of its priority or, when front
// (a request that gives its turn up), at the front; kw.mu is held. A
// request of a higher priority than the one whose turn it is wakes it, so
// that it gives its turn up (yield) rather than keep it through a wait.
func (kw *keyWaiters) enqueue(t ticket, front bool) ticket {
	wl := kw.lineOf(t.q)
	if !wl.busy {
		wl.busy, wl.holder = true, t.prio
		t.w = nil
		return t
	}
	t.w = &waiter{ch: make(chan struct{}), prio: t.prio, since: t.since, deadline: t.deadline, route: t.route}
	lv := wl.add(t.w, front)
	if !front {
		// At the back of its priority: lv.live-1 of its priority go
		// before it, after the one whose turn it is.
		wl.check(lv, t.w, int64(lv.live))
	}
	if t.prio > wl.holder && !t.w.refused {
		kw.wake()
	}
	return t
}

// resweepShift: a definite start that moves 1/resweepShift of a window or
// more later than the last check projected from checks the line again (a
// check reads the whole line; at half a window, at most two more a window).
const resweepShift = 2

// check refuses w, the nth request of its priority after the one whose
// turn it is, if the line's pace cannot let it go before its deadline.
func (wl *waitLine) check(lv *level, w *waiter, n int64) {
	if w.deadline.IsZero() || wl.pace.Limit <= 0 {
		return
	}
	if start := wl.pace.Earliest(wl.paceAt, n); !start.Before(w.deadline) {
		w.refused, w.start, w.why = true, start, wl.paceWhy
		w.gone = true
		lv.live--
		wl.n--
		close(w.ch)
	}
}

// project records that the request whose turn it is in line q may not go
// before d.At (before now, when d is not Definite), under a quota of pace
// d.Pace, and, when that changed or a window has passed since, refuses every request in the line that p
// cannot let go before its deadline. Only the requests of the same
// priority ahead of a request are counted as going before it (aging may
// let older ones of lower priorities, and requests of higher priorities
// that come later, go first as well: that only delays it more), so the
// projection is never later than the earliest it could go.
func (kw *keyWaiters) project(q string, d pace.Decision, now time.Time) {
	p, at := d.Pace, d.At
	if !d.Definite {
		// It may go sooner than At, into what is left of a window.
		p.Slack++
		at = now
	}
	kw.mu.Lock()
	defer kw.mu.Unlock()
	wl := kw.lineOf(q)
	// Check the line again when the quota's pace changed, when a window
	// has passed, when a definite wait first sharpens the projection, and
	// when a definite wait puts the start half a window or more later
	// than the last check took it (a probe refused, say: the key waits
	// for a window's end it hoped was sooner). Not on every later start:
	// a paced key's starts move on with each request, and a check reads
	// the whole line.
	check := p.Limit != wl.pace.Limit || p.Window != wl.pace.Window ||
		now.Sub(wl.swept) >= p.Window || d.Definite && !wl.sweptDefinite ||
		d.Definite && at.Sub(wl.sweptAt) >= p.Window/resweepShift
	wl.pace, wl.paceAt = p, at
	wl.paceWhy = pace.Decision{Why: d.Why, Detail: d.Detail}
	if wl.n == 0 || p.Limit <= 0 || !check {
		return
	}
	wl.swept, wl.sweptDefinite, wl.sweptAt = now, d.Definite, at

	// A request with a lease reserved ahead for it in the pool goes at its
	// turn, whatever the pace: the first of each route, as many as the
	// pool holds for it, are not checked.
	var pooled map[string]int
	for _, pl := range wl.pool {
		if pooled == nil {
			pooled = map[string]int{}
		}
		pooled[pl.route]++
	}
	for i := range wl.levels {
		lv := &wl.levels[i]
		var n int64
		for j := range lv.q.len() {
			w := lv.q.at(j)
			if w.gone {
				continue
			}
			if pooled[w.route] > 0 {
				pooled[w.route]--
				continue
			}
			n++
			wl.check(lv, w, n)
		}
	}
}

// leave takes t out of its line, passing the turn on if it had it.
// It returns the leases reserved ahead that the line, now empty, leaves:
// the caller gives them back.
func (kw *keyWaiters) leave(t ticket, clk Clock, aging time.Duration) (left []pace.Lease) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	kw.waiting--
	kw.queued.Add(-1)
	if t.w != nil && !t.w.granted {
		// Gone before its turn came (or refused, and gone already): a
		// lease reserved ahead for a request of its route is one too many.
		// (A refused waiter's line may be gone already.)
		wl := kw.line(t.q)
		if wl == nil {
			return nil
		}
		if !t.w.gone {
			t.w.gone = true
			wl.levelOf(t.w.prio).live--
			wl.n--
		}
		return wl.unpool(t.route)
	}
	wl := kw.lineOf(t.q)
	if wl.n == 0 && len(wl.pool) > 0 {
		for _, pl := range wl.pool {
			left = append(left, pl.lease)
		}
		wl.pool = nil
	}
	kw.pass(t.q, wl, clk, aging)
	return left
}

// pass gives line q's turn to the next in it, or frees it; kw.mu is held.
func (kw *keyWaiters) pass(q string, wl *waitLine, clk Clock, aging time.Duration) {
	if wl.n > 0 {
		next := wl.next(clk.Now(), aging)
		next.granted = true
		wl.holder = next.prio
		close(next.ch)
		return
	}
	wl.busy, wl.levels = false, nil // what is left in levels is gone
	if q != "" {
		delete(kw.lines, q)
	}
}

// yield gives t's turn up if a request of a higher priority waits in its
// line, and t has not waited long enough (aging) for its own priority not
// to count. It returns t's new place (at the front of its priority), or
// false when t keeps its turn.
func (kw *keyWaiters) yield(t ticket, clk Clock, now time.Time, aging time.Duration) (ticket, bool) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	wl := kw.lineOf(t.q)
	if wl.n == 0 || now.Sub(t.since) >= aging || wl.top() <= t.prio {
		return t, false
	}
	t = kw.enqueue(t, true) // the line is busy: t gets a waiter
	kw.pass(t.q, wl, clk, aging)
	return t, true
}

// levelOf returns the level of priority prio, which is in the line.
func (wl *waitLine) levelOf(prio int) *level {
	for i := range wl.levels {
		if wl.levels[i].prio == prio {
			return &wl.levels[i]
		}
	}
	panic("headway: a waiter's level is not in its line")
}

// add puts w in its priority's level, at the back or the front, and
// returns the level.
func (wl *waitLine) add(w *waiter, front bool) *level {
	i := 0
	for i < len(wl.levels) && wl.levels[i].prio > w.prio {
		i++
	}
	if i == len(wl.levels) || wl.levels[i].prio != w.prio {
		wl.levels = append(wl.levels, level{})
		copy(wl.levels[i+1:], wl.levels[i:])
		wl.levels[i] = level{prio: w.prio}
	}
	if front {
		wl.levels[i].q.pushFront(w)
	} else {
		wl.levels[i].q.push(w)
	}
	wl.levels[i].live++
	wl.n++
	return &wl.levels[i]
}

// top returns the highest priority waiting (the line is not empty).
func (wl *waitLine) top() int {
	wl.trim()
	return wl.levels[0].prio
}

// trim drops the waiters that left from the front of each level, and the
// levels left empty.
func (wl *waitLine) trim() {
	for i := 0; i < len(wl.levels); {
		q := &wl.levels[i].q
		for q.len() > 0 && q.front().gone {
			q.popFront()
		}
		if q.len() == 0 {
			wl.levels = append(wl.levels[:i], wl.levels[i+1:]...)
			continue
		}
		i++
	}
}

// next takes the waiter whose turn is next out of the line: the one that
// has waited longest, among those that have waited aging or more, or else
// the first of the highest priority. One waits (wl.n > 0).
func (wl *waitLine) next(now time.Time, aging time.Duration) *waiter {
	wl.trim()
	pick := 0
	var oldest time.Time
	for i := range wl.levels {
		// Within a level the first came first (or gave its turn up).
		if s := wl.levels[i].q.front().since; now.Sub(s) >= aging && (oldest.IsZero() || s.Before(oldest)) {
			pick, oldest = i, s
		}
	}
	w := wl.levels[pick].q.popFront()
	wl.levels[pick].live--
	wl.n--
	if wl.levels[pick].q.len() == 0 {
		wl.levels = append(wl.levels[:pick], wl.levels[pick+1:]...)
	}
	return w
}

// lineName names the line a request waits in: requests counted in the same
// server-named bucket, governed by the same declared quotas and under the
// same in-flight caps wait in line together, so that a spent bucket or a
// full cap holds back only its own requests. kw.mu is held.
func (kw *keyWaiters) lineName(r *pace.Request, caps []int) string {
	b := kw.routes[r.Route]
	if len(r.Quotas) == 0 && len(caps) == 0 {
		return b
	}
	// A NUL cannot be in a bucket's name, which a header value gives.
	q := append([]byte(b), 0)
	for _, i := range r.Quotas {
		q = strconv.AppendInt(append(q, ' '), int64(i), 10)
	}
	for _, i := range caps {
		q = strconv.AppendInt(append(q, ' ', 'c'), int64(i), 10)
	}
	return string(q)
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

// ring is a queue in a circular buffer that grows as needed.
type ring[T any] struct {
	buf  []T
	head int
	n    int
}

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) grow() {
	if r.n < len(r.buf) {
		return
	}
	buf := make([]T, max(2*len(r.buf), 4))
	for i := range r.n {
		buf[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf, r.head = buf, 0
}

// push adds v at the back.
func (r *ring[T]) push(v T) {
	r.grow()
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
}

// pushFront adds v at the front.
func (r *ring[T]) pushFront(v T) {
	r.grow()
	r.head = (r.head - 1 + len(r.buf)) % len(r.buf)
	r.buf[r.head] = v
	r.n++
}

// at returns the ith value from the front (i < r.len()).
func (r *ring[T]) at(i int) T { return r.buf[(r.head+i)%len(r.buf)] }

// front returns the first value (the ring is not empty).
func (r *ring[T]) front() T { return r.buf[r.head] }

// popFront removes and returns the first value (the ring is not empty).
func (r *ring[T]) popFront() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return v
}

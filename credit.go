package headway

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway/pace"
)

// The hot path. A request whose quota is ample does not need the model:
// pace.State.Credit counts out, after each decision or answer the model
// takes in, how many requests the newest answers leave room for whatever
// the server runs. Such a request takes one unit of that credit under its
// key's small lock, goes, and is booked when its answer (a status under
// 400, headers unread) comes back: in a batch, at the next time the key's
// state is updated, which is also when the credit is counted again. Its
// headers are not parsed and the state is not touched per request: that
// is what makes a request with ample quota cost little more than the
// transport below.
//
// Anything else (a status of 400 or more, a transport error, a request
// given back) takes the slow path: its lease is lent in the state and
// completed or cancelled as any other. Credit is only for the pacer's own
// in-process store (a shared store's fleet must see every request), for
// routes whose bucket an answer placed (a server that sends no rate-limit
// headers gets credit until it first refuses a request, and its requests
// on credit take their places in the key's learnt window on requests in
// flight, learncap.go, while it is at most half full), and for requests
// that no declared
// quota, cost or in-flight cap of the caller's governs and that no one
// waits in line before; and it lapses creditTTL after it was counted (as a
// request takes it, or an answer comes), so that an answer is read at
// least that often while requests go.
//
// The clock is read when such a request goes and when its answer comes:
// the state weighs it as any other, at the middle of its round trip, and
// an answer read later is ordered against it by when it went (an estimate
// of that read answers out of order as news of a returned quota).

// creditTTL is how long after it was counted a credit lapses: the oldest
// an unread answer may make the newest one read.
const creditTTL = 250 * time.Millisecond

// fastBook is one key's credit and the requests sent on it.
type fastBook struct {
	mu      sync.Mutex
	buckets []named               // credits by server-named bucket (few: a slice)
	routes  []named               // the credit of each route ("GET /path")
	last    named                 // the route taken last, and its credit
	recs    []fastRec             // sent on credit since the last booking
	base    uint64                // the number of recs[0] (numbers start at 1)
	lent    map[uint64]pace.Lease // sent on credit, in flight when booked
	spans   []pace.Span           // scratch for book
	// at is when the credits were last counted: the origin of the
	// times in recs, so that a request on credit reads one clock and
	// builds no time.Time.
	at time.Time
}

// credit is what one bucket may still spend without asking the state.
type credit struct {
	n     int64
	route string // a route counted in the bucket, to count it again
}

// named is a credit by the name of what it is for: a server-named bucket,
// or a route (interned), which shares its bucket's.
type named struct {
	name string
	c    *credit
}

// fastRec is a request sent on credit.
type fastRec struct {
	route  string
	c      *credit   // the credit it was taken from
	span   pace.Span // since fastBook.at
	done   bool      // answered, admitted (under 400)
	booked bool      // told to the key's state
}

// maxCreditRoutes bounds fastBook.routes and fastBook.buckets: a key whose
// requests go to more routes than that starts them again (a route whose
// path holds an identifier is seen once, and goes on no credit).
const maxCreditRoutes = 32

// route returns route name's entry; f.mu is held.
func (f *fastBook) route(name []byte) (named, bool) {
	for _, rc := range f.routes {
		if rc.name == string(name) {
			return rc, true
		}
	}
	return named{}, false
}

// bucket returns bucket name's credit, nil when it has none; f.mu is held.
func (f *fastBook) bucket(name string) *credit {
	for _, bc := range f.buckets {
		if bc.name == name {
			return bc.c
		}
	}
	return nil
}

// take spends a unit of the credit of the route of method and path,
// returning the request's number (0: none left, lapsed, or the key was
// swept: dead), its route's name and when it goes (at+since).
func (f *fastBook) take(method, path string, clk Clock, dead *atomic.Bool) (n uint64, route string, at time.Time, since time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rc := f.last
	if rc.c == nil || !isRoute(rc.name, method, path) {
		var buf [128]byte
		var ok bool
		if rc, ok = f.route(routeName(&buf, method, path)); !ok {
			return 0, "", time.Time{}, 0
		}
		f.last = rc
	}
	if rc.c.n <= 0 || dead.Load() {
		return 0, "", time.Time{}, 0
	}
	d := f.since(clk)
	if d > creditTTL || d < 0 {
		// Counted too long ago: the key's state may have expired, or
		// others spent the quota, since.
		rc.c.n = 0
		return 0, "", time.Time{}, 0
	}
	rc.c.n--
	f.recs = append(f.recs, fastRec{route: rc.name, c: rc.c, span: pace.Span{Sent: d}})
	if f.base == 0 {
		f.base = 1
	}
	return f.base + uint64(len(f.recs)) - 1, rc.name, f.at, d
}

// isRoute reports whether name is the route of method and path, as
// routeName writes it.
func isRoute(name, method, path string) bool {
	return len(name) == len(method)+1+len(path) && name[len(method)] == ' ' &&
		name[:len(method)] == method && name[len(method)+1:] == path
}

// since returns how long ago on clk the credits were counted: on the
// system clock, by the monotonic clock alone, one read where time.Now
// takes two (the wall clock's steps in the quarter second a credit lasts
// are not followed; credits are counted again at every update of the
// key); on any other clock, by what it says. f.mu is held.
func (f *fastBook) since(clk Clock) time.Duration {
	if _, ok := clk.(SystemClock); ok {
		return time.Since(f.at)
	}
	return clk.Now().Sub(f.at)
}

// answered records that request n sent on credit came back admitted now
// (on clk), and reports whether it was still unbooked (false: it was lent a
// lease meanwhile, which the caller must complete).
func (f *fastBook) answered(n uint64, clk Clock) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n < f.base {
		return false
	}
	r := &f.recs[n-f.base]
	d := f.since(clk)
	r.span.Recv, r.done = d, true
	if d > creditTTL {
		r.c.n = 0 // lapsed: the next request reads its answer
	}
	return true
}

// bookUpTo enters the requests sent on credit in s, the key's state, under
// the store's lock and f.mu: the answered ones as spent, the others as
// leases lent (kept in f.lent for their answer or cancellation). When upTo
// is not zero it books only the requests answered by upTo, and lends
// nothing: those answered before a request was sent were counted before
// it, and go in before its answer; the others may have been counted after
// it, and go in after it (see pace.State.Spent).
func (f *fastBook) bookUpTo(s *pace.State, now, upTo time.Time, cfg *pace.Config) {
	if len(f.recs) == 0 {
		return
	}
	all := upTo.IsZero()
	by := upTo.Sub(f.at) // upTo, as a time in recs
	route := ""
	spans := f.spans[:0]
	flush := func() {
		s.Spent(route, f.at, spans, cfg)
		spans = spans[:0]
	}
	for i := range f.recs {
		r := &f.recs[i]
		if r.booked || !all && (!r.done || r.span.Recv > by) {
			continue
		}
		if r.route != route {
			flush()
			route = r.route
		}
		r.booked = true
		if r.done {
			spans = append(spans, r.span)
			continue
		}
		if f.lent == nil {
			f.lent = map[uint64]pace.Lease{}
		}
		f.lent[f.base+uint64(i)] = s.Lend(f.at.Add(r.span.Sent), r.route, cfg)
	}
	flush()
	f.spans = spans[:0]
	// Forget the booked ones in front: the others keep their numbers.
	n := 0
	for n < len(f.recs) && f.recs[n].booked {
		n++
	}
	if n == len(f.recs) {
		clear(f.recs)
		f.recs = f.recs[:0]
	} else if n > len(f.recs)/2 {
		copy(f.recs, f.recs[n:])
		clear(f.recs[len(f.recs)-n:])
		f.recs = f.recs[:len(f.recs)-n]
	} else {
		n = 0
	}
	f.base += uint64(n)
}

// lentFor takes the lease lent to request n; book has run since it was
// sent; f.mu is held.
func (f *fastBook) lentFor(n uint64) (pace.Lease, bool) {
	l, ok := f.lent[n]
	delete(f.lent, n)
	return l, ok
}

// count counts again, under the store's lock and after book (f.mu held
// throughout, so that no request takes credit in between), what every
// bucket may spend: s has just decided or learnt. route, when not empty,
// was just counted in bucket ("" is the key's own), which an answer named
// when moved (otherwise a route already placed stays where it is); each
// bucket's credit is counted through one of its routes, and a route that
// moves to another bucket stops counting for the one it left.
func (f *fastBook) count(s *pace.State, now time.Time, route, bucket string, moved bool) {
	if route != "" {
		c := f.bucket(bucket)
		rc, known := f.route([]byte(route))
		if known && !moved {
			c = rc.c
		}
		if !known || rc.c != c {
			if len(f.routes) >= maxCreditRoutes || c == nil && len(f.buckets) >= maxCreditRoutes {
				f.buckets, f.routes, known = nil, nil, false
			}
			if c = f.bucket(bucket); c == nil {
				c = &credit{}
				f.buckets = append(f.buckets, named{name: bucket, c: c})
			}
			if known {
				if rc.c.route == route {
					rc.c.route, rc.c.n = "", 0 // the bucket it left needs another route
				}
				i := slices.IndexFunc(f.routes, func(rc named) bool { return rc.name == route })
				f.routes[i].c = c
			} else {
				f.routes = append(f.routes, named{name: route, c: c})
			}
			f.last = named{}
		}
		if c.route == "" {
			c.route = route
		}
	}
	// The times of requests not yet booked (none after an update's
	// booking) move to the new origin.
	for i := range f.recs {
		d := f.at.Sub(now)
		f.recs[i].span.Sent += d
		f.recs[i].span.Recv += d
	}
	f.at = now
	for _, bc := range f.buckets {
		bc.c.n = 0
		if bc.c.route != "" {
			bc.c.n = s.Credit(now, bc.c.route)
		}
	}
}

// update runs op on the key's state s under f.mu, booking the requests
// sent on credit before (all, or those answered by upTo when it is not
// zero, and the rest after) and counting the credit again after: the
// pacer's store calls it under the key's lock.
func (f *fastBook) update(s *pace.State, now, upTo time.Time, cfg *pace.Config, route, bucket string, moved bool, op func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.Silent() {
		upTo = time.Time{} // all, before the answer (pace.State.Silent)
	}
	f.bookUpTo(s, now, upTo, cfg)
	op()
	f.bookUpTo(s, now, time.Time{}, cfg)
	f.count(s, now, route, bucket, moved)
}

// pending reports whether f holds requests the key's state has not been
// told of.
func (f *fastBook) pending() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.recs) > 0
}

// idle reports whether f holds nothing the state has not been told: its
// key may be swept. f.mu is held.
func (f *fastBook) idle() bool {
	return len(f.recs) == 0 && len(f.lent) == 0
}

// holdFast sends req on its key's credit when it may (see above): it
// returns the request's lease and when it goes (at+since), or false for
// the slow path.
func (p *pacer) holdFast(req *http.Request, key string) (l lease, at time.Time, since time.Duration, ok bool) {
	kw := p.keyWaiters(key)
	if kw.queued.Load() != 0 {
		return lease{}, time.Time{}, 0, false // in line behind others: wait with them
	}
	var w slot
	if kw.windowed.Load() {
		// A key whose answers name no quota keeps a window on its
		// requests in flight (learncap.go): one on credit takes its
		// place in it too, or waits for room on the slow path.
		var room bool
		if w, room = kw.enterWindowIfRoom(); !room {
			return lease{}, time.Time{}, 0, false
		}
	}
	n, route, at, since := kw.fast.take(req.Method, req.URL.Path, p.c.clock, &kw.dead)
	if n == 0 {
		if w.n > 0 {
			kw.windowAnswer(w, 0, false, false) // its place back
			kw.finish(nil)
		}
		return lease{}, time.Time{}, 0, false
	}
	return lease{kw: kw, fast: n, route: route, w: w}, at, since, true
}

// lent books l's key's requests sent on credit in s and returns the lease
// lent to l, which went on credit; false when there is none (a state that
// expired while it was in flight).
func (l lease) lent(s *pace.State, now time.Time, cfg *pace.Config) (pace.Lease, bool) {
	f := &l.kw.fast
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bookUpTo(s, now, time.Time{}, cfg)
	return f.lentFor(l.fast)
}

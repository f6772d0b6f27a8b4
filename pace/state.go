package pace

import (
	"slices"
	"sort"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// State is what one key knows: the value a Store holds. It is opaque: use
// its methods to decide and learn, and MarshalBinary and UnmarshalBinary to
// keep it outside the process. The zero State is a key nothing is known
// about.
type State struct {
	// Version is the Store's: it changes with every replacement, and
	// CompareAndSwap replaces a state only at the version it was loaded at.
	Version uint64
	// Expires is when a Store may forget the key: it is idle by then, and
	// nothing it holds (a pause, a window's end, a lease) still matters.
	Expires time.Time

	k keyState
}

// keyState is a State's content.
type keyState struct {
	// seq counts the leases granted: lease n has seq n.
	seq uint64
	// answered reports that an answer came back.
	answered bool
	// leases are the requests sent and not yet answered, in the order
	// they were granted.
	leases []lease
	// buckets are the server-named buckets seen, with their pauses.
	buckets []bucket
	// policies are the server's quotas.
	policies []policy
	// quotas holds the state of the declared quotas (Config.Quotas), by
	// index.
	quotas []quotaState
	// routes remembers the bucket recent routes were counted in, by the
	// route's hash.
	routes []route
	// silent is what is learnt of a server that sends no headers.
	silent silent
	// clock bounds the offset of the client's clock from the server's.
	clock offset
	// rtt is the round trip, smoothed, and rttMin its least lately (see
	// observeRTT): the least of the current run of rttWindow answers
	// (rttCur, rttSeen of them so far) and of the run before (rttPrev).
	rtt, rttMin     int64
	rttCur, rttPrev int64
	rttSeen         uint64

	// derived is what the leases sum to, kept as they change so that a
	// request's decision does not walk every lease in flight. It is not
	// encoded: a decoded or cloned state rebuilds it at its first use.
	derived derived
}

// derived holds the sums of a keyState's leases (see keyState.derived).
type derived struct {
	ok bool // the sums below are those of the leases
	// flight totals the leases in flight per bucket.
	flight []bucketFlight
	// minExp is at most the earliest expiry of a lease in flight (0:
	// unknown): expire has nothing to do before it; maxExp at least the
	// latest.
	minExp, maxExp int64
	// maxAt is the latest grant of the leases counted, and skew the most
	// a lease was granted before one granted ahead of it (the callers'
	// instants need not be in order): every lease before one granted at
	// a was granted by a + skew.
	maxAt, skew int64
}

// bucketFlight is what the leases in flight in one bucket sum to: how many
// they are, their costs in units other than requests, and the latest grant
// among them (at least: a lease's end leaves it, so that it stays O(1);
// the sums' next rebuild makes it exact).
type bucketFlight struct {
	bucket string
	n      int64
	cost   []Amount
	last   int64
}

// A lease is one granted reservation: a request in flight.
type lease struct {
	seq     uint64
	at      int64 // granted, Unix nanoseconds
	expires int64
	bucket  string
	route   uint64 // hash of the route
	cost    []Amount
	first   bool // went alone, first after a pause or the key's first
	quotas  []int
}

// Lease is a granted reservation: the request it was granted for counts as
// in flight until the Lease is passed to Complete or Cancel, or it expires.
type Lease struct {
	l lease
}

// Seq returns the lease's number for its key: the n-th lease granted has
// number n.
func (l Lease) Seq() uint64 { return l.l.seq }

// At returns when the lease was granted.
func (l Lease) At() time.Time { return time.Unix(0, l.l.at) }

// First reports whether the request goes alone, the first after a pause or
// the key's very first, while the rest wait for its answer.
func (l Lease) First() bool { return l.l.first }

// bucket is a server-named bucket: where a pause applies.
type bucket struct {
	name string
	// pause is an instant before which nothing is sent in the bucket (a
	// Retry-After), and why; after it one request goes first (firstAfter)
	// and the rest wait for its answer.
	pause      int64
	why        string
	firstAfter int64
}

// route maps a route's hash to the bucket it was counted in.
type route struct {
	hash   uint64
	bucket string
}

// maxRoutes bounds keyState.routes; the oldest are forgotten first.
const maxRoutes = 64

// routeHash returns the hash of a route ("GET /repos/x/issues"): only
// hashes are kept, so that a path that carries an identifier is not
// written where the state is stored as it was sent.
func routeHash(r string) uint64 {
	if r == "" {
		return 0
	}
	return stableHash(r)
}

// stableHash is FNV-1a, the same in every process (maphash's seeds are
// not).
func stableHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h | 1 // never 0, which means no route
}

// Amount is a cost in one unit.
type Amount struct {
	Unit ratelimit.Unit
	N    int64
}

// costIn returns what a lease costs in unit u: one for requests.
func costIn(cost []Amount, u ratelimit.Unit) int64 {
	if u == ratelimit.UnitRequests || u == "" {
		return 1
	}
	var n int64
	for _, a := range cost {
		if unitOf(a.Unit) == u {
			n += a.N // a unit named twice costs both
		}
	}
	return n
}

// Clone returns a deep copy of s: changing one does not change the other.
func (s State) Clone() State {
	c := s
	c.k = s.k.clone()
	return c
}

func (k *keyState) clone() keyState {
	c := *k
	c.derived.flight = slices.Clone(k.derived.flight)
	for i := range c.derived.flight {
		c.derived.flight[i].cost = slices.Clone(c.derived.flight[i].cost)
	}
	c.leases = slices.Clone(k.leases)
	for i := range c.leases {
		c.leases[i].cost = slices.Clone(c.leases[i].cost)
		c.leases[i].quotas = slices.Clone(c.leases[i].quotas)
	}
	c.buckets = slices.Clone(k.buckets)
	c.policies = slices.Clone(k.policies)
	for i := range c.policies {
		p := &c.policies[i]
		p.own, p.logF, p.ctrF = p.own.clone(), p.logF.clone(), p.ctrF.clone()
		p.anchors = slices.Clone(p.anchors)
	}
	c.quotas = slices.Clone(k.quotas)
	for i := range c.quotas {
		c.quotas[i].sends = slices.Clone(c.quotas[i].sends)
	}
	c.routes = slices.Clone(k.routes)
	c.silent.own, c.silent.ref = k.silent.own.clone(), k.silent.ref.clone()
	if k.silent.silentCand != nil {
		sc := *k.silent.silentCand
		c.silent.silentCand = &sc
	}
	c.silent.pend = slices.Clone(k.silent.pend)
	return c
}

// bucketNamed returns the bucket named name, adding it if new.
func (k *keyState) bucketNamed(name string) *bucket {
	for i := range k.buckets {
		if k.buckets[i].name == name {
			return &k.buckets[i]
		}
	}
	if len(k.buckets) >= maxBuckets {
		k.forgetBucket()
	}
	k.buckets = append(k.buckets, bucket{name: name})
	return &k.buckets[len(k.buckets)-1]
}

// maxBuckets bounds the server-named buckets a key keeps, and their
// policies: a server that names a new bucket for every request (a rotating
// partition key) cannot grow a key's state without bound.
const maxBuckets = 64

// forgetBucket drops the bucket whose policies spoke least recently, with
// them, unless a lease is in flight in it (then the oldest bucket).
func (k *keyState) forgetBucket() {
	drop, last := 0, int64(never)
	for i := range k.buckets {
		name := k.buckets[i].name
		if k.inFlightIn(name) || k.buckets[i].pause > 0 && i != 0 {
			continue
		}
		l := int64(0)
		for j := range k.policies {
			if k.policies[j].bucket == name {
				l = max(l, k.policies[j].last)
			}
		}
		if l < last {
			drop, last = i, l
		}
	}
	name := k.buckets[drop].name
	k.buckets = slices.Delete(k.buckets, drop, drop+1)
	k.policies = slices.DeleteFunc(k.policies, func(p policy) bool { return p.bucket == name })
}

// findBucket returns the bucket named name, or nil.
func (k *keyState) findBucket(name string) *bucket {
	for i := range k.buckets {
		if k.buckets[i].name == name {
			return &k.buckets[i]
		}
	}
	return nil
}

// bucketOf returns the bucket a route was last counted in, and whether it
// is known.
func (k *keyState) bucketOf(h uint64) (string, bool) {
	if h == 0 {
		return "", false
	}
	for i := len(k.routes) - 1; i >= 0; i-- {
		if k.routes[i].hash == h {
			return k.routes[i].bucket, true
		}
	}
	return "", false
}

// learnRoute records that the route hashed h was counted in bucket, as the
// newest route: the routes forgotten first are those answered longest ago.
func (k *keyState) learnRoute(h uint64, bucket string) {
	if h == 0 {
		return
	}
	for i := range k.routes {
		if k.routes[i].hash == h {
			if k.routes[i].bucket == bucket {
				k.touchRoute(h)
				return
			}
			k.routes = slices.Delete(k.routes, i, i+1)
			break
		}
	}
	if len(k.routes) >= maxRoutes {
		k.routes = slices.Delete(k.routes, 0, 1)
	}
	k.routes = append(k.routes, route{hash: h, bucket: bucket})
}

// defaultBucket is the bucket of a route never seen: the key's own ("")
// when it has policies there, else the first policy's.
func (k *keyState) defaultBucket() string {
	for i := range k.policies {
		if k.policies[i].bucket == "" {
			return ""
		}
	}
	if len(k.policies) > 0 {
		return k.policies[0].bucket
	}
	return ""
}

// InFlight returns how many leases the state counts as in flight: granted,
// and neither completed, cancelled nor expired (as of the last decision).
func (s *State) InFlight() int { return len(s.k.leases) }

// inflight returns the cost in p's unit of the leases in flight in p's
// bucket, less what answers showed the server counted of them already.
func (k *keyState) inflight(p *policy) int64 {
	n := k.inflightAll(p)
	if p.early > n {
		p.early = n // the rest expired or were cancelled
	}
	return n - p.early
}

// flight returns inflight's units, and the latest instant they are taken to
// reach the server: the latest grant among them, plus half the mean round
// trip and the arrivals' error (never while the mean round trip is zero:
// none measured yet, or a clock that did not move); and the counter's
// slack for a decision at t.
func (k *keyState) flight(p *policy, t int64) flight {
	slack := p.counterSlack(k, t)
	n := k.inflight(p)
	if n <= 0 {
		return flight{slack: slack}
	}
	fl := flight{n: n, end: never, slack: slack}
	if f := k.flightOf(p.bucket); f != nil && k.rtt > 0 {
		fl.end = f.last + k.rtt/2 + k.arrivalError()
	}
	return fl
}

// inflightAll returns the cost in p's unit of all of p's leases in
// flight.
func (k *keyState) inflightAll(p *policy) int64 {
	f := k.flightOf(p.bucket)
	if f == nil {
		return 0
	}
	if p.unit == ratelimit.UnitRequests || p.unit == "" {
		return f.n
	}
	return costIn(f.cost, p.unit)
}

// flightOf returns the sums of the leases in flight in bucket, nil when
// there are none.
func (k *keyState) flightOf(bucket string) *bucketFlight {
	k.sums()
	for i := range k.derived.flight {
		if f := &k.derived.flight[i]; f.bucket == bucket {
			if f.n == 0 {
				return nil
			}
			return f
		}
	}
	return nil
}

// sums rebuilds k.derived from the leases if it is not theirs.
func (k *keyState) sums() {
	if k.derived.ok {
		return
	}
	k.derived = derived{ok: true}
	for i := range k.leases {
		k.counted(&k.leases[i], +1)
	}
}

// counted adds lease l to the sums (sign +1) or takes it out (-1).
func (k *keyState) counted(l *lease, sign int64) {
	d := &k.derived
	if !d.ok {
		return // rebuilt from the leases at its next use
	}
	if sign > 0 {
		if d.minExp == 0 || l.expires < d.minExp {
			d.minExp = l.expires
		}
		d.maxExp = max(d.maxExp, l.expires)
		d.skew = max(d.skew, d.maxAt-l.at)
		d.maxAt = max(d.maxAt, l.at)
	}
	i := slices.IndexFunc(d.flight, func(f bucketFlight) bool { return f.bucket == l.bucket })
	if i < 0 {
		d.flight = append(d.flight, bucketFlight{bucket: l.bucket})
		i = len(d.flight) - 1
	}
	f := &d.flight[i]
	f.n += sign
	if sign > 0 {
		f.last = max(f.last, l.at)
	}
	if f.n <= 0 {
		// The bucket's last lease in flight: its entry goes, so that the
		// sums hold only buckets with leases (a server naming a bucket
		// per route would otherwise grow them without bound).
		d.flight[i] = d.flight[len(d.flight)-1]
		d.flight = d.flight[:len(d.flight)-1]
		return
	}
	for _, c := range l.cost {
		if c.N <= 0 || unitOf(c.Unit) == ratelimit.UnitRequests {
			continue
		}
		j := slices.IndexFunc(f.cost, func(a Amount) bool { return a.Unit == unitOf(c.Unit) })
		if j < 0 {
			f.cost = append(f.cost, Amount{Unit: unitOf(c.Unit)})
			j = len(f.cost) - 1
		}
		f.cost[j].N += sign * c.N
	}
}

// leaseIndex returns the index of the lease numbered seq, or -1: a binary
// search by index, which does not copy a lease per step (as
// slices.BinarySearchFunc's comparison taking one by value did: 8% of a
// request's pacing cost).
func (k *keyState) leaseIndex(seq uint64) int {
	ls := k.leases
	lo := sort.Search(len(ls), func(i int) bool { return ls[i].seq >= seq })
	if lo < len(ls) && ls[lo].seq == seq {
		return lo
	}
	return -1
}

// removeLease drops the lease numbered seq, returning it and whether it
// was there.
func (k *keyState) removeLease(seq uint64) (lease, bool) {
	i := k.leaseIndex(seq)
	if i < 0 {
		return lease{}, false
	}
	l := k.leases[i]
	k.counted(&l, -1)
	// Answers come back roughly in the order the requests went: move the
	// shorter side, so that taking out the oldest (or the newest) costs
	// O(1) however many are in flight.
	if n := len(k.leases); i < n/2 {
		copy(k.leases[1:i+1], k.leases[:i])
		k.leases[0] = lease{}
		k.leases = k.leases[1:]
	} else {
		copy(k.leases[i:], k.leases[i+1:])
		k.leases[n-1] = lease{}
		k.leases = k.leases[:n-1]
	}
	return l, true
}

// offset bounds the difference between the client's clock and the server's
// (client = server + offset), as learnt from Date headers: lo < offset <=
// hi when known.
type offset struct {
	lo, hi int64
	known  bool
}

// observe narrows the bounds with one answer: the server wrote its Date
// (whole seconds, truncated) between the request's sending and the
// answer's arrival.
func (c *offset) observe(sent, recv, date int64) {
	if date == 0 || recv < sent {
		return
	}
	lo, hi := sent-date-1e9, recv-date
	if !c.known || lo > c.hi || hi <= c.lo {
		// First, or inconsistent (another server, a clock step): restart.
		c.lo, c.hi, c.known = lo, hi, true
		return
	}
	c.lo, c.hi = max(c.lo, lo), min(c.hi, hi)
}

// guess is the offset taken when one instant is needed: none, unless the
// bounds rule it out.
func (c *offset) guess() int64 {
	if !c.known {
		return 0
	}
	return min(max(0, c.lo), c.hi)
}

// mid is the offset taken for a delay to an instant the server wrote (how
// far a reset is: learnPeriod): none, unless the bounds rule it out, and
// then the middle of the bounds. The bound nearest none (guess) takes a
// server ahead for up to a second less ahead than it is, and its resets
// for that much later: a window of a second was learnt as two or three.
// guess stays where a fixed window's end is guessed on the server's
// seconds (aligned), which a probe tests: the middle there moved the
// grid's fixed windows 3 s off from 1.09x to 1.23x.
func (c *offset) mid() int64 {
	if !c.known || c.lo <= 0 && 0 <= c.hi {
		return 0
	}
	return c.lo + (c.hi-c.lo)/2
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

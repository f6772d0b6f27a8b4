package pace

import (
	"math"
	"time"
)

// Credit is how a caller keeps the requests that have ample quota off the
// model: the requests the newest answers leave room for are counted out
// in advance, sent without a lease, and booked later, in a batch, without
// their headers read.
//
// The room is the one Reserve grants without asking any candidate: what
// the newest answer of every quota a route is counted in left, less the
// units counted since and those in flight. Every candidate that explains
// that answer admits those requests, so an answer of theirs that comes
// back admitted (a status under 400) carries no evidence the model needs
// request by request; only half of the room is lent, so that spending by
// others that the unread answers would have shown cannot take the rest.

// Credit returns how many more requests on route, each costing one request
// and counted in no declared quota, may be sent from now without a
// Reserve: half of the room the newest answers of the route's bucket
// leave (see above), while the client spends at most a quarter of each of
// its quotas in the quota's window; 0 when each answer still matters (a
// client near a limit, whose answers tell where a window ends or how fast
// a bucket fills), or the key has not answered, the route's bucket is
// unknown, has a quota that no answer described yet or one in units other
// than requests, is paused, or waits for a request that goes first. A
// server that sends no rate-limit headers is lent as much as a credit holds
// until it first refuses a request, and nothing after (see silentCredit).
//
// The requests sent on credit must be booked before the State decides
// again: with Spent once answered (admitted, under 400), or with Lend
// while in flight; on a Silent key, all of them before an answer is taken
// in.
func (s *State) Credit(now time.Time, route string) int64 {
	k := &s.k
	if !k.answered {
		return 0
	}
	if len(k.policies) == 0 {
		return k.silentCredit(now)
	}
	bname, known := k.bucketOf(routeHash(route))
	if !known {
		return 0
	}
	if b := k.findBucket(bname); b != nil && (unixNano(now) < b.pause || b.firstAfter != 0) {
		return 0
	}
	n := int64(maxCredit)
	counted := false
	arrive := unixNano(now) + k.lead()
	for i := range k.policies {
		p := &k.policies[i]
		if p.bucket != bname {
			continue
		}
		if !p.seen || costIn(nil, p.unit) <= 0 {
			// A quota in units other than requests (tokens) is spent
			// by what each request costs, which a request on credit
			// does not say: each answer of it is read.
			return 0
		}
		fl := k.flight(p, unixNano(now))
		inflight := fl.n
		// Ample: the client spends at most a quarter of the quota in its
		// longest window. A client that uses more is near a limit, where
		// the answers it would not read tell where a window ends or how
		// fast a bucket fills. (Asked first: it is one sum, where the
		// room below asks every candidate.)
		w := max(p.said, p.period.hi)
		if w <= 0 {
			return 0
		}
		t := unixNano(now)
		if 4*(p.own.sum(t-w, t)+inflight) > p.limit {
			return 0
		}
		room := p.obsRem - p.since - inflight
		if pl := p.plausible(); pl != 0 {
			// What every candidate in the running admits (Reserve's
			// test), when it is more: units only return as time passes.
			least := math.Inf(1)
			for c := range nCand {
				if pl&(1<<c) != 0 {
					least = min(least, p.avail(candidate(c), arrive, fl, cautious))
				}
			}
			if !math.IsInf(least, 1) {
				room = max(room, int64(least))
			}
		}
		if room < 2 {
			return 0
		}
		n = min(n, room/2)
		counted = true
	}
	if !counted {
		return 0
	}
	return n
}

// silentCredit is Credit for a key whose server sends no rate-limit
// headers: until its first refusal nothing is held back, and an admission
// only joins the arrivals that refusal weighs (see silent), which Spent
// books one by one, as Complete would; so a credit holds as much as it may
// (a request on it costs a few hundred nanoseconds where a Reserve and a
// Complete cost microseconds). None once it has refused (every answer is
// evidence then, weighed in order), while the requests in flight are
// capped after a restart, or while the key is paused or waits for a
// request that goes first. (An earlier credit for such keys was withdrawn:
// requests booked after a refusal had been read were lost to the silent
// model, and echo's limiter on loopback refused 13% where it refused 11%
// without; Spent and Silent now keep the order Complete keeps, which
// TestCreditSilentBooksAsComplete checks.)
func (k *keyState) silentCredit(now time.Time) int64 {
	if a := &k.silent; a.on || a.slow > 0 || len(a.pend) > 0 {
		return 0
	}
	if b := k.findBucket(""); b != nil && (unixNano(now) < b.pause || b.firstAfter != 0) {
		return 0
	}
	return maxCredit
}

// Silent reports whether the key's server has sent no rate-limit headers
// (or none was seen yet): its admissions are weighed in the order they
// reached it, so the requests sent on credit must all be booked (Spent
// and Lend) before an answer is taken in (Complete), not only those
// answered before it was sent.
func (s *State) Silent() bool { return len(s.k.policies) == 0 }

// maxCredit bounds a credit: a caller reads an answer at least once per
// maxCredit requests.
const maxCredit = 256

// A Span is a request sent on credit: when it was sent, and when its
// answer came back, as times since an origin that Spent is given (a
// caller that reads the clock for each request on credit keeps a
// duration, and builds no time.Time).
type Span struct {
	Sent, Recv time.Duration
}

// Spent books requests on route that were sent on credit (see Credit) and
// admitted, with a status under 400, whose answers' headers were not read:
// spans are times since origin. Each counts as one request, in every
// quota of the route's bucket, at the middle of its span, but no earlier than the newest answer
// read was counted, unless it was answered before then (what it left
// cannot tell its order from that answer's: counted after, it is not taken
// to be in what that answer said was left); those counted within spentMerge of each other
// are booked as one entry at the latest of their instants (so that none
// is taken to return sooner than it does), which keeps booking a burst
// from filling the ledgers one entry per request.
func (s *State) Spent(route string, origin time.Time, spans []Span, cfg *Config) {
	k := &s.k
	if len(spans) == 0 {
		return
	}
	h := routeHash(route)
	bname, known := k.bucketOf(h)
	if known {
		k.touchRoute(h) // in use: the last the state forgets
	} else {
		bname = k.defaultBucket()
	}
	base := unixNano(origin)
	if len(k.policies) == 0 {
		// A server that says nothing: each admission joins the arrivals
		// the silent model weighs, one by one, as Complete would take
		// it in.
		var none lease
		for _, sp := range spans {
			sent, recv := base+int64(sp.Sent), base+int64(sp.Recv)
			k.observeRTT(recv - sent)
			a := answer{l: &none, at: k.arrival(sent, recv), sent: sent, recv: recv, k: k}
			k.silent.answered(k, &a)
		}
		s.touch(base+int64(spans[len(spans)-1].Recv), cfg)
		return
	}
	var first, last, lastRecv, n, latest int64
	flush := func() {
		if n > 0 {
			k.spent(bname, last, lastRecv, n)
		}
	}
	for _, sp := range spans {
		sent, recv := base+int64(sp.Sent), base+int64(sp.Recv)
		k.observeRTT(recv - sent)
		at := k.arrival(sent, recv)
		latest = max(latest, at)
		if n > 0 && at-first <= spentMerge && first-at <= spentMerge {
			first, last, lastRecv = min(first, at), max(last, at), max(lastRecv, recv)
			n++
			continue
		}
		flush()
		first, last, lastRecv, n = at, at, recv, 1
	}
	flush()
	a := answer{at: latest, k: k}
	for i := range k.policies {
		if p := &k.policies[i]; p.bucket == bname && p.seen {
			// Everything spent by latest was taken from the bucket.
			p.bucketRateFrom(&a, 0, p.limit)
		}
	}
	s.touch(base+int64(spans[len(spans)-1].Recv), cfg)
}

// spentMerge is how close the instants of requests booked by Spent must
// be for them to share an entry: within the least order slack (see
// orderSlack), so that no candidate can tell.
const spentMerge = int64(time.Millisecond)

// spent books n requests admitted in bucket, counted at at at the latest
// and answered at recv at the latest (see Spent).
func (k *keyState) spent(bname string, at, recv, n int64) {
	for i := range k.policies {
		p := &k.policies[i]
		if p.bucket != bname {
			continue
		}
		cost := costIn(nil, p.unit) * n
		if cost <= 0 {
			continue
		}
		at := at
		if p.seen && at <= p.obsAt && recv > p.obsAt {
			at = p.obsAt + 1
		}
		if p.seen && at > p.obsAt {
			p.since += cost
		}
		p.own.add(at, cost, p.quantum())
		p.ownCum += cost
		p.lastAdmit = max(p.lastAdmit, at)
		p.probeTokens = min(p.probeTokens+float64(n)*probeShare, probeBurst)
		if p.seen {
			p.bLevel = max(p.bucketLevel(at, p.rate(cautious))-float64(cost), 0)
			p.bAt = max(p.bAt, at)
		}
	}
}

// Lend records a lease for a request on route that was sent on credit at
// sent and is still in flight, so that the decisions count it: Complete or
// Cancel it as any other.
func (s *State) Lend(sent time.Time, route string, cfg *Config) Lease {
	k := &s.k
	h := routeHash(route)
	bname, known := k.bucketOf(h)
	if !known {
		bname = k.defaultBucket()
	}
	return Lease{l: k.grant(unixNano(sent), Request{Route: route}, h, bname, false, cfg)}
}

// touchRoute makes the route hashed h the newest remembered, the last that
// learnRoute forgets when it must.
func (k *keyState) touchRoute(h uint64) {
	for i := range k.routes {
		if k.routes[i].hash == h {
			if i < len(k.routes)-1 {
				r := k.routes[i]
				copy(k.routes[i:], k.routes[i+1:])
				k.routes[len(k.routes)-1] = r
			}
			return
		}
	}
}

package pace

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"time"
)

// silent is what is learnt of a key whose server sends no rate-limit
// headers. It is a policy's model with the one evidence such a server
// gives: each answer admitted or refused.
//
// Its candidates are server algorithms with one parameter from a fixed
// set: a sliding log (which an anchored window also obeys) or a fixed
// window on the server's clock, of a window from silentWindows; a sliding
// window counter on the server's clock, of one of those windows of a
// second or more (silentcounter.go); or a token bucket (GCRA, leaky
// bucket) of a rate from silentRates. The other parameter, the limit (a
// window's count, a bucket's capacity), is bounded from both sides by the
// client's own ledger of arrivals, weighed in the order they reached the
// server: an admission proves the limit is at least what the window (or
// bucket) then held plus one, a refusal that it is at most what it held
// (refused arrivals included, since some servers count them). A candidate
// whose bounds cross is refuted.
//
// Nothing is held back until the first refusal. Then a request goes when
// every surviving candidate, at the limit it has proven, admits it. Where
// they disagree by more than silentSpread for a request, or by that much
// over the requests since they last agreed (see disagree), probes test
// them, one request at a time: at the latest instant that one of them
// allows no further ahead than the time already spent learning (so that
// the wait at most doubles it), a refusal refutes every candidate that
// allowed it, an admission every one that did not. A few refusals find the
// server among them all.
//
// When every candidate is refuted, the bounds are forgotten once and the
// search starts again from the next refusal, which weighs the arrivals
// kept (slow-starting the requests in flight); the second
// time (another client's spending, a server none describes), the envelope
// takes over: the windows' proven limits all hold
// together, each window once the ledger spans twice it, and a refusal
// bounds the window nearest its limit; probes raise the limits one at a
// time.
type silent struct {
	// On reports that a refusal was seen: the candidates pace. OnAt is
	// the first refusal's arrival.
	on   bool
	onAt int64
	// Own and Ref are the client's admitted and refused requests, at the
	// instants the server is taken to have counted them.
	own, ref ledger
	// Alive holds the candidates that survive.
	alive candSet
	// The candidates' bounds and buckets (see silentCand): nil until the
	// first refusal, so that a key that was never refused does not carry
	// them (they are most of the model's size).
	*silentCand
	// Probe is the first lease of the burst of probes testing the
	// candidates, 0 when none: the leases from it on are its probes (no
	// other request goes meanwhile). ProbeLeft more may still go, and
	// ProbeRefused reports a refusal among its answers. Tokens is the
	// probes' budget (see probeShare), earned by admitted answers and by
	// time (silentProbeEvery), as of Earned.
	probe        uint64
	probeLeft    int64
	probeRefused bool
	tokens       float64
	earned       int64
	// Base is the instant a search among disagreeing candidates began
	// (0 when none is on), and Horizon how far ahead of it the next
	// burst of probes may go: it starts minProbeGain after Base, and each
	// refused burst doubles its distance from Base, so that a few
	// refusals pass many candidates and the wait at most doubles.
	// Admitted reports that the last burst was admitted.
	base, horizon int64
	admitted      bool
	// Burst is how many probes the next burst may have: doubled by
	// each burst admitted whole, one again after a refusal (as TCP's
	// slow start).
	burst int64
	// Envelope reports that no candidate alone explained the answers
	// twice (see the type); Restarted, once.
	envelope, restarted bool
	// Slow caps the requests in flight before the first refusal after a
	// restart (0: no cap).
	slow int64
	// Lost sums the holds by the most cautious candidate, each shorter
	// than silentSpread, told since the candidates last agreed (see
	// disagree).
	lost int64
	// Pend are the answers whose evidence waits, in the order they
	// arrived (see settle).
	pend []pendingAnswer
}

// silentCand holds what the silent model knows of each candidate once a
// refusal has turned it on. Lo and Hi bound a candidate's limit: admitted
// evidence that it is at least Lo, refused evidence that it is at most Hi
// (unknownHi until a refusal). Tat is each bucket candidate's theoretical
// arrival time (GCRA): when its bucket would be empty again, given the
// admissions weighed; TatAll counts the refused arrivals too, as a server
// that charges them does.
type silentCand struct {
	lo, hi      [nSilent]int64
	tat, tatAll [len(silentRates)]int64
}

// silentWindows are the windows the window candidates may have: the ones
// rate limiters are configured with, from a 50/s bucket's interval to an
// hour.
var silentWindows = [...]int64{
	10e6, 20e6, 50e6, 100e6, 200e6, 250e6, 500e6,
	1e9, 2e9, 5e9, 10e9, 15e9, 30e9,
	60e9, 120e9, 300e9, 600e9, 900e9, 1800e9, 3600e9,
}

// silentRates are the rates, per second, the bucket candidates may have:
// the ones rate limiters are configured with (100 a minute and 5,000 an
// hour among them).
var silentRates = [...]float64{
	1000, 500, 200, 100, 60, 50, 40, 30, 25, 20, 15, 10, 8, 6, 5, 4, 3, 2,
	100.0 / 60, 5000.0 / 3600, 1, 0.5, 10.0 / 60, 1.0 / 60,
}

// The candidates' kinds, by index: the sliding logs, the fixed windows,
// the sliding window counters, then the buckets.
const (
	kLog = iota
	kFixed
	kCounter
	kBucket
)

// counterFrom is the index in silentWindows of the shortest window a
// sliding counter candidate has: a second. Counters of shorter windows are
// rare (a limiter that fine is a bucket), and the answers of round trips a
// good part of such a window long prove little of them: a short one that
// survives on that little holds requests back that no probe frees.
const counterFrom = 7

// nCounters counts the sliding counter candidates.
const nCounters = len(silentWindows) - counterFrom

// nWindowed counts the candidates with a window (the logs, the fixed
// windows and the counters); the buckets follow them.
const nWindowed = 2*len(silentWindows) + nCounters

// nSilent counts the candidates.
const nSilent = nWindowed + len(silentRates)

// candSet is a set of candidates, a bit each.
type candSet [(nSilent + 63) / 64]uint64

// allCands returns the set of every candidate.
func allCands() (c candSet) {
	for i := range nSilent {
		c[i/64] |= 1 << (i % 64)
	}
	return c
}

// has reports whether candidate i is in c.
func (c *candSet) has(i int) bool { return c[i/64]&(1<<(i%64)) != 0 }

// del takes candidate i out of c.
func (c *candSet) del(i int) { c[i/64] &^= 1 << (i % 64) }

// empty reports whether c holds no candidate (bits past the last, which
// only a damaged encoding sets, are none).
func (c *candSet) empty() bool {
	all := allCands()
	for i := range c {
		if c[i]&all[i] != 0 {
			return false
		}
	}
	return true
}

// bucketOf returns the index in silentRates (and tat) of bucket candidate i.
func bucketOf(i int) int { return i - nWindowed }

// unknownHi is a limit's upper bound before a refusal bounds it.
const unknownHi = math.MaxInt32

// silentProbeBurst is the silent model's probe budget at first: the probes
// that find the server among the candidates, about half of them refused.
const silentProbeBurst = 8

// silentSpread is how far apart the candidates' instants for one request
// must be for a probe to tell them apart: a few milliseconds are the
// round trip's noise, and more than that, request after request, a rate
// lost for as long as the cautious one rules.
const silentSpread = int64(10 * time.Millisecond)

// silentProbeEvery earns a probe when no admission does: a key that waits
// for its most cautious candidate (an hour's window) still probes now and
// then.
const silentProbeEvery = int64(5 * time.Second)

// maxSilentLedger bounds the silent model's ledgers: an hour's window at
// 5,000 an hour is kept at about five requests an entry.
const maxSilentLedger = 1024

// kind returns candidate i's kind and its parameter: a window, or a
// bucket's interval between two units (both in nanoseconds).
func kind(i int) (k int, p int64) {
	n := len(silentWindows)
	switch {
	case i < n:
		return kLog, silentWindows[i]
	case i < 2*n:
		return kFixed, silentWindows[i-n]
	case i < nWindowed:
		return kCounter, silentWindows[i-2*n+counterFrom]
	}
	return kBucket, int64(1e9 / silentRates[bucketOf(i)])
}

// silentNames describes each candidate, for a wait's Detail.
var silentNames = func() (s [nSilent]string) {
	for i := range s {
		switch k, p := kind(i); k {
		case kLog:
			s[i] = "sliding log of " + time.Duration(p).String()
		case kFixed:
			s[i] = "fixed window of " + time.Duration(p).String()
		case kCounter:
			s[i] = "sliding counter of " + time.Duration(p).String()
		default:
			s[i] = "bucket of " + strconv.FormatFloat(silentRates[bucketOf(i)], 'g', 4, 64) + "/s"
		}
	}
	return s
}()

// margin is how far apart two of the client's estimates of arrivals may be
// in a different order or distance than at the server: twice
// arrivalError.
func (k *keyState) margin() int64 { return 2 * k.arrivalError() }

// arrivalError is how far the client's estimate of an arrival (half way
// through its round trip) may be from the true one: half the spread of
// round trips, and the server's millisecond.
func (k *keyState) arrivalError() int64 {
	return max(k.rtt-k.rttMin, 0)/2 + 1e6
}

// fixedStart returns the start of the fixed window of length w that holds
// the client's instant t, on the server's clock (none off the client's
// unless the Date headers rule that out, then half way between what they
// allow), in the client's time.
func (k *keyState) fixedStart(t, w int64) int64 {
	var off int64 // client = server + off
	if c := k.clock; c.known && (c.lo >= 0 || c.hi < 0) {
		off = c.lo + (c.hi-c.lo)/2
	}
	return floorDiv(t-off, w)*w + off
}

// pendingAnswer is an answer whose evidence waits until every request
// that may have reached the server before it is answered too.
type pendingAnswer struct {
	at, ra  int64
	refused bool
}

// maxPending bounds the answers waiting to be weighed.
const maxPending = maxQuotaInFlight

// answered takes in an answer from a server that sent no rate-limit
// headers: its arrival joins the ledgers at once (so that pacing counts
// it), and its evidence waits for the requests that may have arrived
// before it (see settle).
func (a *silent) answered(k *keyState, ans *answer) {
	if !a.on && !ans.refused {
		// Nothing refused yet: the arrival is only kept, for the first
		// refusal to weigh (see replay). This is the cost of the model
		// on a server that refuses nothing.
		a.own.addUpTo(ans.at, 1, 1, maxSilentLedger)
		if a.slow > 0 {
			a.slow = min(a.slow+1, 1<<20)
		}
		return
	}
	a.earn(ans.recv)
	if ans.refused {
		if !a.on {
			a.on, a.onAt = true, ans.at
			a.replay(k)
		}
		a.ref.addUpTo(ans.at, 1, 1, maxSilentLedger)
	} else {
		a.own.addUpTo(ans.at, 1, 1, maxSilentLedger)
		a.tokens = min(a.tokens+probeShare, silentProbeBurst)
	}
	if a.probe != 0 && ans.l.seq >= a.probe {
		if ans.refused {
			a.tokens--
			a.probeRefused = true
		}
		a.endProbe(k, ans.at)
	}
	// In the order they arrived; of arrivals estimated within silentTie
	// of each other, the admitted ones first: the server's order among them is not
	// known, and a limiter that refused one of them admitted no other
	// after it (weighed the other way, a refusal bounds a bucket's
	// capacity below what the admissions after it prove, and refutes
	// the server's own bucket).
	i := len(a.pend)
	for i > 0 && a.pend[i-1].after(ans.at, ans.refused) {
		i--
	}
	a.pend = slices.Insert(a.pend, i, pendingAnswer{at: ans.at, ra: ans.ra, refused: ans.refused})
	a.settle(k, ans.recv)
}

// after reports whether p is weighed after an answer that arrived at at,
// refused or not: when its arrival was estimated later, but of an
// admission and a refusal estimated within silentTie of each other, the
// admission first.
func (p pendingAnswer) after(at int64, refused bool) bool {
	if p.refused != refused && p.at-at <= silentTie && at-p.at <= silentTie {
		return p.refused
	}
	return p.at > at
}

// silentTie is how close two arrivals' estimates are for an admission to
// be weighed before a refusal, whatever their order: the server's
// millisecond (see arrivalError). On loopback a burst of 25 took 3 ms, and
// its last admission was estimated a tenth of a millisecond after its first
// refusal.
const silentTie = int64(time.Millisecond)

// replay weighs, at the first refusal, the admissions kept until then:
// each candidate's limit is at least what it held with any of them, and
// the buckets' levels are brought up to date. It is what evidence would
// have found answer by answer, in one pass over the ledger per candidate.
func (a *silent) replay(k *keyState) {
	slices.SortFunc(a.own.e, func(x, y entry) int { return cmp.Compare(x.at, y.at) })
	a.reset()
	m := k.margin()
	e := a.own.e
	for i := range nSilent {
		a.lo[i] = 0
		switch kd, p := kind(i); kd {
		case kLog:
			var in int64
			j := 0
			for x := range e {
				in += e[x].n
				for j < x && e[j].at <= e[x].at-p+m {
					in -= e[j].n
					j++
				}
				a.lo[i] = max(a.lo[i], in)
			}
		case kFixed:
			var in int64
			cur := int64(math.MinInt64)
			for x := range e {
				s := k.fixedStart(e[x].at, p)
				if s != cur {
					cur, in = s, 0
				}
				if e[x].at-s >= m {
					in += e[x].n
				}
				a.lo[i] = max(a.lo[i], in)
			}
		case kCounter:
			a.lo[i] = counterProven(k, e, p, m)
		default:
			j := bucketOf(i)
			tat := int64(0)
			for x := range e {
				for range e[x].n {
					if l := int64(math.Ceil(float64(max(tat-e[x].at-m, 0))/float64(p))) + 1; l > a.lo[i] {
						a.lo[i] = l
					}
					tat = max(tat, e[x].at) + p
				}
			}
			a.tat[j], a.tatAll[j] = tat, tat
		}
	}
}

// endProbe ends the burst of probes once the last of its answers is in
// (at, its arrival): see horizon.
func (a *silent) endProbe(k *keyState, at int64) {
	if a.probeLeft > 0 {
		return
	}
	if n := len(k.leases); n > 0 && k.leases[n-1].seq >= a.probe {
		return
	}
	if a.probeRefused {
		a.horizon = at + max(at-a.base, int64(minProbeGain))
		a.burst = 1
	} else {
		a.base, a.horizon = at, at // the candidates left may still disagree: at once
		a.burst = min(max(2*a.burst, 2), silentProbeMax)
	}
	a.admitted = !a.probeRefused
	a.probe, a.probeRefused = 0, false
}

// disagree reports whether the candidates, whose instants for a request
// are d apart, disagree enough to be tested (m is the arrivals' margin):
// by silentSpread for one request, or, for a server faster than one
// request a silentSpread, by that much over the holds told since they
// last agreed (a bucket of 100/s against one of 200/s holds each request
// back 5 ms, and halves the rate for as long as it rules). The sum counts
// each time a request asks, not each request: one that asks again while
// it waits (an answer came) counts twice, and the probe comes sooner,
// within the probes' budget. Closer than m, a probe cannot tell them
// apart.
func (a *silent) disagree(d, m int64) bool {
	switch {
	case d >= max(silentSpread, m):
		return true
	case d <= m:
		a.lost = 0
		return false
	case a.probe != 0:
		return true // a burst of probes is on
	}
	a.lost = max(a.lost, 0) + d
	if a.lost < silentSpread {
		return false
	}
	a.lost = 0
	return true
}

// silentProbeMax bounds a burst of probes: enough to refute at once a
// slow bucket that still had room for a dozen.
const silentProbeMax = 16

// room returns how many requests candidate i, if its limit is limit,
// admits arriving at arrive with inflight in flight.
func (a *silent) room(k *keyState, i int, arrive, inflight, limit int64) int64 {
	switch kd, p := kind(i); kd {
	case kBucket:
		return limit - int64(math.Ceil(float64(max(a.tatAll[bucketOf(i)]-arrive, 0))/float64(p))) - inflight
	case kCounter:
		cur, prev, weight := a.counterAt(k, arrive, p, 0, true)
		return limit - int64(math.Ceil(float64(cur)+float64(prev)*weight)) - inflight
	case kFixed:
		s := k.fixedStart(arrive, p)
		return limit - a.own.sum(s-1, never-1) - a.ref.sum(s-1, never-1) - inflight
	default:
		return limit - a.own.sum(arrive-p, never-1) - a.ref.sum(arrive-p, never-1) - inflight
	}
}

// reset makes every candidate a candidate again, with no upper bound.
func (a *silent) reset() {
	if a.silentCand == nil {
		a.silentCand = new(silentCand)
	}
	a.alive = allCands()
	for i := range a.hi {
		a.hi[i] = unknownHi
	}
}

// settle takes in the evidence of the pending answers that no request in
// flight can have reached the server before: in the order they arrived,
// so that each is weighed against everything counted before it.
func (a *silent) settle(k *keyState, now int64) {
	e := k.arrivalError()
	n := 0
	for _, p := range a.pend {
		if len(k.leases) > 0 && k.leases[0].at <= p.at+2*e && len(a.pend)-n <= maxPending {
			break
		}
		a.evidence(k, p)
		n++
	}
	if n == 0 {
		return
	}
	a.pend = append(a.pend[:0], a.pend[n:]...)
	a.refute(k)
	a.prune(now)
}

// counted returns what candidate i says the server counted just before
// an arrival at at, the client's estimate. An admission's count is what
// was certainly counted (a window's arrivals less than m after its start
// may have been before it; a bucket's level may be m later), a refusal's
// what may have been (refused arrivals included, since some servers count
// them).
func (a *silent) counted(k *keyState, i int, at, m int64, refused bool) float64 {
	kd, p := kind(i)
	var from int64
	switch kd {
	case kBucket:
		j := bucketOf(i)
		if refused {
			return float64(max(a.tatAll[j]-at+m, 0)) / float64(p)
		}
		return float64(max(a.tat[j]-at-m, 0)) / float64(p)
	case kFixed:
		from = k.fixedStart(at, p) - 1
	case kCounter:
		if refused {
			return a.counterMost(k, at, p, m)
		}
		return counterLeast(k, a.own.sum, at, p, m)
	default:
		from = at - p
	}
	if refused {
		to := at
		if a.own.sum(at, at+m) > 0 {
			// Admitted arrivals estimated just after it: the server may
			// have seen them first (a bucket's refill aside, a window
			// that refuses admits no more until it moves on).
			to = at + m
		}
		return float64(max(a.own.sum(from, to)+a.ref.sum(from, to)-1, 0)) // not the refused arrival itself
	}
	return float64(max(a.own.sum(from+m, at)-1, 0)) // nor the admitted one
}

// evidence bounds every surviving candidate's limit with one answer that
// arrived at p.at, counting for an admission only what was certainly
// before it in its window, and for a refusal all that may have been (see
// counted). An estimate
// off by more than that may refute the true candidate: the others follow,
// and the envelope takes over (see refute).
//
// A bucket's level with refusals charged (tatAll, the cautious view of a
// server that charges them) is capped at each admission by what the
// admission proves: the bucket had room for it, so it held at most its
// capacity (hi) after it, whatever it charged before. Without the cap
// every refused probe was charged for good, and a bucket of 1/s, its probes
// refused, held the key back 5 s at a time (1.6x on echo's x/time/rate
// limiter at 1/s; the grid's silent buckets at 1/s took 1.62x, now 1.15x).
// The cap needs the admission's arrival known to within a fraction of the
// bucket's interval: for an interval within a few arrival margins (a 1000/s
// bucket's 1 ms against margins of 2.5 ms) the charged level is the slack
// the refusals' bounds rely on, and capping it there refuted the server's
// own bucket (1.99x), so only intervals of chargeCapMargins margins or
// more are capped.
func (a *silent) evidence(k *keyState, p pendingAnswer) {
	at, m := p.at, k.margin()
	culprit, slack, count := -1, int64(math.MaxInt64), int64(0)
	for i := range nSilent {
		if !a.alive.has(i) {
			continue
		}
		kd, _ := kind(i)
		c := a.counted(k, i, at, m, p.refused)
		if p.refused {
			h := int64(math.Ceil(c))
			if a.envelope && kd != kBucket {
				if s := a.limit(i) - h; s < slack {
					culprit, slack, count = i, s, max(h, 1)
				}
				continue
			}
			a.hi[i] = min(a.hi[i], h)
			continue
		}
		if l := int64(math.Ceil(c)) + 1; l > a.lo[i] {
			a.lo[i] = l
		}
	}
	if culprit >= 0 {
		// On the envelope a refusal says that one window was full, not
		// which: the one nearest its limit takes the bound (one at
		// least: a window that admitted once admits one).
		a.hi[culprit] = min(a.hi[culprit], count)
	}
	for j := range a.tat {
		i := nWindowed + j
		_, iv := kind(i)
		a.tatAll[j] = max(a.tatAll[j], at) + iv
		if !p.refused {
			a.tat[j] = max(a.tat[j], at) + iv
			if a.hi[i] < unknownHi && iv >= chargeCapMargins*m {
				a.tatAll[j] = min(a.tatAll[j], max(a.tat[j], at+a.hi[i]*iv+m))
			}
		}
	}
	if p.refused && p.ra > 0 && !a.envelope {
		a.retryAfter(k, at, p.ra, m)
	}
}

// chargeCapMargins is how many arrival margins a bucket candidate's
// interval must span for an admission to cap its charged level (see
// evidence): at 4, a bucket of 100/s on round trips of 1 ms (margins of
// about 2.5 ms) is capped, and one of 200/s or faster is not.
const chargeCapMargins = 4

// retryAfter takes in a refusal at at whose Retry-After said the quota
// returns ra later: a candidate that, even at the most its evidence
// allows, would admit nothing until well after that is refuted. One that
// would admit sooner is not: a server may ask for more time than it needs.
func (a *silent) retryAfter(k *keyState, at, ra, m int64) {
	gran := int64(1e9) // the header's resolution
	if ra%gran != 0 {
		gran = 1e6
	}
	for i := range nSilent {
		if a.alive.has(i) && a.admitAt(k, i, at, 0, m, a.hi[i], false) > at+ra+gran+m {
			// (Optimistically: a bucket's level without the refusals,
			// which a server may not charge.)
			a.lo[i] = max(a.lo[i], a.hi[i]+1)
		}
	}
}

// refute drops the candidates whose bounds cross, and the fixed windows
// too short to tell from a log at this round trip's spread; when none is
// left, the envelope takes over.
func (a *silent) refute(k *keyState) {
	m := k.margin()
	for i := range nSilent {
		kd, w := kind(i)
		// (A limit below one is no limit: a refusal with nothing in
		// the window refutes the candidate too.)
		if (kd == kFixed || kd == kCounter) && w < 4*m || !a.envelope && (a.lo[i] > a.hi[i] || a.hi[i] < 1) {
			a.alive.del(i)
		}
	}
	if a.alive.empty() && !a.restarted {
		// No one algorithm explains what the server said. The first
		// time, the evidence is taken to have misled (the first burst's
		// arrivals, estimated half way through round trips that include
		// setting up connections, say): the bounds are forgotten, and
		// the search starts again from the next refusal, which weighs
		// the arrivals again as the first refusal did. They are kept:
		// the server still counts them, and without them that refusal
		// found nothing counted before it and refuted every candidate
		// (a limit below one is none), and the envelope took over.
		// Until then the requests in flight are capped, one at first
		// and one more per admission (TCP's slow start), so that the
		// requests held back meanwhile do not go all at once.
		*a = silent{restarted: true, slow: 1, tokens: a.tokens, earned: a.earned, own: a.own, ref: a.ref}
		return
	}
	if a.alive.empty() {
		// Again: every window keeps the limit it proved, together (see
		// the type).
		a.envelope = true
		a.probeLeft = 0
		a.reset()
	}
}

// keep returns until when what was learnt matters once the key is idle:
// until the last admission leaves the longest window a surviving
// candidate counts, a counter's next window included (0 before a
// refusal, or with nothing admitted).
func (a *silent) keep() int64 {
	if !a.on || len(a.own.e) == 0 {
		return 0
	}
	return a.own.e[len(a.own.e)-1].at + a.longest(true)
}

// longest returns the longest window of a surviving candidate; with
// weighed, a counter's is two (the next window still weighs an arrival).
func (a *silent) longest(weighed bool) int64 {
	var longest int64
	for i := range nWindowed {
		if a.alive.has(i) {
			kd, w := kind(i)
			if weighed && kd == kCounter {
				w *= 2
			}
			longest = max(longest, w)
		}
	}
	return longest
}

// prune forgets the arrivals no surviving candidate counts any more.
func (a *silent) prune(now int64) {
	longest := a.longest(false)
	a.own.prune(now - 2*longest)
	a.ref.prune(now - 2*longest)
}

// earn gives the probe budget what time has earned since it last did.
func (a *silent) earn(now int64) {
	if a.earned == 0 || now < a.earned {
		a.earned = now
		a.tokens = max(a.tokens, silentProbeBurst)
		return
	}
	if d := now - a.earned; d >= silentProbeEvery {
		a.tokens = min(a.tokens+float64(d/silentProbeEvery), silentProbeBurst)
		a.earned += d / silentProbeEvery * silentProbeEvery
	}
}

// admitAt returns the earliest instant at or after arrive at which
// candidate i, if its limit is limit, admits one more request with
// inflight others in flight; never when only answers can tell. pending
// asks for the cautious view of a bucket's level: refused arrivals
// charged, and the answers not weighed yet and the requests in flight
// counted at the instants they reach the server (a window counts them as
// arriving now).
func (a *silent) admitAt(k *keyState, i int, arrive, inflight, m, limit int64, pending bool) int64 {
	kd, p := kind(i)
	if kd == kBucket {
		tat := a.tat[bucketOf(i)]
		if pending {
			tat = a.tatAll[bucketOf(i)] // cautiously, as if refusals were charged
			lead := k.lead()
			q, l := a.pend, k.leases
			for len(q) > 0 || len(l) > 0 {
				var at int64
				if len(l) == 0 || len(q) > 0 && q[0].at <= l[0].at+lead {
					at, q = q[0].at, q[1:]
				} else {
					at, l = l[0].at+lead, l[1:]
				}
				tat = max(tat, at) + p
			}
		}
		if limit < 1 {
			return never
		}
		// The level at t is (tat-t)/p units: one more fits when it is
		// at most limit-1.
		return max(arrive, tat-(limit-1)*p+m)
	}
	keep := limit - 1 - inflight
	if keep < 0 {
		return never
	}
	if kd == kLog {
		return afterBoth(&a.own, &a.ref, arrive, p+m, keep)
	}
	if kd == kCounter {
		// Refused arrivals count as the pending view's buckets do: only
		// cautiously. A Retry-After is weighed without them, and at the
		// most the evidence allows: a counter may admit while its weighed
		// count is below the limit, with less than one whole unit free.
		if !pending {
			keep++
		}
		return a.counterAdmit(k, arrive, p, m, keep, pending)
	}
	s := k.fixedStart(arrive, p)
	if arrive-s >= m && a.own.sum(s-m-1, never-1)+a.ref.sum(s-m-1, never-1) <= keep {
		return arrive
	}
	if arrive-s < m && a.own.sum(s-p-m-1, never-1)+a.ref.sum(s-p-m-1, never-1) <= keep {
		return max(s+m, arrive) // the window may have begun after it
	}
	return s + p + m
}

// limit is the limit candidate i paces at: what it proved, and on the
// envelope no more than a refusal allowed.
func (a *silent) limit(i int) int64 {
	if a.envelope {
		return min(a.lo[i], a.hi[i])
	}
	return a.lo[i]
}

// silentHold is the silent model's answer to a request sent at t.
type silentHold struct {
	ok, probe, definite bool
	at                  int64
	why                 int // the candidate holding it
}

// hold decides whether a request may be sent at t: when every surviving
// candidate admits it, or as a probe (see the type).
func (a *silent) hold(k *keyState, t int64) silentHold {
	if len(a.pend) > 0 {
		a.settle(k, t)
	}
	if !a.on {
		if a.slow > 0 && int64(len(k.leases)) >= a.slow {
			return silentHold{at: t + int64(pollStep)}
		}
		return silentHold{ok: true}
	}
	a.earn(t)
	m, lead := k.margin(), k.lead()
	arrive := t + lead
	inflight := int64(len(k.leases))
	var at [nSilent]int64
	n, latest, why := 0, int64(math.MinInt64), 0
	span := int64(0) // how far back the arrivals kept go
	if len(a.own.e) > 0 {
		span = t - a.own.e[0].at
	}
	for i := range nSilent {
		if !a.alive.has(i) {
			continue
		}
		if a.lo[i] <= 0 {
			continue // nothing admitted yet: nothing proven to pace by
		}
		if kd, w := kind(i); a.envelope && (kd == kBucket || 2*w > span) {
			// On the envelope, a window longer than half what was
			// seen has proved no limit of its own yet: what was
			// admitted in it is all there was.
			continue
		}
		s := a.admitAt(k, i, arrive, inflight, m, a.limit(i), true)
		if s != never {
			s -= lead
		}
		at[n] = s
		n++
		if s > latest {
			latest, why = s, i
		}
	}
	if n == 0 && len(a.ref.e) > 0 {
		// Refused, and no candidate has proved a limit to pace by (after
		// a restart, say, before anything is admitted again): nothing
		// says when the quota returns, and on a fast link a request a
		// round trip would each be refused (36 in 4 ms against a spent
		// bucket on loopback). One at most per silentSpread after the
		// last refusal.
		if next := a.ref.e[len(a.ref.e)-1].at + silentSpread - lead; next > t {
			return silentHold{at: next}
		}
	}
	if n == 0 || latest <= t {
		return silentHold{ok: true}
	}
	if a.probe != 0 {
		a.endProbe(k, t) // its leases may have expired or been cancelled
	}
	// A refusal still to be weighed may refute the candidate a probe
	// would test: the probe waits for it.
	canProbe := a.probe == 0 && a.tokens >= 1 && !slices.ContainsFunc(a.pend, func(p pendingAnswer) bool { return p.refused })
	if a.envelope {
		// A probe tests one more in the window that holds the
		// request, where its limit may be more than it proved; the
		// rest wait for what it says.
		if a.lo[why] < a.hi[why] {
			if canProbe {
				return silentHold{ok: true, probe: true}
			}
			if a.probe != 0 {
				return silentHold{at: min(latest, t+int64(pollStep)), why: why}
			}
		}
		a.probeLeft = 0 // a burst begun before the envelope took over ends
	} else if soonest := slices.Min(at[:n]); a.disagree(latest-max(soonest, t), m) {
		// The candidates disagree, by more than the arrivals'
		// margin (a probe closer to the cautious one's instant than
		// that would refute nothing): a burst of probes at a time tests
		// them, at an instant some of them allow (see gallop); a
		// refusal refutes those that allowed it, an admission those
		// that did not. The rest wait for what it (or, when the budget
		// is spent, time) says, not for the most cautious candidate.
		if a.base == 0 {
			a.base = t
			if len(a.own.e) > 0 {
				a.base = min(a.own.e[len(a.own.e)-1].at, t)
			}
			a.horizon = a.base + int64(minProbeGain)
		}
		// The latest instant a candidate allows within the horizon, so
		// that a refusal refutes as many as it can; the soonest if none
		// is that near.
		p := int64(never)
		for _, x := range at[:n] {
			if x < latest-m && (x <= a.horizon && (p > a.horizon || x > p) || x > a.horizon && p > a.horizon && x < p) {
				p = x
			}
		}
		if a.probe != 0 {
			// A burst is on: its next probe goes as the soonest
			// candidate allows.
			if a.probeLeft > 0 && soonest <= t {
				a.probeLeft--
				return silentHold{ok: true, probe: true}
			}
			return silentHold{at: t + int64(pollStep), why: why}
		}
		if p > t {
			return silentHold{at: p, why: why}
		}
		if canProbe {
			// A burst of as many as the soonest candidate admits (a
			// few at most, and no more than the budget), so that an
			// admission of them all refutes a slow bucket that had room
			// for fewer.
			opt := 0
			for i := range nSilent {
				if a.alive.has(i) && a.admitAt(k, i, arrive, inflight, m, a.limit(i), true)-lead == soonest {
					opt = i
					break
				}
			}
			kk := int64(1)
			if a.admitted && a.horizon == a.base {
				// Only after a burst that was admitted: one probe at a
				// time while the search goes on from refusals.
				// As many as the soonest candidate admits, and one
				// more than any that holds the request back would at
				// the most it may allow: all admitted refute them all,
				// and no more are risked.
				need := int64(1)
				for i := range nSilent {
					if a.alive.has(i) && a.admitAt(k, i, arrive, inflight, m, a.limit(i), true)-lead > t {
						need = max(need, a.room(k, i, arrive, inflight, a.hi[i])+1)
					}
				}
				kk = min(a.room(k, opt, arrive, inflight, a.lo[opt]), need, a.burst, int64(a.tokens))
			}
			a.probeLeft = max(kk, 1) - 1
			return silentHold{ok: true, probe: true}
		}
		return silentHold{at: t + int64(pollStep), why: why}
	}
	if latest == never {
		return silentHold{at: t + int64(pollStep), why: why}
	}
	return silentHold{at: latest, definite: true, why: why}
}

// seconds returns d in seconds.
func seconds(d time.Duration) float64 { return d.Seconds() }

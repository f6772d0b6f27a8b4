package pace

import (
	"math"
	"math/bits"

	"github.com/headway-go/headway/ratelimit"
)

// answer is one answer as the policies take it in.
type answer struct {
	l       *lease
	at      int64 // the instant the server is taken to have counted it
	sent    int64
	recv    int64
	date    int64 // the response's Date, 0 when none
	refused bool
	probe   bool  // the request probed a policy
	ra      int64 // Retry-After, 0 when none
	// raOne reports a Retry-After of one unit of its form at most (a
	// second in delay-seconds, a millisecond in the ms headers), all of
	// which may be rounding; never a date, which names an instant.
	raOne bool
	k     *keyState
}

// cost returns what the answered request cost in p's unit.
func (a *answer) cost(p *policy) int64 { return costIn(a.l.cost, p.unit) }

// described takes in an answer that spoke of p (o): what was left, the
// reset, the limit.
func (p *policy) described(a *answer, o *ratelimit.Policy) {
	p.last = a.recv
	if o.HasLimit && o.Limit > 0 {
		p.limit, p.limitSaid = o.Limit, true
	}
	if o.Window > 0 {
		p.said = int64(o.Window)
		p.period = bounds{int64(o.Window), int64(o.Window)}
		p.logW = p.said
	}
	if !o.HasRemaining {
		p.undescribed(a)
		p.resetEvidence(a, o)
		return
	}
	r := o.Remaining
	if !o.HasLimit && r+1 > p.limit {
		p.limit = r + 1
	}
	if r > p.limit {
		r = p.limit
	}
	cost := a.cost(p)
	admitted := !a.refused
	p.labelled(a, o, cost)
	p.closeAdmissions(a, cost)
	if !p.seen {
		if admitted {
			p.own.add(a.at, cost, p.quantum())
			p.ownCum += cost
			p.lastAdmit = max(p.lastAdmit, a.at)
		}
		p.first(a, o, r, cost)
		return
	}
	// Refused where the one candidate left said there was room, when it
	// already needs reconsiderSlacks times the others' spending any
	// candidate is let to: what refuted the others may have misled (see
	// reconsider).
	if a.refused && !a.probe && r == 0 && p.alive&(p.alive-1) == 0 && p.score[bits.TrailingZeros8(p.alive)] >= reconsiderSlacks*p.scoreSlack() {
		p.reconsider()
	}
	surplus := r - p.obsRem
	var older bool
	if surplus >= 0 {
		ret := p.returnsBetween(a, r, p.since+cost)
		older = a.at-p.obsAt <= a.k.orderSlack() && !math.IsInf(ret, 1) ||
			a.sent <= p.obsAt+a.k.orderSlack() && (float64(surplus) > ret ||
				admitted && p.early >= cost && surplus <= p.booked && float64(surplus) > p.refillBetween(p.obsAt, a.at)) ||
			math.IsInf(ret, 1) && float64(surplus) > p.returnsBetweenOf(a, r, p.since+cost, false) && p.mayBeOlder(a, surplus)
	}
	if older || a.at < p.obsAt && p.rolledAt == p.obsAt {
		// Counted before the newest answer: it found more left, and it
		// was not counted so much later that the quota can have come
		// back meanwhile (nor as if a window ended between), or it was
		// in flight when the newest was counted (sent before that
		// answer's instant, or after it by less than the instant's own
		// uncertainty, orderSlack) and found more left than can have
		// come back since, as far as the candidates in the running say,
		// or, while units that answer booked as counted before their
		// answers (see check) are still unanswered, no more than it
		// booked and more than a bucket refills meanwhile. (The instants
		// alone do not order them: a request that opened a connection
		// spent most of its round trip on its way there, and answers to
		// requests in flight together come back in any order; the
		// count, which only falls between returns, does.) The newest
		// answer counted it already, and this one says less, except
		// about the reset. Its unit was booked then, if that answer
		// showed more counted than it explained. And an answer counted
		// before one that showed a window's end is from the window
		// before, whatever its count.
		if admitted {
			booked := min(p.early, cost)
			p.early -= booked
			p.own.add(a.at, cost-booked, p.quantum())
			p.ownCum += cost - booked
			p.lastAdmit = max(p.lastAdmit, a.at)
		}
		p.resetEvidence(a, o)
		return
	}
	since := p.since
	if admitted {
		since += cost
		p.own.add(a.at, cost, p.quantum())
		p.ownCum += cost
		p.lastAdmit = max(p.lastAdmit, a.at)
	} else if r == 0 {
		p.notEnded(a)
	}
	p.revive(a.at)
	prevAt, prevRem := p.obsAt, p.obsRem
	p.check(a, r, prevAt, prevRem, since)
	p.settleWindows(a, r, since)
	p.notShorter(a, r, since)
	if p.rolledAt == a.at && a.at < p.obsAt {
		p.rolledAt = p.obsAt // the base stays the later instant
	}
	p.obsAt, p.obsRem, p.since = max(a.at, p.obsAt), r, 0
	p.bLevel, p.bAt = float64(r), a.at
	if admitted {
		p.probeTokens = min(p.probeTokens+probeShare, probeBurst)
		p.countCap(a)
	}
	p.resetEvidence(a, o)
	p.prune()
}

// labelled counts the units admitted under each reset instant the server
// wrote on its own clock (an epoch or a date, read against its Date), and
// when more than the limit came under one, sets aside every candidate but
// the bucket. A window's reset names the window that counted the request,
// whatever order the answers come back in: no fixed window admits more
// than its limit under one name, no sliding counter more than its limit in
// its current window, and no sliding log more while its oldest unit, whose
// age its reset names, stays. A bucket's reset, the instant it is full
// again rounded to the second, keeps its name while it refills many times
// over: a bucket without burst ("0 of 1 left, resets at 12:00:01") was
// taken for a window of one a second,
// which timing alone, each instant known to a round trip and two units of
// noise on a limit of one, refutes only after many seconds of probes.
// Delays (a reset of "1") name no window: a second's rounding of a delay
// from an answer moves with the answer. A reset on the Date's own second
// (0 from it: a server that rounds down, go-limiter's and httprate's, or
// one in the past) names a window only of a limit of one: several windows
// of a larger limit that end within a second share that name, as they share
// any other (see subSecond), and more than the limit under it would set
// such a window aside for a bucket it is not (TestShortWindowAfterBurst);
// a window of one, taken for a bucket of one, is paced alike. Without it,
// go-limiter's 1 per 100 ms, whose requests went at the start of each
// second, went at one a second for 4-5 s (TestLabelledOnTheDatesSecond).
func (p *policy) labelled(a *answer, o *ratelimit.Policy, cost int64) {
	if a.refused || !o.HasReset || !o.ResetAbsolute || a.date == 0 || o.Reset == 0 && p.limit > 1 || !p.limitSaid ||
		p.subSecond() && o.Reset%1e9 == 0 {
		return // (a window shorter than the second its resets are rounded to has several under one name)
	}
	switch e := a.date + int64(o.Reset); {
	case e == p.labE:
		p.labN += cost
	case e > p.labE:
		p.labE, p.labN = e, cost
	default:
		return // an older name, already passed
	}
	if p.labN > p.limit {
		if p.wCap > 0 {
			return // windows shorter than a second (shorter), several of which end under one
		}
		p.onlyBucket(p.alive, a.at)
	}
}

// closeAdmissions takes in an admission of a policy whose limit is within the noise
// of the instants (levelNoise), where timing weighed with that noise
// cannot refute a window: its request's span, from when it was sent to
// when its answer came, holds the instant the server counted it, whatever
// the round trip. More than twice the limit admitted within less than the
// shortest window the bounds allow is more than any fixed window (of any
// phase, or from a first request) or sliding counter admits there: two of
// their windows at most meet any such span, each admitting the limit; and
// more than the limit within less than the sliding log's window is more
// than it admits. Those candidates are set aside; the bucket stays.
func (p *policy) closeAdmissions(a *answer, cost int64) {
	if a.refused || !p.limitSaid || p.limit > levelNoise || cost != 1 || a.sent <= 0 || a.recv < a.sent {
		return
	}
	copy(p.adm[1:], p.adm[:len(p.adm)-1])
	p.adm[0] = bounds{a.sent, a.recv}
	span := func(n int64) int64 {
		lo, hi := int64(never), int64(0)
		for _, b := range p.adm[:n] {
			if !b.known() {
				return never
			}
			lo, hi = min(lo, b.lo), max(hi, b.hi)
		}
		return hi - lo
	}
	var out uint8
	if w := p.period.lo; w > 0 && span(2*p.limit+1) < w {
		out |= 1<<cWindow | 1<<cAnchored | 1<<cCounter
	}
	if w := p.logWindow(); w > 0 && span(p.limit+1) < w {
		out |= 1 << cLog
	}
	p.onlyBucket(out, a.at)
}

// admKeep is how many admissions closeAdmissions keeps: twice the most noise, and one.
const admKeep = 2*levelNoise + 1

// onlyBucket sets the candidates of cs but the bucket aside at now, where
// the bucket alone explains what was admitted (it is considered again if
// it was set aside).
func (p *policy) onlyBucket(cs uint8, now int64) {
	cs &= p.alive &^ (1 << cBucket)
	if cs == 0 {
		return
	}
	p.consider(cBucket)
	p.refute(cs, now)
}

// mayBeOlder reports whether an answer that found surplus more left than
// the newest, which only a window that ended between them explains as
// newer, may as well have been counted before the newest: its request went before the
// newest was counted, the client's units that can have been counted
// between them (those counted after it went, and those in flight then)
// cover the surplus, and no window candidate says for sure that its window
// ended by then. Both stories fit; the older one is the cautious one (it
// keeps the lower count), and costs a round trip at most when a window did
// end: the answers to requests sent after the newest tell. (On loopback,
// 64 workers' first burst, whose connections took up to 7 ms to open, came
// back out of order: an answer with 44 left after one with 36 was taken for
// a new window's, and 9 went into a spent quota.)
func (p *policy) mayBeOlder(a *answer, surplus int64) bool {
	if a.sent > p.obsAt {
		return false
	}
	for c := cWindow; c <= cAnchored; c++ {
		if b := p.win[c]; p.plausible()&(1<<c) != 0 && b.known() && b.hi <= a.at {
			return false // it ended by then
		}
	}
	between := p.own.sum(a.sent, p.obsAt) + a.k.inflightBy(p, p.obsAt)
	return surplus <= between
}

// refillBetween is the most a bucket can have refilled from t0 to t1, as
// far as the evidence goes: nothing when no bucket is plausible.
func (p *policy) refillBetween(t0, t1 int64) float64 {
	if p.plausible()&(1<<cBucket) == 0 || t1 <= t0 {
		return 0
	}
	return p.fastRate() * float64(t1-t0) / 1e9
}

// returnsBetween is the most of the quota that the candidates in the
// running say can have come back from the newest answer to a, which
// found r left with since units of the client's counted after the newest:
// all of it, where a window may have ended between and r is what a fresh
// one would show; what a sliding log counted a window before; a counter's
// share of a window's quota; a bucket's refill at the fastest rate the
// evidence allows.
func (p *policy) returnsBetween(a *answer, r, since int64) float64 {
	return p.returnsBetweenOf(a, r, since, true)
}

// returnsBetweenOf is returnsBetween, heeding the window candidates only
// when windows is set.
func (p *policy) returnsBetweenOf(a *answer, r, since int64, windows bool) float64 {
	t0, t1 := p.obsAt, a.at
	if t1 <= t0 {
		return 0
	}
	pl := p.plausible()
	most := 0.0
	for c := range nCand {
		if pl&(1<<c) == 0 {
			continue
		}
		switch candidate(c) {
		case cWindow, cAnchored:
			b := p.win[c]
			if windows && (!b.known() || b.lo <= t1) && float64(r) >= p.freshFloor(a, since) {
				return math.Inf(1)
			}
		case cLog:
			if w := p.logWindow(); w > 0 {
				most = max(most, float64(p.own.sum(t0-w, t1-w)+p.logF.sum(t0-w, t1-w)))
			} else {
				return math.Inf(1)
			}
		case cCounter:
			if w := p.period.hi; w > 0 {
				most = max(most, float64(p.limit)*float64(t1-t0)/float64(w)+1)
			} else {
				return math.Inf(1)
			}
		case cBucket:
			most = max(most, p.fastRate()*float64(t1-t0)/1e9)
		}
	}
	return most
}

// first takes in the first answer that said what was left of p: every
// candidate starts from it. What the server counted besides the request is
// booked, for the ledger-based candidates, at the answer's instant.
func (p *policy) first(a *answer, o *ratelimit.Policy, r, cost int64) {
	p.seen = true
	p.obsAt, p.obsRem = a.at, r
	p.bLevel, p.bAt = float64(r), a.at
	if prior := p.limit - r - cost; prior > 0 {
		p.logF.add(a.at, prior, p.quantum())
		p.ctrF.add(a.at, prior, p.quantum())
	}
	p.resetEvidence(a, o)
}

// check compares what each candidate predicted for the answer with what it
// said (r left at a.at), refuting those that it contradicts and booking, for
// those it shows too hopeful, what others must have spent.
func (p *policy) check(a *answer, r, prevAt, prevRem, since int64) {
	amb := p.ambiguous(a)
	// A refusal that only the counter's slack sent: its count, before
	// others' spending is booked for it below, left no whole unit.
	slackSent := a.refused && !a.probe && p.alive == 1<<cCounter &&
		p.counterCounted(a.at, cautious) > float64(p.limit-a.cost(p))
	var short [nCand]float64
	minShort := math.Inf(1)
	for c := range nCand {
		if p.alive&(1<<c) == 0 {
			continue
		}
		tol := p.tolerance(candidate(c), a, amb)
		pred := float64(p.limit) - p.countedForCheck(candidate(c), a.at, prevAt, prevRem, since)
		diff := float64(r) - pred
		if diff > float64(tol) {
			diff = p.explainSurplus(candidate(c), a, r, prevAt, prevRem, since, diff, tol)
			if diff > float64(tol) {
				p.refute(1<<c, a.at)
				continue
			}
		}
		if candidate(c) == cCounter && diff < 0 && p.period.hi > 0 && p.ctr.known() {
			// Of the phases the bounds allow, the one that counts the
			// most needs the least of others' spending.
			_, most := p.counterExtremes(a.at, p.period.hi)
			diff = min(float64(r)-(float64(p.limit)-most), 0)
		}
		if diff < 0 {
			short[c] = -diff
			minShort = min(minShort, -diff)
		} else {
			minShort = 0
		}
	}
	if a.refused && !a.probe && r == 0 {
		p.heedForeseen(&short, a.cost(p))
	}
	p.bucketRate(a, r)
	if p.alive&(1<<cCounter) != 0 && !a.refused && !p.counterNarrow(a.at, p.limit-r, p.tolerance(cCounter, a, amb)) {
		// No phase the bounds allow counts as little of the client's
		// own as the server did: they were not its windows' (the
		// resets did not point at boundaries), and any phase may be;
		// or, when any phase might have been, it is no counter.
		if p.phaseOpen() {
			p.refute(1<<cCounter, a.at)
		} else {
			p.ctr = bounds{a.at - p.period.hi, a.at}
		}
	}
	// What every candidate misses may be the client's own requests in
	// flight, counted before their answers: book them so.
	var mine int64
	p.booked = 0
	if !math.IsInf(minShort, 1) && minShort >= 1 {
		mine = min(int64(minShort), a.k.inflightBy(p, a.at)-p.early)
		if mine > 0 {
			p.early += mine
			p.booked = mine
			p.own.add(a.at, mine, p.quantum())
			p.ownCum += mine
		} else {
			mine = 0
		}
	}
	resetsFast := false
	if f := short[cBucket] - float64(mine); f >= 1 && p.rReset > p.rLo {
		// The bucket filled slower than its resets said: they meant
		// something else.
		p.rReset, resetsFast = 0, true
	}
	for c := range nCand {
		if p.alive&(1<<c) == 0 {
			continue
		}
		f := short[c] - float64(mine)
		p.score[c] *= scoreDecay
		if f < 1 {
			continue
		}
		p.score[c] += f
		n := int64(f)
		switch candidate(c) {
		case cLog:
			p.logF.add(a.at, n, p.quantum())
		case cCounter:
			p.ctrF.add(a.at, n, p.quantum())
		case cBucket:
			p.doubtRates(a, r, resetsFast)
		}
	}
	if slackSent {
		p.slackDoubted = a.at
	}
}

// doubtRates takes in a refusal (no probe's) that the bucket found short
// by a unit or more than the client's units in flight explain, r left,
// resetsFast saying whether the rate its resets imply (rReset) was what
// overstated its level. The refusal shows where the bucket's rate came
// from to be no bucket's:
//   - the rate the resets imply, for a revival period (resetsDoubted; see
//     resetsTrusted), once the answers measured a rate of the bucket's own
//     to fall back on (rLo): a fixed window shorter than a second, off the
//     server's seconds, writes resets rounded down to a second that say a
//     unit returns within what is left of the second, and each new answer
//     set again the rate a refusal had just refuted (go-limiter's 1 per
//     100 ms on loopback: paced at 63 ms, one refusal in three). (An
//     unmeasured bucket has no rate but its resets': a sliding counter
//     shared with another client, taken for one, was refused twice as
//     often without them, on seed 1 of the grid.)
//   - a bucket of one's rate measured exactly (rateNoise), for a revival
//     period (exactDoubted; nothing a key believes latches): such a window
//     lets two admissions on either side of its end pass for a bucket twice
//     its pace (go-limiter's 1 per 100 ms: 51-59 refused of 150, and
//     requests that failed). Its rate is measured with levelNoise meanwhile,
//     afresh from the anchors. A true bucket of one, its rate measured
//     exactly, is at least as full as the model says, and refuses a request
//     sent on time only when round trips reorder it.
//   - a small burst's rate and shape (smallBurst: a limit of 2 to 4), for a
//     revival period (exactDoubted again): a fixed window of 2 per 200 ms
//     whose resets say only that the quota returns within a second is
//     refuted as a window of a second, and the bucket of 2 left paces at
//     the windows' rate, which sends one unit half a refill after two and
//     is refused a third of the time (go-limiter's 2 per 200 ms: 34-48
//     refused of 100, and a request failed in most runs). Its rate is
//     measured again with 2×limit units of noise, as a window returns its
//     whole quota at once, and the search for a window shorter than a
//     second opens to it (shortOpen).
//
// TestDoubtRates pins the first two, TestSmallBurstWindow the third.
func (p *policy) doubtRates(a *answer, r int64, resetsFast bool) {
	if !a.refused || a.probe {
		return
	}
	if resetsFast && p.rLo > 0 {
		p.resetsDoubted = a.at // (check has zeroed rReset; resetEvidence keeps it so)
	}
	if p.smallBurst() || p.rateNoise(a.at) == 0 {
		fresh := !p.doubted(p.exactDoubted, a.at)
		p.exactDoubted = a.at
		if fresh {
			// Measured again from the anchors, with the noise the doubt
			// allows (rateNoise).
			p.rLo, p.rHi = 0, 0
			p.rateSince(a.at, r+p.ownCum, p.rateNoise(a.at))
		}
	}
}

// resetsTrusted reports whether the rate p's resets imply is taken at t:
// not within a revival period of a refusal that showed it too fast.
func (p *policy) resetsTrusted(t int64) bool { return !p.doubted(p.resetsDoubted, t) }

// heedForeseen takes in a refusal of a request that was no probe, short[c]
// being what each candidate c in the running said was left for it: when
// every candidate heeded said there was room, and some set aside by their
// scores said there was none, those are heeded again (their scores set to
// the best one's), and the next decisions wait for what they say or probe
// to tell them apart. A score sums the others' spending a candidate needs
// to explain the answers, and what the client cannot order misleads it: a
// sliding log, at the return of a burst whose requests reached the server
// together, needs what their unknown order hides, where a counter that
// counts more at that instant does not, and the counter heeded alone is
// then refused where the log was right. A refusal is the answer that says
// which of the two was. (It does not stop the next burst from setting the
// log aside again: see TestRefusalForeseenBySetAsideCandidate.)
func (p *policy) heedForeseen(short *[nCand]float64, cost int64) {
	var foresaw uint8
	for c := range nCand {
		if p.alive&(1<<c) != 0 && short[c] < float64(max(cost, 1)) {
			foresaw |= 1 << c
		}
	}
	if foresaw&p.plausible() != 0 {
		return // a candidate heeded foresaw it: the request went on older news
	}
	best := p.bestScore()
	for c := range nCand {
		if foresaw&(1<<c) != 0 {
			p.score[c] = best
		}
	}
}

// countedForCheck is what candidate c says the server counted at t, from
// the answer before (counted at prevAt, with prevRem left, since units of
// the client's counted after it) for the candidates that carry their state
// from answer to answer.
func (p *policy) countedForCheck(c candidate, t, prevAt, prevRem, since int64) float64 {
	switch c {
	case cWindow, cAnchored:
		if p.win[c].known() && t >= p.win[c].hi && prevAt < p.win[c].lo {
			return p.counted(c, t, cautious)
		}
		return float64(max(p.limit-prevRem, 0) + since)
	case cBucket:
		// The units since the last event: this answer's own, and those
		// counted since the newest answer but not yet in the level.
		return float64(p.limit) - (p.bucketLevel(t, p.rate(cautious)) - float64(since-p.since))
	case cCounter:
		return p.counted(cCounter+nCand, t, cautious)
	}
	return p.counted(c, t, cautious)
}

// tolerance is how many more units an answer may show left than candidate
// c predicted without contradicting it: the units whose order with it is
// uncertain (amb), those a sliding log returns so close to its instant
// that their order with it is uncertain too, and, for the candidates whose
// counts are fractions that servers round, one.
func (p *policy) tolerance(c candidate, a *answer, amb int64) int64 {
	switch c {
	case cLog:
		if w := p.period.hi; w > 0 {
			s := a.k.orderSlack()
			return amb + p.own.sum(a.at-w-s, a.at-w+s)
		}
		return amb
	case cCounter, cBucket:
		return amb + 1
	}
	return amb
}

// ambiguous returns how many of the client's units were counted so close
// to t that their order with it is uncertain: the answer may not include
// them although the ledger puts them before it.
func (p *policy) ambiguous(a *answer) int64 {
	return p.own.sum(a.at-a.k.orderSlack(), a.at-1)
}

// orderSlack is how far apart two instants at which the server is taken to
// have counted requests must be for their order to be trusted: half the
// spread of round trips, at least a millisecond (a coarse clock's tick).
func (k *keyState) orderSlack() int64 {
	return max(k.rtt-k.rttMin, 2e6) / 2
}

// explainSurplus tries to explain an answer that shows diff units more left
// than candidate c predicted, by what c's parameters allow (a window that
// ended sooner, others' spending that was not there, a faster refill), and
// returns what remains unexplained.
func (p *policy) explainSurplus(c candidate, a *answer, r, prevAt, prevRem, since int64, diff float64, tol int64) float64 {
	switch c {
	case cWindow, cAnchored:
		b := &p.win[c]
		early := b.known() && b.lo > a.at
		// During a search for a window shorter than a second (shorter,
		// which the fixed window, weighed first, begins), the bounds of a
		// window from a first request were a second's too.
		short := c == cAnchored && p.wCap > 0
		if early && !p.resetsUnreliable() && (c != cWindow && !short || float64(r) < p.freshFloor(a, since)) {
			return diff // the window cannot have ended yet
		}
		// The window ended since the answer before: a fresh one holds the
		// quota less some of the units counted since then, and little
		// that others spent.
		if float64(r) < p.freshFloor(a, since) {
			return diff
		}
		// It ended after the answer before and by this one, within its
		// bounds if they allow.
		lo, hi := prevAt+1, a.at
		if b.known() && b.lo <= hi && b.hi >= lo {
			lo, hi = max(lo, b.lo), min(hi, b.hi)
		}
		// A fixed window that ended before its bounds allowed may be
		// shorter than a second, where the answer found the whole quota
		// back (not the partial return of a bucket or a counter).
		whole := r != prevRem && p.whole(a, r, since) // (undescribed passes prevRem)
		if c == cWindow && !(whole && p.shorter(a, prevAt, early)) && early && !p.resetsUnreliable() {
			return diff // the window cannot have ended yet
		}
		if c == cAnchored {
			// The new one opened with the first unit after the end, at
			// the instant the ledger holds for it (the middle of its
			// round trip) or later by as much as its round trip exceeds
			// the least, halved: a unit that spent most of its round
			// trip on its way out (a new connection, a loaded client)
			// reached the server late, and its window ends as late. That
			// spread is this answer's own when it is the unit, or else
			// orderSlack; at most the least round trip (a connection's
			// handshakes) or orderSlack, since a round trip longer than
			// that is mostly the server's work, done after it counted
			// the request. (Taking the middle as exact made the bounds a
			// point: with one-sided lags of 10 ms in 20 ms round trips,
			// each window's first requests were sent to land a few ms
			// before it ended, 1-3% refused and 1.4-1.6x.)
			lo, hi = p.own.firstAfter(lo), p.own.firstAfter(hi)
			if hi >= a.at {
				hi = a.at + min(max(a.recv-a.sent-a.k.rttMin, 0)/2, max(a.k.rttMin, a.k.orderSlack()))
			} else {
				hi += a.k.orderSlack()
			}
		}
		if p.period.known() {
			*b = bounds{lo + p.period.lo, hi + p.period.hi}
			if c == cWindow && b.hi <= a.at {
				k := (a.at-b.hi)/p.period.hi + 1
				b.lo, b.hi = b.lo+k*p.period.lo, b.hi+k*p.period.hi
			}
		} else {
			*b = bounds{}
		}
		p.rolledAt = a.at
		return 0
	case cLog:
		return diff - float64(p.logF.takeOldest(int64(math.Ceil(diff))-tol))
	case cCounter:
		return diff - float64(p.ctrF.takeOldest(int64(math.Ceil(diff))-tol))
	case cBucket:
		// A faster refill explains it unless the bucket cannot hold it.
		spent := float64(since)
		if float64(r-tol)+spent > float64(p.limit) {
			return diff
		}
		return 0 // bucketRate measures it, over a span long enough
	}
	return diff
}

// bucketRate takes in the least refill rate the answers imply: the
// quota's cumulative level (what was left plus every unit of the client's
// counted by then) can only have grown by what returned, and others'
// spending or a full bucket only make it grow less. Measured over the
// longest span the anchors give, its noise (a unit either way at each end)
// matters least.
func (p *policy) bucketRate(a *answer, r int64) { p.bucketRateFrom(a, r, r) }

// bucketRateFrom is bucketRate for an answer after which at least lo and at
// most hi units were left: what it said, or, when it said nothing, none and
// the capacity.
func (p *policy) bucketRateFrom(a *answer, lo, hi int64) {
	// The level now, at least (the client's requests in flight may have
	// been counted already), and at each anchor, at most.
	noise := p.rateNoise(a.at)
	p.rateSince(a.at, lo+p.ownCum, noise)
	if a.refused && noise < levelNoise {
		// What a refusal leaves is less than its cost, not what it said
		// (none) exactly: too loose for the noise a small bucket allows.
		return
	}
	gap := max(int64(minRateSpan), p.period.hi/maxAnchors)
	if n := len(p.anchors); n == 0 || a.at-p.anchors[n-1].at >= gap {
		if n == maxAnchors {
			copy(p.anchors, p.anchors[1:])
			p.anchors = p.anchors[:n-1]
		}
		p.anchors = append(p.anchors, anchor{at: a.at, level: hi + p.ownCum + a.k.inflightAll(p)})
	}
}

// rateSince raises the bucket's least refill rate to what each anchor, a
// span long enough before at, says a level of now then implies, noise
// units aside.
func (p *policy) rateSince(at, now, noise int64) {
	for _, an := range p.anchors {
		if dt := at - an.at; dt >= minRateSpan {
			p.raiseRate(float64(now-an.level-noise) / (float64(dt) / 1e9))
		}
	}
}

// smallBurst reports whether p's limit is 2 to 2*levelNoise: a bucket of
// such a burst and a window of such a limit answer alike within the noise
// of the levels (see shortOpen).
func (p *policy) smallBurst() bool { return p.limit > 1 && p.limit <= 2*levelNoise }

// levelNoise is how many units a level measured between two answers may be
// off by: a unit either way at each end.
const levelNoise = 2

// rateNoise is the noise a rate measured from p's anchors at t allows:
// levelNoise, or none for a bucket of one (a capacity the server said) once
// the answers refuted every other candidate, unless a refusal showed the
// rate so measured too fast within a revival period (exactDoubted, see
// doubtRates): each admission leaves such a bucket empty, exactly, and two
// admissions a span apart show that a unit returned in it. (The full
// levelNoise held such a bucket's rate to a third of what the client sent,
// and the search for it to a tenth more per request. While a window of one a second still explains the answers, two
// admissions on either side of its end would make it a bucket faster than
// the window, whose probes, refused, refute it, and every revival of it
// again: a refusal a minute; TestRateNoise.) A bucket of two or more keeps
// levelNoise (one less cost a bucket of 2 at 50/s a quarter of its pace on
// round trips of 10-30 ms), and a burst of 2 to 4 twice its limit while
// doubted (a window's whole quota comes back at once: see doubtRates). A
// refusal, which leaves less than its cost, is no anchor while the noise
// is below levelNoise.
func (p *policy) rateNoise(t int64) int64 {
	if p.smallBurst() && p.doubted(p.exactDoubted, t) {
		return 2 * p.limit
	}
	if p.doubted(p.exactDoubted, t) || !p.limitSaid || p.limit > 1 || p.alive != 1<<cBucket {
		return levelNoise
	}
	return 0
}

// An anchor is an earlier answer a refill rate is measured from: when it
// was counted, and the most the quota's cumulative level can have been
// then: what was left, plus every unit of the client's counted by then,
// including those still in flight, which may have been.
type anchor struct {
	at, level int64
}

// maxAnchors bounds the anchors kept, one per sixteenth of a window at most;
// minRateSpan is the least span a rate is measured over. A rate measured
// over a window is off by two units per window at most: TestBucketRate
// pins both.
const (
	maxAnchors  = 16
	minRateSpan = 50e6
)

// raiseRate raises the bucket's least refill rate to r.
func (p *policy) raiseRate(r float64) {
	if r <= p.rLo {
		return
	}
	p.rLo = r
	if p.rHi > 0 && p.rHi < p.rLo {
		p.rHi = 0 // the refusals that bounded it were others' doing
	}
}

// freshFloor is the least a window that ended since the answer before
// can show left at a.at: the quota, less the client's units counted
// since then (those answered, and those in flight that may have arrived),
// less one, and a little that others spent. The units counted so close to
// a.at that their order with it is uncertain do not lower it further: those
// answered are either among since or were taken as counted before the
// newest answer, in the window that ended. (Taking them off as well let a
// burst that the server counted in the reverse of the order it was sent,
// and answered in order, pass its older answers for a fresh window's: on
// loopback, 16 of 24 requests refused at the first window.)
func (p *policy) freshFloor(a *answer, since int64) float64 {
	mine := since + max(a.k.inflightBy(p, a.at)-p.early, 0)
	return float64(p.limit-mine-1) - p.scoreSlack()
}

// whole reports whether an answer that found r left, since units of the
// client's counted after the newest answer, found a fresh window's whole
// quota: freshFloor without the slack it allows for others' spending.
func (p *policy) whole(a *answer, r, since int64) bool {
	return float64(r) >= p.freshFloor(a, since)+p.scoreSlack()
}

// settleWindows takes in an answer counted after a window candidate's
// bounds say its window ended: a fresh window's count moves the bounds to
// the next window's end; an old window's count says it had not ended.
func (p *policy) settleWindows(a *answer, r, since int64) {
	fresh := float64(r) >= p.freshFloor(a, since)
	for c := cWindow; c <= cAnchored; c++ {
		b := &p.win[c]
		if !b.known() || b.hi > a.at {
			continue
		}
		if fresh {
			if c == cWindow && p.whole(a, r, since) {
				p.shorter(a, p.obsAt, false) // an end shown where it was due
			}
			p.rollWindow(c, a.at)
			p.rolledAt = a.at
			continue
		}
		b.lo = a.at
		b.hi = a.at + max(p.period.hi, 1e9)
	}
}

// rollWindows moves each window candidate's bounds past the windows that
// ended by t.
func (p *policy) rollWindows(t int64) {
	for c := cWindow; c <= cAnchored; c++ {
		p.rollWindow(c, t)
	}
	if p.guess != 0 && p.guess <= t && p.period.known() {
		p.guess += (t-p.guess)/p.period.lo*p.period.lo + p.period.lo
	}
}

// rollWindow moves candidate c's bounds past the windows that ended by t.
func (p *policy) rollWindow(c candidate, t int64) {
	{
		b := &p.win[c]
		for b.known() && b.hi <= t {
			if !p.period.known() {
				*b = bounds{}
				break
			}
			if c == cAnchored {
				// The next window opened with the first unit to arrive
				// after the end.
				lo, hi := p.own.firstAfter(b.lo), p.own.firstAfter(b.hi)
				if hi == never || hi > t {
					*b = bounds{}
					break
				}
				*b = bounds{lo + p.period.lo, hi + p.period.hi}
				continue
			}
			*b = bounds{b.lo + p.period.lo, b.hi + p.period.hi}
		}
	}
}

// prune forgets what no candidate needs any more: units counted more than
// two windows ago (the counter's horizon).
func (p *policy) prune() {
	w := p.period.hi
	if w <= 0 {
		return
	}
	before := p.obsAt - 2*w - int64(maxWindowSlack)
	p.own.prune(before)
	p.logF.prune(before)
	p.ctrF.prune(before)
}

// maxWindowSlack is what prune keeps beyond two windows.
const maxWindowSlack = 1e9

// resetsUnreliable reports that the server's resets contradicted the
// windows' bounds more often than they held.
func (p *policy) resetsUnreliable() bool { return p.resets > 2 }

// undescribed takes in an answer that did not say what was left of p: an
// admission says it had room; a refusal may be another quota's.
func (p *policy) undescribed(a *answer) {
	if a.refused {
		return
	}
	cost := a.cost(p)
	if p.seen && a.at >= p.obsAt {
		// Admitted: every candidate must have had room for it.
		amb := p.ambiguous(a)
		for c := range nCand {
			if p.alive&(1<<c) == 0 {
				continue
			}
			tol := p.tolerance(candidate(c), a, amb)
			room := float64(p.limit) - p.countedForCheck(candidate(c), a.at, p.obsAt, p.obsRem, p.since)
			short := float64(cost) - room
			if short <= float64(tol) {
				continue
			}
			if candidate(c) == cBucket {
				continue // the bucket's rate is measured below
			}
			if p.explainSurplus(candidate(c), a, p.obsRem, p.obsAt, p.obsRem, p.since, short, tol) > float64(tol) {
				p.refute(1<<c, a.at)
			}
		}
	}
	if p.seen && a.at > p.obsAt {
		p.since += cost
	}
	p.own.add(a.at, cost, p.quantum())
	p.ownCum += cost
	p.lastAdmit = max(p.lastAdmit, a.at)
	p.probeTokens = min(p.probeTokens+probeShare, probeBurst)
	if p.seen {
		// The bucket had the request's cost: its level after it is at
		// least none, and what it held is at least what it spent over
		// a span, less its capacity.
		p.bLevel = max(p.bucketLevel(a.at, p.rate(cautious))-float64(cost), 0)
		p.bAt = max(p.bAt, a.at)
		p.bucketRateFrom(a, 0, p.limit)
	}
}

// notEnded takes in a refusal that p's quota was spent at a.at: a window
// that had room by its bounds had not ended then; Retry-After bounds when
// it does.
func (p *policy) notEnded(a *answer) {
	for c := cWindow; c <= cAnchored; c++ {
		b := &p.win[c]
		if !b.known() && a.ra > 0 {
			// Nothing bounded the window's end yet: the server says
			// it ends by its Retry-After.
			*b = bounds{a.at, a.recv + a.ra}
			continue
		}
		if !b.known() || b.lo > a.at {
			continue
		}
		ended := b.hi <= a.at
		b.lo = a.at
		if c == cWindow && ended && p.alignedUntil <= a.at {
			// The server's seconds did not end it: its windows are not
			// on its clock, for a while.
			p.alignedUntil = a.at + p.revivePeriod()
		}
		if b.hi <= b.lo {
			b.hi = b.lo + max(a.ra, 1e9)
		}
	}
}

// resetEvidence takes in what an answer's reset and Retry-After say of
// when the quota returns: where a window ends, how fast a bucket refills.
func (p *policy) resetEvidence(a *answer, o *ratelimit.Policy) {
	if !o.HasReset {
		return
	}
	lo, hi := p.resetBounds(a, o)
	if hi <= 0 {
		return
	}
	if o.HasRemaining && o.Remaining < p.limit && !a.refused {
		// A bucket's reset is when it is full again: a rate to start
		// from, until answers measure one (bucketRate) or show it wrong.
		// Each answer bounds the rate: what is missing over the latest
		// and the earliest the reset allows, or, if the server rounds
		// what is left down, a unit less over the latest. The resets
		// imply the least rate the bounds of every answer allow, taking
		// them as exact while they agree, as rounded down when only
		// that makes them agree. When nothing does (a window's reset
		// keeps its instant while what is missing grows), they are no
		// bucket's: the bucket is refuted, and its bounds start again.
		m := float64(p.limit - o.Remaining)
		if slo, shi := float64(lo-a.at)/1e9, float64(hi-a.at)/1e9; shi > 0 {
			p.rExact = max(p.rExact, m/shi)
			p.rFloor = max(p.rFloor, (m-1)/shi)
			if slo > 0 && (p.rUpper == 0 || m/slo < p.rUpper) {
				p.rUpper = m / slo
			}
			switch {
			case p.rUpper == 0 || p.rExact <= p.rUpper:
				p.rReset = p.rExact
			case p.rFloor <= p.rUpper:
				p.rReset = p.rFloor
			default:
				p.rReset, p.rExact, p.rFloor, p.rUpper = 0, 0, 0, 0
				if p.alive&(1<<cBucket) != 0 {
					p.refute(1<<cBucket, a.at)
				}
			}
			if !p.resetsTrusted(a.at) {
				p.rReset = 0 // a refusal showed it too fast (doubtRates)
			}
		}
	}
	p.rollWindows(a.at)
	for c := cWindow; c <= cAnchored; c++ {
		b := &p.win[c]
		nb := bounds{lo, hi}
		switch {
		case !b.known():
			*b = nb
		case nb.hi < b.lo || nb.lo > b.hi:
			// The reset points elsewhere than the window's end: the
			// server's resets are not a window's, or the bounds were wrong.
			p.resets++
			*b = nb
		default:
			b.lo, b.hi = max(b.lo, nb.lo), min(b.hi, nb.hi)
			if p.resets > 0 {
				p.resets--
			}
		}
	}
	p.anchoredStart(a, o)
	if p.alignedUntil <= a.at {
		p.aligned(a, o)
	}
	p.counterPhase(lo, hi)
	if p.said == 0 && (o.Reset > 0 || o.ResetAbsolute && a.date != 0) {
		// (An instant in the Date's own second too: go-chi/httprate's
		// windows, off the second, end in it for part of each window,
		// and a first burst that met only those answers left the window
		// unknown, and the key to its probe trickle, 8 s.)
		p.learnPeriod(a, o, lo, hi)
	}
}

// anchoredStart takes in an admission that was the first unit of its
// window (what is left is the limit less its own cost): a window that
// starts at its first request (cAnchored) started when it arrived, so that
// it may end a period at its shortest later (anchoredEnd), which a probe
// tests, where a reset in whole seconds (express-rate-limit's default
// headers round it up) says up to a second or two later.
func (p *policy) anchoredStart(a *answer, o *ratelimit.Policy) {
	if a.refused || !o.HasRemaining || p.alive&(1<<cAnchored) == 0 {
		return
	}
	if cost := a.cost(p); cost > 0 && o.Remaining == p.limit-cost {
		p.anchorAt = a.at
	}
}

// learnPeriod takes in what a reset says of the window's length when the
// server does not say it: a reset is at most a window away, and one that
// comes right after the client's own unit (a sliding log's, whose reset is
// when its newest unit returns) is the window itself. The delay is
// measured from when the server counted the request (an instant against
// the Date, its clock's offset taken into account); in whole seconds, the
// window is taken to be whole seconds too, as servers configure them: at
// least the delay (rounded down, when it is whole seconds), at most
// rounded up, the longest seen of each.
//
// A window's or a counter's reset points at a boundary: where answers
// counted later point at another, the two are a whole number of windows
// apart, and the least such jump seen, beyond the resets' precision, is
// the window, whatever the server takes its reset to mean (the end of
// this window, or of the next, when its count is gone). Unless it is half
// again the longest delay to a reset or more: then the resets were more
// than a window apart (a window that opens with the first request after
// the last one ended, after the client left it idle; or a window nobody
// used between two), and the delays say the window. (ulule/limiter's
// window, from a first request, with resets in whole seconds: a jump of 2
// s after an idle spell was taken for the window, and the client waited
// two seconds a window: 300 requests at 50 per second took 7.7-16.6 s.)
func (p *policy) learnPeriod(a *answer, o *ratelimit.Policy, rlo, rhi int64) {
	reset := int64(o.Reset)
	d := reset
	if o.ResetAbsolute && a.date != 0 && a.k.clock.known {
		d = a.date + reset - (a.at - a.k.clock.mid())
	}
	lo, hi := d, max((d+1e9-1)/1e9*1e9, 1e9)
	if reset%1e9 == 0 {
		lo = max(floorDiv(d, 1e9)*1e9, 1e9)
	}
	if lo > 1e9 && p.wCap > 0 {
		p.endShort() // a reset more than a second away: no window shorter than one
	}
	p.logW = max(p.logW, lo)
	if o.ResetAbsolute && a.date != 0 {
		// An instant on the server's clock is exact to its precision:
		// its jumps are whole windows.
		e := a.date + reset
		if p.lastE != 0 && e > p.lastE && a.at >= p.obsAt {
			if jump := e - p.lastE; p.jump == 0 || jump < p.jump {
				p.jump = jump
			}
		}
		if a.at >= p.obsAt {
			p.lastE = e
		}
	} else if prev := p.lastReset; prev.known() && a.at >= p.obsAt && rlo > prev.hi {
		gran := int64(1e6)
		if reset%1e9 == 0 {
			gran = 1e9
		}
		jump := (rlo + rhi - prev.lo - prev.hi) / 2
		jump = max((jump+gran/2)/gran*gran, gran)
		if p.jump == 0 || jump < p.jump {
			p.jump = jump
		}
	}
	if a.at >= p.obsAt {
		p.lastReset = bounds{rlo, rhi}
	}
	if p.jump > 0 && float64(p.jump) < maxJumpOverDelay*float64(p.logW) {
		p.period = bounds{p.jump, p.jump}
		p.capPeriod()
		return
	}
	// No jump, or one much longer than the longest delay to a reset: the
	// resets seen were more than a window apart (a window that starts
	// with the first request after the last one ended, whose resets are
	// as far apart as the client left it idle, or a window nobody used
	// between two): the window is what the delays say.
	if p.jump > 0 && p.period.lo == p.jump && p.period.hi == p.jump {
		p.period = bounds{}
	}
	up := p.logW
	if reset%1e9 == 0 {
		up = (up + 1e9 - 1) / 1e9 * 1e9
	}
	p.period = bounds{max(p.period.lo, lo, p.logW), max(p.period.hi, hi, up)}
	p.capPeriod()
}

// countCap bounds the window by counting the client's own admissions, for a
// server that does not say its window and whose resets, in whole seconds,
// say it ends within a second: the window is then taken to be a second
// long, as servers configure them, unless the admissions show it shorter
// (go-chi/httprate's window of 100 ms and sethvargo/go-limiter's interval
// of 100 ms, 5 a window, each writing its reset to the second). No window
// of length w admits more than its limit L in each of the windows that meet
// a span s, at most s/w + 2 of them, whatever their phase, whether they
// open on the clock or at a first request, and neither a sliding counter
// (each of its windows counts at most L) nor a sliding log admits more: N
// admissions within s mean w < s L / (N - 2L). The span runs from the first
// unit counted within the last second to this answer, widened by a round
// trip at each end, since each unit was counted somewhere between its
// sending and its answer. Others' spending only lowers what the client was
// admitted.
func (p *policy) countCap(a *answer) {
	if !p.shortOpen(a.at) || p.period.hi <= 0 {
		return
	}
	if len(p.own.e) >= maxLedger {
		return // squeezed: merged units take the later instant, and the span would be short
	}
	first := p.own.firstAfter(a.at - 1e9)
	if first == never || first > a.at {
		return
	}
	n := p.own.sum(first-1, a.at)
	if n <= 2*p.limit {
		return
	}
	s := a.recv - first + 2*a.k.rtt
	w := int64(float64(s) * float64(p.limit) / float64(n-2*p.limit))
	if w <= 0 || w >= p.period.hi || p.wCap > 0 && w >= p.wCap {
		return
	}
	if p.wCap == 0 {
		p.beginShort(w, a.at)
		return
	}
	p.wCap = w
	p.capPeriod()
}

// beginShort begins, at now, a search for a window shorter than a second,
// at most w long (see shorter). The fixed window, when it was refuted
// within the last second (its count surpassed sooner than a window of a
// second allowed), is considered again with its new bounds. (Bringing back
// every candidate so refuted held the grid's sliding counters and buckets
// of 5 per 100 ms to 1.2-2.2x where they were at 1.0-1.4x.)
func (p *policy) beginShort(w, now int64) {
	p.wCap = w
	p.capPeriod()
	if p.alive&(1<<cWindow) == 0 && now-p.refuted[cWindow] <= 1e9 {
		p.consider(cWindow)
	}
}

// shorter takes in an answer that found the whole quota back, the first of
// a fresh fixed window, which ended after the answer before (counted at
// prevAt); early says the window's bounds did not allow it to end yet (the
// candidate is then refuted unless shorter says otherwise). It reports
// whether a window shorter than a second explains it.
//
// Where p's window may be one (shortOpen: resets in whole seconds that say
// it ends within one), each end shown is kept (pEnd), and once one came
// early, or more were admitted within a second than any window of a second
// admits (countCap), the window's length is searched for between wLo and
// wCap instead of taken for a second (and labelled no longer takes more
// admitted under one reset than the limit for a bucket's): two ends shown
// one after the other are at most the span from the answer before the
// earlier to the later apart (wCap, with a round trip for the instants'
// uncertainty); an answer counted in the window that the newest end opened
// says the next had not come when it was sent (wLo, notShorter); and the
// last unit of each window waits for the middle of the bounds on its end
// (reserveEnd), so that the bounds close in at no risk of a refusal.
// (go-chi/httprate with a window of 100 ms, sethvargo/go-limiter with an
// interval of 100 ms, each writing its resets to the second and rounding
// them down: the window of a second that the resets suggest was refuted
// when it refilled ten times in one, and a bucket alone paced, refused a
// sixth of the requests, or it stood and paced at a tenth of the rate,
// 9.1-9.7x on loopback.)
func (p *policy) shorter(a *answer, prevAt int64, early bool) bool {
	if !p.shortOpen(a.at) || p.period.hi <= 0 {
		return false
	}
	prev := p.pEnd
	p.pEnd = bounds{prevAt, a.at}
	if p.wCap == 0 {
		if !early {
			return false
		}
		p.beginShort(p.period.hi, a.at)
	}
	if prev.known() && prevAt >= prev.hi {
		// The answer before this one was counted after the one that
		// showed the end before (in the window it opened), so the two
		// ends differ; each answer was counted within its round trip.
		// (Requiring the instants ordered beyond their uncertainty,
		// orderSlack, kept the bounds wide: a sliding log of the grid was
		// refused 53 times in 353 where it was 8.)
		p.wCap = min(p.wCap, a.recv-prev.lo+a.k.rtt)
	}
	p.capPeriod()
	return true
}

// notShorter takes in an answer that found r left, since units of the
// client's counted after the newest answer, where p's window may be
// shorter than a second (see shorter): refused, or short of a fresh
// window's quota, it was counted in the window that the newest end shown
// opened, so the next end had not come when it was sent (wLo). During a
// search that bounds the window; before one, how long a window the last
// unit held back has tested (reserveShort).
func (p *policy) notShorter(a *answer, r, since int64) {
	e := p.pEnd
	if !p.shortOpen(a.at) || !e.known() || p.rolledAt > e.hi || p.alive&(1<<cWindow) == 0 {
		return // no window shorter than a second, or the window rolled since the newest end shown (a partial return)
	}
	if a.refused && r != 0 || !a.refused && float64(r) >= p.freshFloor(a, since) {
		return // another policy's refusal, or a fresh window
	}
	if p.wCap == 0 && a.k.inflightAll(p) > 0 {
		// Before a search, the bound says how long a window the last
		// unit tested (reserveShort), and only an answer with nothing of
		// the client's in flight gives it: a burst's answers come back
		// in any order, and on loopback one counted in a fresh window,
		// short of its quota by the others', came back first and took
		// the window for a second long for good.
		return
	}
	// The end shown was at most a round trip after its answer's instant.
	most := p.wCap
	if most == 0 {
		most = 1e9 // a window of a second at most, or the answer misled
	}
	if lo := a.sent - e.hi - a.k.rtt; lo > p.wLo && lo < most {
		p.wLo = lo
		p.capPeriod()
	}
}

// capPeriod holds the window's bounds, and the sliding log's, to those a
// search for a window shorter than a second found (see shorter).
func (p *policy) capPeriod() {
	if p.wCap <= 0 {
		return
	}
	if p.said > 0 {
		p.endShort() // the server says its window
		return
	}
	if p.wLo >= p.wCap {
		// The bounds crossed: the lower one misled (another client's
		// spending, an answer counted in a window after the one the
		// newest end opened); the upper one, from what was admitted,
		// stands, and the lower one is found again.
		p.wLo = 0
	}
	p.period = bounds{min(max(p.wLo, minShortWindow), p.wCap), p.wCap}
	p.logW = min(p.logW, p.wCap)
}

// endShort ends a search for a window shorter than a second; the resets
// bound the window again (learnPeriod).
func (p *policy) endShort() { p.wCap, p.wLo, p.pEnd = 0, 0, bounds{} }

// maxJumpOverDelay is how much longer than the longest delay to a reset a
// jump between resets may be and still be the window: the longest delay
// falls short of the window by how long after a window opened the client's
// first request in it was counted (a fraction of it, at 50 per second and
// more), while a jump across an idle spell or an unused window is a whole
// window longer or more.
const maxJumpOverDelay = 1.5

// counterPhase takes in where the counter's windows start: at the instant
// a reset points at (lo, hi), within its precision, whatever the reset
// counts to (the end of this window or the next), when that is narrower
// than what the answers narrowed them to (counterNarrow). It is not taken
// from the server's Date: many counters' windows start on its clock's
// seconds, but not all (go-chi/httprate's start when the limiter starts),
// and a phase assumed wrong made the counter's own refusals refute it.
func (p *policy) counterPhase(lo, hi int64) {
	if p.period.hi <= 0 {
		return
	}
	if !p.ctr.known() || p.ctr.hi-p.ctr.lo > hi-lo {
		p.ctr = bounds{lo, hi}
	}
}

// resetBounds returns the instants, in the client's clock, between which
// the reset o gave lies. A reset in whole seconds is rounded: a delay up
// from when the server answered, an instant either way on the server's
// clock.
func (p *policy) resetBounds(a *answer, o *ratelimit.Policy) (lo, hi int64) {
	reset := int64(o.Reset)
	gran := int64(1e6)
	if reset%1e9 == 0 {
		gran = 1e9
	}
	if o.ResetAbsolute && a.date != 0 {
		c := &a.k.clock
		at := a.date + reset
		if !c.known {
			return at - gran + a.recv - a.date - 1e9, at + gran + a.recv - a.date
		}
		return at - gran + c.lo, at + gran + c.hi
	}
	return a.sent + reset - gran, a.recv + reset
}

// aligned takes the server's Date as a guess of where a window ends, for a
// window of whole seconds on the server's clock, as most are: the reset,
// read against the Date, lies within its precision of the end, in the
// server's time, and the end is the only multiple of the window there. It
// is taken in the client's time with the clocks taken to agree unless
// their bounds say otherwise (see offset.guess), and a margin for the
// request to land after it. The guess is what a probe tests (see
// windowEnd): it is not trusted until an answer confirms it.
func (p *policy) aligned(a *answer, o *ratelimit.Policy) {
	c := &a.k.clock
	w := p.period.hi
	if a.date == 0 || !c.known || w <= 0 || w%1e9 != 0 || p.period.lo != w || !o.HasReset {
		return
	}
	reset := int64(o.Reset)
	gran := int64(1e9)
	if reset%gran != 0 {
		gran = 1e6
	}
	at := a.date + reset // the server's end, give or take gran
	first := floorDiv(at-gran, w)*w + w
	if first >= at+gran || first+w < at+gran {
		return // none, or more than one
	}
	p.guess = first + c.guess() + alignMargin
}

// alignMargin is added to a window's end guessed from the server's Date, so
// that the request that tests it lands after it.
const alignMargin = 2e6

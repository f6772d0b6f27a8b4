package pace

import (
	"math"

	"github.com/headway-go/headway/ratelimit"
)

// policy is one of the server's quotas as a key knows it: what answers said
// of it, the client's own units it counted (the ledger), and the
// candidate servers still consistent with both (see the package doc).
type policy struct {
	// bucket is the server-named bucket the quota belongs to ("" for the
	// key's own); name, unit and said (the window the server gave, in
	// nanoseconds) tell it from the bucket's other quotas.
	bucket string
	name   string
	unit   ratelimit.Unit
	said   int64

	// limit is the quota's capacity: the server's limit (limitSaid), or,
	// when it gave none, one more than the most it said was left.
	limit     int64
	limitSaid bool
	// seen reports that an answer said what was left of it; obsAt is the
	// instant the newest such answer was counted at (see arrival), obsRem
	// what it said was left.
	seen   bool
	obsAt  int64
	obsRem int64
	// rolledAt is the instant of the newest answer that showed a window's
	// end: answers counted before it are from the window before.
	rolledAt int64
	// since counts the client's units counted after that answer; early
	// those of its requests still in flight that answers showed counted;
	// booked those that the newest answer showed counted before it.
	since, early, booked int64
	// last is when an answer last spoke of it, by the client's clock.
	last int64
	// own holds the client's admitted units; logF and ctrF the spending
	// of others that the sliding log and counter had to assume.
	own, logF, ctrF ledger

	// alive is the set of candidates not refuted; refuted says when each
	// was; score is the spending by others (units, decayed) each needed to
	// explain the answers.
	alive   uint8
	refuted [nCand]int64
	score   [nCand]float64

	// period bounds the window's length (nanoseconds), 0 when unknown;
	// logW is the sliding log's; jump is the least distance seen between
	// the instants that resets point at (see learnPeriod), and lastReset
	// the newest answer's.
	period bounds
	logW   int64
	jump   int64
	// wCap and wLo bound a window shorter than the second that resets in
	// whole seconds are rounded to (see shorter), once the answers showed
	// one (0: none known); before that, wLo is how long a window the
	// tests of reserveShort showed it to be at least. pEnd is where the
	// newest end of the fixed window lies that an answer showed with the
	// whole quota back.
	wCap, wLo int64
	pEnd      bounds
	lastReset bounds
	lastE     int64 // the newest answer's reset on the server's clock, when it was an instant
	// labE is the newest reset instant on the server's clock that an
	// admitted answer gave, labN the units admitted under it (see
	// labelled); adm holds the newest admissions' requests, from when each
	// was sent to when its answer came, newest first (see closeAdmissions); and
	// countRefused is when a probe of either count was last refused (see
	// countProbe).
	labE, labN   int64
	adm          [admKeep]bounds
	countRefused int64
	// win bounds the end of the current window for each window candidate
	// (indexes cWindow and cAnchored); ctr a boundary of the counter's
	// windows.
	win [2]bounds
	ctr bounds
	// guess is where the fixed window is guessed to end from the server's
	// Date (see aligned), 0 when it is not.
	guess int64
	// anchorAt is when the first unit of the newest window the client saw
	// open arrived (see anchoredStart), 0 when none.
	anchorAt int64
	// bLevel is the bucket's level at bAt, the last event it took in:
	// the newest answer's remaining, less the client's units since.
	bLevel float64
	bAt    int64
	// rLo and rHi bound the bucket's refill rate, in units per second (rHi
	// 0: no upper bound known), as answers measured it; rReset is the rate
	// its resets imply, taken until answers show it wrong (and, for a
	// while, after a refusal did: resetsDoubted).
	rLo, rHi, rReset float64
	// rExact, rFloor and rUpper are the bounds on the refill rate that
	// the resets imply, read as a bucket's time until full (see
	// resetEvidence): the least with what is left exact, the least with
	// it rounded down, and the most (0: none yet).
	rExact, rFloor, rUpper float64
	// resetsDoubted is when a refusal last showed the rate the resets
	// imply too fast, and exactDoubted when one last showed the bucket's
	// own rate to be no bucket's: a bucket of one's, measured exactly, or
	// a small burst's, which a window returns whole (0: never; see
	// doubtRates).
	resetsDoubted, exactDoubted int64
	// slackDoubted is when a refusal (no probe's) last came, while the
	// sliding counter was the one candidate left, that only its slack had
	// sent (its count left no whole unit): the slack is off for a revival
	// period after (see counterSlack; 0: never).
	slackDoubted int64

	// probe is the lease sent to test the candidates in probeFor, which
	// alone said it would be admitted (0: none in flight).
	probe       uint64
	probeTokens float64 // see probeShare
	trickled    int64   // when trickle last earned
	lastAdmit   int64   // when a unit of the client's was last admitted
	// regret is how long, since the last probe, the cautious candidate
	// alone held the client back while another said it had room (the
	// measure of the union of those spans, which end at regretTo): many
	// small delays, each worth less than a refusal, add up to one.
	regret, regretTo int64
	probeFor         uint8
	probeParam       uint8 // of probeFor, those whose cautious view said no
	// resets counts the answers whose reset contradicted the windows'
	// bounds, less those whose reset agreed.
	resets int
	// alignedUntil is when a refusal last showed the server's windows not
	// on its clock's seconds, plus how long that holds.
	alignedUntil int64
	// ownCum counts every unit of the client's the quota admitted;
	// anchors are earlier answers its refill rate is measured from.
	ownCum  int64
	anchors []anchor
}

func newPolicy(bucket string, o *ratelimit.Policy) policy {
	p := policy{bucket: bucket, name: o.Name, unit: unitOf(o.Unit), said: int64(o.Window), alive: allCandidates, probeTokens: probeBurst}
	if o.Window > 0 {
		p.period = bounds{int64(o.Window), int64(o.Window)}
		p.logW = int64(o.Window)
	}
	return p
}

// unitOf is u, with "" read as requests.
func unitOf(u ratelimit.Unit) ratelimit.Unit {
	if u == "" {
		return ratelimit.UnitRequests
	}
	return u
}

// matches reports whether o describes p.
//
// Policies the server does not name are told apart by their window, and,
// without one, by their limit: where stacked limiters write the same
// headers, a 429 describes the one that refused and the other answers the
// looser one, and both go on counting (see the package doc).
func (p *policy) matches(bucket string, o *ratelimit.Policy) bool {
	w := int64(o.Window)
	if p.bucket != bucket || p.name != o.Name || p.unit != unitOf(o.Unit) {
		return false
	}
	if p.said != 0 && w != 0 {
		return p.said == w
	}
	return o.Name != "" || !o.HasLimit || !p.limitSaid || p.limit == o.Limit
}

// quantum is how close two of the ledger's entries may be before they
// merge: only entries at one instant do, so that the ledger's instants
// stay those of the answers (a refill rate is measured from them); a full
// ledger merges its closest pair (see maxLedger).
func (p *policy) quantum() int64 { return 1 }

// plausible returns the candidates a decision heeds: those not refuted
// whose score is within scoreSlack of the best one's.
func (p *policy) plausible() uint8 {
	best := p.bestScore()
	slack := p.scoreSlack()
	var out uint8
	for c := range nCand {
		if p.alive&(1<<c) != 0 && p.score[c] <= best+slack {
			out |= 1 << c
		}
	}
	return out
}

// bestScore returns the least score of the candidates not refuted.
func (p *policy) bestScore() float64 {
	best := math.Inf(1)
	for c := range nCand {
		if p.alive&(1<<c) != 0 {
			best = min(best, p.score[c])
		}
	}
	return best
}

// scoreSlack is how much more spending by others than the best candidate
// a candidate may need and still be heeded: two units, or a tenth of the
// quota. Others' spending is common to every candidate, so it is the
// difference that tells them apart. TestSpendingByOthers pins it.
func (p *policy) scoreSlack() float64 { return max(2, float64(p.limit)/10) }

// scoreDecay is what a candidate's score is multiplied by at each answer:
// evidence from a few dozen answers ago fades.
const scoreDecay = 0.9

// refute sets candidates cs aside at now (server instant).
func (p *policy) refute(cs uint8, now int64) {
	for c := range nCand {
		if cs&(1<<c) != 0 {
			p.refuted[c] = now
		}
	}
	if p.alive&^cs == 0 {
		// Every explanation would have failed: the evidence misled, or
		// the server changed. The last one stands until another is
		// considered again (see revive), and it is taken less certainly.
		cs &^= p.alive & -p.alive // keep one
	}
	p.alive &^= cs
}

// reconsider considers every refuted candidate again at once: the one left
// in the running was refused where it said there was room (no probe), so the
// evidence that refuted the others may have misled. (On loopback, the answers
// to a first burst on new connections came back out of the order the server
// counted them and refuted ulule's fixed window; the bucket left alone, its
// refill measured from the window's jumps at 48/s, was refused every 20 ms
// for the rest of the window, and requests failed.)
func (p *policy) reconsider() {
	for c := range nCand {
		p.consider(candidate(c))
	}
}

// consider brings candidate c back into the running, with no score, if it
// was set aside.
func (p *policy) consider(c candidate) {
	if p.alive&(1<<c) == 0 {
		p.alive |= 1 << c
		p.score[c] = 0
	}
}

// reconsiderSlacks is how many scoreSlacks of others' spending the one
// candidate left must already need before a refusal it did not foresee
// brings the others back: past what any candidate is let to need, so that
// one refusal from others' spending (another client on the quota) does not
// undo what the evidence settled. Without the gate, the grid's cells with
// another client spending 30% of the quota were refused up to twice as
// often.
const reconsiderSlacks = 2

// revive considers again the candidates refuted long enough ago: nothing a
// key believes latches.
func (p *policy) revive(now int64) {
	after := p.revivePeriod()
	for c := range nCand {
		if now-p.refuted[c] > after {
			p.consider(candidate(c))
		}
	}
}

// revivePeriod is how long what the answers refuted stays refuted (see
// revive).
func (p *policy) revivePeriod() int64 { return max(reviveWindows*p.period.hi, int64(reviveFloor)) }

// doubted reports whether a rate a refusal refuted at since (0: never) is
// still refuted at t: within a revival period of it.
func (p *policy) doubted(since, t int64) bool { return since != 0 && t-since <= p.revivePeriod() }

// A refuted candidate is considered again after reviveWindows of the
// policy's windows, and at least reviveFloor: often enough that a server
// that changes is followed, rarely enough that a candidate refuted by a
// probe's refusal costs at most one refusal in that long.
// TestRefutedCandidateRevives pins it.
const (
	reviveWindows = 64
	reviveFloor   = 60e9
)

// Probes are budgeted like retries: each admitted answer earns probeShare
// of a probe, up to probeBurst, and a probe spends one, given back if it
// is admitted. Refused probes alone then stay under one in a hundred
// answers, the pacing layer's target, however often the candidates
// disagree. TestProbeBudget pins both.
const (
	probeShare = 0.01
	probeBurst = 2
)

// subSecond reports whether p's window is known to be shorter than a
// second, the precision of resets in whole seconds: said by the server, or
// bounded by a search for it (shorter, countCap). Several of its windows
// then end under one reset instant.
func (p *policy) subSecond() bool {
	return p.said > 0 && p.said < 1e9 || p.said == 0 && p.wCap > 0 && p.wCap < 1e9
}

// shortOpen reports whether p's window may be shorter than a second at t
// though its answers take it for one: the server does not say its window,
// and no reset was more than a second away, which in whole seconds says
// only that the quota returns within one. A limit of 4 or less is left
// as it was (closeAdmissions and countProbe take a limit of one or two): a
// window's whole quota back differs from a bucket's refill of a unit or
// two by no more than the noise of the levels (levelNoise at each end),
// and a bucket of a small burst was taken for such a window. Such a limit
// is searched too while the bucket is doubted (smallBurst, exactDoubted):
// a refusal it did not foresee says the quota does not return a unit at a
// time.
func (p *policy) shortOpen(t int64) bool {
	return p.limitSaid && (p.limit > 2*levelNoise || p.smallBurst() && p.doubted(p.exactDoubted, t)) && p.said == 0 && p.logW <= 1e9
}

// minShortWindow is the shortest window a search for one shorter than a
// second starts from: the silent model's shortest.
const minShortWindow = 10e6

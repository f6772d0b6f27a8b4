package pace

import "math"

// candidate names one of a policy's explanations: a server algorithm whose
// parameters the evidence bounds (see the package doc).
type candidate uint8

const (
	// cWindow is a fixed window with boundaries one period apart, on the
	// clock.
	cWindow candidate = iota
	// cAnchored is a fixed window that starts at the first request to
	// arrive after the last one ended (a Redis INCR+EXPIRE counter).
	cAnchored
	// cLog is a sliding log: each unit returns one window after it was
	// counted.
	cLog
	// cCounter is a sliding window counter: the current window's count
	// plus the previous one's, weighted by the share of it that a window
	// ending now still covers.
	cCounter
	// cBucket is a token bucket, leaky bucket or GCRA: units return at a
	// steady rate, up to the capacity.
	cBucket
	nCand
)

// allCandidates is the set of every candidate.
const allCandidates = 1<<nCand - 1

var candidateNames = [nCand]string{"fixed window", "window from a first request", "sliding log", "sliding counter", "bucket"}

func (c candidate) String() string {
	if c < nCand {
		return candidateNames[c]
	}
	return "candidate?"
}

// Time in the model is Unix nanoseconds; never is an instant that does not
// come.
const never = math.MaxInt64

// maxHorizon bounds every wait the model computes.
const maxHorizon = int64(100 * 365 * 24 * 3600 * 1e9)

// bounds is an interval of instants [lo, hi]: where the end of a window
// lies, say. The zero bounds are unknown.
type bounds struct{ lo, hi int64 }

func (b bounds) known() bool { return b.hi != 0 }

// mid is the interval's middle, where a probe tests it.
func (b bounds) mid() int64 { return b.lo + (b.hi-b.lo)/2 }

// view is how a candidate is asked: cautiously (the parameters that let
// the least through) or optimistically (the ones a probe tests).
type view bool

const (
	cautious   view = false
	optimistic view = true
)

// counted returns how many units candidate c says the server counts at the
// instant t, besides the client's leases in flight.
func (p *policy) counted(c candidate, t int64, v view) float64 {
	switch c {
	case cWindow, cAnchored:
		return float64(p.windowCounted(c, t, v))
	case cLog:
		// A sliding log and a counter have no parameter a probe could
		// test on its own: their optimistic view is their cautious one.
		w := p.logWindow()
		if w <= 0 {
			return float64(p.own.total() + p.logF.total())
		}
		return float64(p.own.sum(t-w, t) + p.logF.sum(t-w, t))
	case cCounter:
		return p.counterCounted(t, cautious)
	case cCounter + nCand: // the counter as a check sees it
		return p.counterCounted(t, optimistic)
	case cBucket:
		return float64(p.limit) - p.bucketLevel(t, p.rate(v))
	}
	return 0
}

// periodFor returns the window length a view takes: the longest for the
// cautious (a sliding log keeps its units longer, a window ends later), the
// shortest for the optimistic. 0 when unknown.
func (p *policy) periodFor(v view) int64 {
	if v == optimistic && p.period.lo > 0 {
		return p.period.lo
	}
	return p.period.hi
}

// logWindow is the sliding log's window: the least the evidence allows,
// since a log's reset, right after the client's own unit, is its window
// exactly (see learnPeriod); a log that is longer is refuted by a refusal.
func (p *policy) logWindow() int64 {
	if p.said > 0 {
		return p.said
	}
	if p.logW > 0 {
		return p.logW
	}
	return p.period.hi
}

// windowCounted is counted for the window candidates: what the newest
// answer said, plus the client's units since, until the window ends; then
// the client's units since the new window began.
func (p *policy) windowCounted(c candidate, t int64, v view) int64 {
	b := p.win[c]
	end, from := p.windowEnd(c, v), b.lo // cautious: ends late, and counts what may be in the next one
	if v == optimistic {
		from = end
	}
	if !b.known() || t < end {
		return max(p.limit-p.obsRem, 0) + p.since
	}
	per := p.periodFor(v)
	if c == cAnchored {
		// The next window opens with the first unit to arrive after this
		// one ended: the client's own, when nothing else is known.
		for {
			first := p.own.firstAfter(from)
			if first == never || first > t {
				return 0 // not opened yet: a request now opens it
			}
			// The window opened by the first unit after the latest end,
			// or, when none came since, by first.
			open := p.own.firstAfter(end)
			if per <= 0 || open == never || t < open+per {
				if v == cautious && per > 0 {
					first = max(first, t-per+1) // see below
				}
				return p.own.sum(first-1, t)
			}
			from = open + per
			end = from
		}
	}
	if per > 0 && t >= end+per {
		k := (t - end) / per
		end += k * per
		from += k * per
		if v == cautious && p.period.lo > 0 {
			from = b.lo + k*p.period.lo
		}
	}
	if v == cautious && per > 0 {
		// Whatever the boundary, the newest one by t came less than a
		// window before t (a window that opens at a first unit as well:
		// one that opened earlier has ended): where the bounds are wide,
		// what counts is at most the last window's units, as a sliding
		// log's. (Counting from the bounds' start alone took a burst
		// sent within them, at whatever boundary, as counted in the
		// window after the latest end: it returned a window late.)
		from = max(from, t-per+1)
	}
	return p.own.sum(from-1, t)
}

// windowEnd is where a view takes candidate c's window to end: the latest
// instant its bounds allow for the cautious; for the optimistic, the
// server's second that the Date says it ends at (see aligned), or else the
// middle of the bounds.
func (p *policy) windowEnd(c candidate, v view) int64 {
	b := p.win[c]
	if v == cautious {
		return b.hi
	}
	if c == cWindow && p.guess >= b.lo && p.guess <= b.hi {
		return p.guess
	}
	if e := p.anchoredEnd(); c == cAnchored && e != 0 && e <= b.hi {
		return max(e, b.lo)
	}
	return b.hi // nothing worth testing
}

// anchoredEnd is the soonest a window that starts at its first request
// (cAnchored) may end: a period at its shortest after its first unit
// arrived (anchorAt), and a margin for the request that tests it to land
// after it; 0 when either is unknown. With resets in whole seconds rounded
// up, the bounds alone put it a second or more later.
func (p *policy) anchoredEnd() int64 {
	if p.anchorAt == 0 || p.period.lo <= 0 {
		return 0
	}
	return p.anchorAt + p.period.lo + alignMargin
}

// counterCounted is counted for the sliding window counter: of the window
// that t falls in (windows one period long, their boundaries where p.ctr
// says), its count, plus the previous window's weighted by the share of it
// a window ending at t still covers. Cautiously, the larger of the counts
// at either end of the boundary's bounds.
func (p *policy) counterCounted(t int64, v view) float64 {
	w := p.periodFor(v)
	if w <= 0 || !p.ctr.known() {
		return float64(p.own.total() + p.ctrF.total())
	}
	// The boundaries lie in [ctr.lo, ctr.hi]: the window that t falls
	// in is s old, with s in [t - ctr.hi, t - ctr.lo] modulo w. Between
	// the bounds' ends the count can be more (or less) than at either
	// (a unit that crosses a boundary within them), so the extremes are
	// taken over the whole span.
	least, most := p.counterExtremes(t, w)
	if v == optimistic {
		// The least count the boundary's bounds allow: what a check
		// must not find exceeded before it refutes the counter.
		return least
	}
	return most
}

// counterExtremes returns the least and the most the counter can have
// counted at t, windows w long, with their boundaries within p.ctr.
func (p *policy) counterExtremes(t, w int64) (least, most float64) {
	return p.counterRange(t, w, floorMod(t-p.ctr.hi, w), p.ctr.hi-p.ctr.lo)
}

// phaseOpen reports whether the counter's boundary bounds span half a
// window or more: its phase is as good as unknown.
func (p *policy) phaseOpen() bool {
	w := p.period.hi
	return w > 0 && p.ctr.known() && 2*(p.ctr.hi-p.ctr.lo) >= w
}

// counterRange returns the least and the most that the sliding window
// counter can have counted at t, windows w long, for every phase that puts
// the window t falls in s old with s in [sLo, sLo+sLen] modulo w (any s
// when sLen >= w): its count is then cur + prev (1 - s/w). As s
// grows from 0 to w, a unit counted within a window before t passes from
// prev to cur (raising the count by s/w of it) and a unit counted a window
// before that comes into prev (by 1 - s/w of it); in between, the count
// falls. So the most is at s = 0 or just after such a crossing, the least
// just before one or as s nears w: one pass over both ledgers' units of
// the last two windows, in order of s.
func (p *policy) counterRange(t, w, sLo, sLen int64) (least, most float64) {
	// At s = 0 the window starts at t: cur holds what was counted at t,
	// prev the window before it.
	cur := float64(p.own.sum(t-1, t) + p.ctrF.sum(t-1, t))
	prev := float64(p.own.sum(t-w-1, t-1) + p.ctrF.sum(t-w-1, t-1))
	in := func(s int64) bool { return sLen >= w || floorMod(s-sLo, w) <= sLen }
	most, least = math.Inf(-1), math.Inf(1)
	if in(0) {
		most, least = cur+prev, cur+prev
	}
	// The span's ends, where the count is taken as it is.
	var ends [2]int64
	nEnds := 0
	if sLen < w {
		ends[0], ends[1] = sLo, floorMod(sLo+sLen, w)
		if ends[1] < ends[0] {
			ends[0], ends[1] = ends[1], ends[0]
		}
		nEnds = 2
	}
	// Four streams of crossings, each in order of s when taken newest
	// first: of each ledger, the units counted in (t-w, t), at s = t -
	// at, and in (t-2w, t-w), at s = t - w - at.
	type stream struct {
		e     []entry
		shift int64 // s = t - shift - at
		moves bool  // from prev to cur, or else into prev
	}
	var streams [4]stream
	for j, l := range [2]*ledger{&p.own, &p.ctrF} {
		e := l.e
		streams[2*j] = stream{e: e[indexAfter(e, t-w):indexAfter(e, t-1)], moves: true}
		streams[2*j+1] = stream{e: e[indexAfter(e, t-2*w):indexAfter(e, t-w-1)], shift: w}
	}
	fw := float64(w)
	e := 0 // the next of ends
	for {
		k, sk := -1, int64(0)
		for j := range streams {
			if en := streams[j].e; len(en) > 0 {
				if s := t - streams[j].shift - en[len(en)-1].at; k < 0 || s < sk {
					k, sk = j, s
				}
			}
		}
		for e < nEnds && (k < 0 || ends[e] < sk) {
			v := cur + prev*(1-float64(ends[e])/fw)
			least, most = min(least, v), max(most, v)
			e++
		}
		if k < 0 {
			break
		}
		st := &streams[k]
		n := float64(st.e[len(st.e)-1].n)
		st.e = st.e[:len(st.e)-1]
		f := 1 - float64(sk)/fw
		if in(sk) {
			least = min(least, cur+prev*f)
		}
		if st.moves {
			cur, prev = cur+n, prev-n
		} else {
			prev += n
		}
		if in(sk) {
			most = max(most, cur+prev*f)
		}
	}
	if in(w - 1) {
		least = min(least, cur) // s nears w: prev weighs nothing
	}
	return least, most
}

// counterNarrow takes in an admission at t after which the server had
// counted units: of the phases the counter's bounds allow (sampled), those
// whose count of the client's own units alone, less tol, is more than that
// are ruled out, since others' spending only adds to it, and the bounds
// shrink to the rest. It reports false when none is left: the bounds were
// not the server's (a reset that did not point at a boundary), or, when
// they allowed any phase, the server is no counter.
func (p *policy) counterNarrow(t, counted, tol int64) bool {
	w := p.period.hi
	if w <= 0 || !p.ctr.known() || p.period.lo != w {
		return true
	}
	lo, width := p.ctr.lo, min(p.ctr.hi-p.ctr.lo, w)
	step := max(width/phaseSamples, 1)
	own := func(phase int64) float64 {
		ws := phase + floorDiv(t-phase, w)*w
		cur, prev := p.own.sum(ws-1, t), p.own.sum(ws-w-1, ws-1)
		return float64(cur) + float64(prev)*(1-float64(t-ws)/float64(w))
	}
	first, last := int64(-1), int64(-1)
	for i := int64(0); i <= phaseSamples; i++ {
		if own(lo+i*step) <= float64(counted+tol) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return false
	}
	if first == 0 && last == phaseSamples {
		return true // nothing ruled out at the ends
	}
	// (Survivors in the middle only: the arc between them, a step wider
	// each way for the phases between the samples.)
	p.ctr = bounds{lo + max(first-1, 0)*step, lo + min(last+1, phaseSamples)*step}
	return true
}

// phaseSamples is how many phases (plus one) counterNarrow tries across
// the counter's bounds.
const phaseSamples = 16

// bucketLevel is the bucket's level at t at rate r (units per second): its
// level at the last event (bLevel at bAt: an answer's remaining, or that
// less a unit of the client's counted since), refilled up to the capacity.
func (p *policy) bucketLevel(t int64, r float64) float64 {
	lvl := p.bLevel
	if dt := t - p.bAt; dt > 0 && r > 0 {
		lvl = min(float64(p.limit), lvl+r*float64(dt)/1e9)
	}
	return lvl
}

// rate returns the bucket's refill rate a view takes: the least the
// evidence allows for the cautious; for the optimistic, what a probe
// tests: the middle (in a logarithmic sense) of the rates the answers
// measured and the resets allow (see between).
func (p *policy) rate(v view) float64 {
	lo := max(p.rLo, p.rReset)
	if v == cautious {
		return lo
	}
	hi := p.rHi
	if u := p.rUpper; p.rReset > 0 && u >= lo && (hi == 0 || u < hi) {
		// The resets say the bucket fills no faster: a probe of a rate
		// past them costs a refusal to learn what they said. (They are
		// taken while they agree with the rates measured, and not after
		// a refusal showed them too fast, when rReset is 0.)
		hi = u
	}
	return p.between(lo, hi)
}

// fastRate is the rate that orders answers (refillBetween,
// returnsBetween): the middle of the rates the answers measured alone.
// The resets' bound is left out there: the arrivals' instants are
// uncertain (a request held on its way out reaches the server later than
// the client takes it to), and ordered by a rate as near the true one as
// the resets allow, answers that found what that rate does not explain
// were taken for older ones, and the rate the client measured stopped
// short of the server's (a bucket of 50/s with requests held 10 ms on
// their way: paced at 48.7/s, 1.12x the ideal).
func (p *policy) fastRate() float64 {
	return p.between(max(p.rLo, p.rReset), p.rHi)
}

// between is the optimistic rate between lo and hi (0: no upper bound):
// their geometric middle, or, with no upper bound, twice lo or the
// quota's average rate, whichever is more.
func (p *policy) between(lo, hi float64) float64 {
	if hi > 0 {
		if lo > 0 {
			return math.Sqrt(lo * hi)
		}
		return hi / 2
	}
	avg := 0.0
	if w := p.period.hi; w > 0 && p.limit > 0 {
		avg = float64(p.limit) / (float64(w) / 1e9)
	}
	return max(2*lo, avg, minProbeRate)
}

// minProbeRate is the least refill rate a probe tests (units per second):
// a bucket slower than one unit a minute is paced by its other evidence.
const minProbeRate = 1.0 / 60

// avail returns how many units candidate c says are free at t, for a
// request arriving then, given the client's units still in flight (fl).
func (p *policy) avail(c candidate, t int64, fl flight, v view) float64 {
	switch c {
	case cBucket:
		return p.bucketAvail(t, fl, p.rate(v))
	case cCounter:
		return float64(p.limit) + fl.slack - p.counted(c, t, v) - float64(fl.n)
	}
	return float64(p.limit) - p.counted(c, t, v) - float64(fl.n)
}

// flight is what a decision knows of the client's units in flight: how
// many (less those answers showed counted), and the latest instant they
// are taken to reach the server (never: unknown); and how far past its
// limit the sliding counter's count may be planned (see counterSlack).
type flight struct {
	n, end int64
	slack  float64
}

// bucketAvail is avail for the bucket at rate r: its level at t, less the
// units in flight. They are taken to reach the server at fl.end, all of
// them (the latest any may, which lets the least through), and the bucket
// refills after them as after any other unit: a bucket's capacity bounds
// its level, not how many requests may be on their way to it. (Taking them
// off the level at t, capped by the capacity, held a bucket of one to a
// request per round trip, however fast it refills.)
func (p *policy) bucketAvail(t int64, fl flight, r float64) float64 {
	lvl := p.bucketLevel(t, r) - float64(fl.n)
	if end := max(fl.end, p.bAt); fl.n > 0 && t > end && r > 0 {
		lvl = min(float64(p.limit), p.bucketLevel(end, r)-float64(fl.n)+r*float64(t-end)/1e9)
	}
	return lvl
}

// when returns the earliest instant, at or after from, at which candidate c
// says need units are free for a request arriving then, with the client's
// units fl in flight; never if it says they will not be (until an answer
// says more).
func (p *policy) when(c candidate, from, need int64, fl flight, v view) int64 {
	room := float64(need)
	if p.avail(c, from, fl, v) >= room {
		return from
	}
	if c == cBucket {
		return p.bucketWhen(from, room, fl, p.rate(v))
	}
	inflight := fl.n
	if float64(p.limit-inflight) < room {
		return never
	}
	switch c {
	case cWindow, cAnchored:
		if !p.win[c].known() {
			return never
		}
		end := p.windowEnd(c, v)
		per := p.periodFor(v)
		for range 4 {
			if end >= from && p.avail(c, end, fl, v) >= room {
				return end
			}
			if per <= 0 {
				return never
			}
			if v == cautious {
				// Before the next end, the units leave the last window's
				// count one by one (see windowCounted).
				var none ledger
				t := afterBoth(&p.own, &none, max(from, end), per, p.limit-inflight-need)
				if t = max(t, end, from); t < end+per && p.avail(c, t, fl, v) >= room {
					return t
				}
			}
			end += per
			if end < from {
				end += (from - end) / per * per
			}
		}
		return never
	case cLog:
		w := p.logWindow()
		if w <= 0 {
			return never
		}
		keep := p.limit - inflight - need
		return afterBoth(&p.own, &p.logF, from, w, keep)
	case cCounter:
		return p.counterWhen(from, room+float64(inflight), fl.slack, cautious)
	}
	return never
}

// bucketWhen is when for the bucket at rate r (see bucketAvail): the
// earliest instant from on at which room units are free.
func (p *policy) bucketWhen(from int64, room float64, fl flight, r float64) int64 {
	if r <= 0 {
		return never
	}
	n, limit := float64(fl.n), float64(p.limit)
	end := max(fl.end, p.bAt)
	if limit-n >= room {
		// Before the units in flight arrive: min(C, lvl + r dt) - n >= room.
		t := p.bAt + int64(math.Ceil((room+n-p.bLevel)/r*1e9))
		if fl.n == 0 || t <= end {
			return max(t, from)
		}
	}
	if fl.n == 0 || limit < room || end == never {
		return never
	}
	// After: the level at end, less them, refilled.
	t := end + int64(math.Ceil((room-(p.bucketLevel(end, r)-n))/r*1e9))
	return max(t, from)
}

// counterWhen solves the counter's count for the instant at or after from
// when room units fit, the count planned past the limit by slack, scanning
// the window that from falls in and the next two.
func (p *policy) counterWhen(from int64, room, slack float64, v view) int64 {
	w := p.periodFor(v)
	if w <= 0 || !p.ctr.known() {
		return never
	}
	phase := p.ctr.hi
	if v == optimistic {
		phase = p.ctr.mid()
	}
	fits := func(t int64) bool { return float64(p.limit)+slack-p.counterCounted(t, v) >= room }
	ws := phase + floorDiv(from-phase, w)*w
	for k := range 3 {
		lo, hi := max(from, ws+int64(k)*w), ws+int64(k+1)*w-1
		if fits(lo) {
			return lo
		}
		if !fits(hi) {
			continue
		}
		// The count falls as the window goes on: bisect to a millisecond.
		for hi-lo > 1e6 {
			m := lo + (hi-lo)/2
			if fits(m) {
				hi = m
			} else {
				lo = m
			}
		}
		return hi
	}
	return never
}

// landMargin is added to the instant a unit of a sliding log returns, so
// that the request that spends it lands after it: the server's clock ticks
// in milliseconds at best.
const landMargin = 2e6

// floorMod is a modulo b in [0, b) (b > 0).
func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// floorDiv is a/b rounded towards minus infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// firstAfter returns the instant of the first entry counted at or after t,
// or never.
func (l *ledger) firstAfter(t int64) int64 {
	if i := indexAfter(l.e, t-1); i < len(l.e) {
		return l.e[i].at
	}
	return never
}

// afterBoth is ledger.after over the union of two ledgers: the earliest
// instant at or after from at which at most keep of their units were
// counted in the window of length w ending then.
func afterBoth(a, b *ledger, from, w, keep int64) int64 {
	if keep < 0 {
		return never
	}
	in := a.sum(from-w, from+maxHorizon) + b.sum(from-w, from+maxHorizon)
	if in <= keep {
		return from
	}
	i, j := 0, 0
	for i < len(a.e) || j < len(b.e) {
		var e entry
		if j >= len(b.e) || i < len(a.e) && a.e[i].at <= b.e[j].at {
			e = a.e[i]
			i++
		} else {
			e = b.e[j]
			j++
		}
		if e.at <= from-w {
			continue
		}
		in -= e.n
		if in <= keep {
			return max(e.at+w+landMargin, from)
		}
	}
	return never
}

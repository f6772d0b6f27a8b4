package pace

import "math"

// The silent model's sliding window counters (see silent): a server that
// counts, for a request arriving at t, the arrivals of the window t falls
// in (windows one period long, on the server's clock, as the fixed
// windows') plus the previous window's, weighed by the share of it that a
// window ending at t still covers, and admits the request when that is
// below its limit. Without it among the candidates, such a server is
// explained only by a slow bucket that charges refusals, which then paces
// far below the quota and is never tested again.

// sumFunc returns the units counted in (from, to].
type sumFunc func(from, to int64) int64

// counterWeight returns the weight of the previous window at t, in the
// window of length w that starts at s: 1 - (t-s)/w, within [0, 1].
func counterWeight(t, s, w int64) float64 {
	f := float64(t-s) / float64(w)
	return 1 - min(max(f, 0), 1)
}

// counterLeast returns what a counter of window w certainly counted just
// before an admitted arrival at at (the client's estimate, which may be m
// off another's), with sum the admitted arrivals: those of at's window at
// least m after its start (itself excluded), and the previous window's
// that were certainly in it, at the least weight at's error allows. An
// arrival within m of its window's end may have been the next window's
// first, where this window's count weighs (1 - m/w) at least.
func counterLeast(k *keyState, sum sumFunc, at, w, m int64) float64 {
	s := k.fixedStart(at, w)
	cur := float64(max(sum(s-1+m, at)-1, 0))
	prev := float64(sum(s-w-1+m, s-m))
	c := cur + prev*counterWeight(at+m, s, w)
	if s+w-at < m {
		c = min(c, cur*(1-float64(m)/float64(w)))
	}
	// Rounded down: a server may admit while the weighed count is below
	// its limit (99.95 of 100), or only while one more fits in it; an
	// admission proves the limit more than the count's whole part.
	return math.Floor(max(c, 0))
}

// counterMost returns what a counter of window w may have counted just
// before a refused arrival at at: every arrival, refused ones included,
// that may have been in its window, and those of the previous window
// before that, at the most weight at's error allows, whichever window at
// fell in. (An arrival within m of the boundary counts in at's window
// only, where it weighs most: not in both.)
func (a *silent) counterMost(k *keyState, at, w, m int64) float64 {
	to := at
	if a.own.sum(at, at+m) > 0 {
		to = at + m // admitted arrivals just after it may have come first
	}
	all := func(from, to int64) int64 { return a.own.sum(from, to) + a.ref.sum(from, to) }
	most := 0.0
	for _, x := range [2]int64{at - m, at + m} {
		s := k.fixedStart(x, w)
		c := float64(all(s-m-1, to)) + float64(all(s-w-m-1, s-m-1))*counterWeight(max(at-m, s), s, w)
		most = max(most, c)
	}
	return max(most-1, 0) // not the refused arrival itself
}

// counterAt returns, cautiously, what a counter of window w holds for an
// arrival at t after every arrival known: the arrivals (refused ones too,
// when charged) that may be in t's window, those of the previous one
// before them, and the previous one's weight at t, as the server's clock
// may be m behind.
func (a *silent) counterAt(k *keyState, t, w, m int64, charged bool) (cur, prev int64, weight float64) {
	s := k.fixedStart(t, w)
	all := func(from, to int64) int64 {
		n := a.own.sum(from, to)
		if charged {
			n += a.ref.sum(from, to)
		}
		return n
	}
	return all(s-m-1, never-1), all(s-w-m-1, s-m-1), counterWeight(t-m, s, w)
}

// counterAdmit returns the earliest instant at or after arrive at which a
// counter of window w, cautiously (see counterAt; refused arrivals
// counted when charged), holds at most keep: in arrive's window, as the
// previous window's weight falls, or in one of the next two; never if not
// then.
func (a *silent) counterAdmit(k *keyState, arrive, w, m, keep int64, charged bool) int64 {
	s0 := k.fixedStart(arrive, w)
	for n := range int64(3) {
		s := s0 + n*w
		from := max(arrive, s)
		cur, prev, weight := a.counterAt(k, from, w, m, charged)
		if cur > keep {
			continue
		}
		room := float64(keep - cur)
		if float64(prev)*weight <= room {
			return from
		}
		// prev * (1 - (t-m-s)/w) <= room, for t in s's window (prev > 0,
		// since the count is more than room).
		t := s + m + int64(math.Ceil(float64(w)*(1-room/float64(prev))))
		if t < s+w {
			return max(t, from)
		}
	}
	return never
}

// counterProven returns the limit that the admitted arrivals e (sorted by
// instant) prove a counter of window w has: more than it certainly counted
// before any of them.
func counterProven(k *keyState, e []entry, w, m int64) int64 {
	pre := make([]int64, len(e)+1)
	for i, x := range e {
		pre[i+1] = pre[i] + x.n
	}
	sum := func(from, to int64) int64 {
		if to <= from {
			return 0
		}
		return pre[indexAfter(e, to)] - pre[indexAfter(e, from)]
	}
	var lo int64
	for _, x := range e {
		lo = max(lo, int64(math.Floor(counterLeast(k, sum, x.at, w, m)))+1)
	}
	return lo
}

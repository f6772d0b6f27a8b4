package pace

import (
	"slices"
	"sort"
)

// A ledger is a policy's record of units the server counted, and when: the
// client's own admitted requests (at the instant the server is taken to
// have counted each, see arrival), or, in a candidate's own ledger, the
// spending of others that candidate had to assume. Entries are kept in
// order of time. It is bounded: an entry closer than the quantum to the one
// before it is merged into it, and when it is full the closest neighbours
// are merged (squeeze); a merged entry takes the later instant, so that a
// unit is never taken to have been counted earlier (and so to return
// sooner) than it was.
type ledger struct {
	e []entry
}

// entry is n units counted at the instant at (Unix nanoseconds). cum is
// a running total, so that a sum over a span is two searches, not a scan:
// each entry's cum is the one before's plus its n (the first's is its n
// when it was last fixed; takeOldest then lowers its n alone, which no
// span's sum, cum[j] - cum[i] + n[i], needs to undo). It is derived, not
// encoded.
type entry struct {
	at  int64
	n   int64
	cum int64
}

// maxLedger bounds a ledger's entries: with a quantum of a 128th of the
// window (see policy.quantum), two windows of spending fit without a merge
// beyond the quantum's. TestLedgerBounded pins it.
const maxLedger = 256

// add records n units counted at at, merging as the type says.
func (l *ledger) add(at, n, quantum int64) { l.addUpTo(at, n, quantum, maxLedger) }

// addUpTo is add with most entries at most.
func (l *ledger) addUpTo(at, n, quantum int64, most int) {
	if n <= 0 {
		return
	}
	i := len(l.e)
	for i > 0 && l.e[i-1].at > at {
		i--
	}
	switch {
	case i > 0 && at-l.e[i-1].at < quantum:
		// Merge into the entry before, at the later instant.
		l.e[i-1].n += n
		l.e[i-1].at = max(l.e[i-1].at, at)
		if i < len(l.e) && l.e[i].at < l.e[i-1].at {
			// Merged past the entry after it: keep the order.
			l.e[i-1], l.e[i] = l.e[i], l.e[i-1]
		}
		l.fix(i - 1)
		return
	case i < len(l.e) && l.e[i].at-at < quantum:
		l.e[i].n += n // the entry after is later already
		l.fix(i)
		return
	}
	l.e = append(l.e, entry{})
	copy(l.e[i+1:], l.e[i:])
	l.e[i] = entry{at: at, n: n}
	l.fix(i)
	if len(l.e) > most {
		l.squeeze()
	}
}

// fix sets the running totals from entry i on (see entry): once for an
// entry added at the end, as most are.
func (l *ledger) fix(i int) {
	for ; i < len(l.e); i++ {
		if i == 0 {
			l.e[0].cum = l.e[0].n
			continue
		}
		l.e[i].cum = l.e[i-1].cum + l.e[i].n
	}
}

// squeeze makes room in a full ledger by merging its closest neighbours,
// each run of entries closer than a threshold into its last one: the
// threshold is the gap a quarter of the gaps are at most, so a squeeze
// frees about a quarter of the ledger. It costs a sort of the gaps, once
// per quarter of the ledger's adds: O(log n) amortized per add, where
// merging the single closest pair, as it once did, scanned the whole
// ledger at every add once it was full (most of a request's cost on a
// server that sends no headers). Merges keep the later instant, so no unit
// is taken to have been counted earlier than it was; and, closest first,
// the bursts are merged before the spans between them.
func (l *ledger) squeeze() {
	n := len(l.e)
	if n < 2 {
		return
	}
	var buf [maxSilentLedger]int64
	gaps := buf[:0]
	if n-1 > len(buf) {
		gaps = make([]int64, 0, n-1)
	}
	for i := 1; i < n; i++ {
		gaps = append(gaps, l.e[i].at-l.e[i-1].at)
	}
	want := max(n/4, 1)
	g := nthSmallest(gaps, want-1)
	merged, j := 0, 0
	for i := 1; i < n; i++ {
		if merged < want && l.e[i].at-l.e[j].at <= g {
			// l.e[j] (a run merged so far) goes into l.e[i], the later.
			l.e[j] = entry{at: l.e[i].at, n: l.e[j].n + l.e[i].n}
			merged++
			continue
		}
		j++
		l.e[j] = l.e[i]
	}
	clear(l.e[j+1:])
	l.e = l.e[:j+1]
	l.fix(0)
}

// nthSmallest returns the k-th smallest of v (from 0), reordering v: a
// selection in O(len(v)) expected time, where sorting v (as squeeze did)
// cost O(n log n) per squeeze, about a tenth of the CPU of a request to a
// silent server. Each
// round partitions v[lo:hi] three ways around the median of three, so that
// equal gaps (requests sent at a steady pace) end a round at once; after
// maxSelectRounds rounds it sorts what is left, which bounds a
// pathological order at a sort's cost.
func nthSmallest(v []int64, k int) int64 {
	lo, hi := 0, len(v)
	for range maxSelectRounds {
		if hi-lo < selectSortBelow {
			break
		}
		a, b, c := v[lo], v[lo+(hi-lo)/2], v[hi-1]
		pivot := max(min(a, b), min(max(a, b), c))
		// v[lo:lt] < pivot, v[lt:i] == pivot, v[gt:hi] > pivot.
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch x := v[i]; {
			case x < pivot:
				v[lt], v[i] = v[i], v[lt]
				lt++
				i++
			case x > pivot:
				gt--
				v[gt], v[i] = v[i], v[gt]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k >= gt:
			lo = gt
		default:
			return pivot
		}
	}
	slices.Sort(v[lo:hi])
	return v[k]
}

// maxSelectRounds bounds nthSmallest's partitions before it sorts.
const maxSelectRounds = 64

// selectSortBelow is the length under which nthSmallest sorts what is
// left instead of partitioning it (the length under which Go's sort uses
// insertion sort too: a partition costs more than it saves there).
const selectSortBelow = 16

// sum returns the units counted in (from, to]: a binary search for the
// first entry after from and one for the first after to, and the running
// totals between (see entry). A log's returns are sums a window back,
// which a scan from the newest entry took the whole window to reach (a
// quarter of a request's pacing cost, on a busy key); a scan from the
// first entry after from took a tenth of the cost of a request whose
// quota is not ample.
func (l *ledger) sum(from, to int64) int64 {
	e := l.e
	i := indexAfter(e, from)
	if i == len(e) || e[i].at > to {
		return 0
	}
	j := i + indexAfter(e[i:], to) - 1
	return e[j].cum - e[i].cum + e[i].n
}

// indexAfter returns the index of the first of e's entries (in order of
// time) counted after t, len(e) when none is.
func indexAfter(e []entry, t int64) int {
	return sort.Search(len(e), func(i int) bool { return e[i].at > t })
}

// total returns every unit the ledger holds.
func (l *ledger) total() int64 {
	if len(l.e) == 0 {
		return 0
	}
	return l.e[len(l.e)-1].cum - l.e[0].cum + l.e[0].n
}

// prune forgets the entries counted at or before t.
func (l *ledger) prune(t int64) {
	i := 0
	for i < len(l.e) && l.e[i].at <= t {
		i++
	}
	if i > 0 {
		l.e = append(l.e[:0], l.e[i:]...)
	}
}

// takeOldest removes up to n units, the oldest first, and returns how many
// it removed: spending that was assumed of others and that an answer showed
// was not there (or had already returned).
func (l *ledger) takeOldest(n int64) int64 {
	took := int64(0)
	for len(l.e) > 0 && took < n {
		k := min(l.e[0].n, n-took)
		l.e[0].n -= k
		took += k
		if l.e[0].n == 0 {
			l.e = l.e[1:]
		}
	}
	return took
}

// after returns the earliest instant t >= from such that the units counted
// in (t-w, t] are at most keep, considering only units counted at or
// before from (later ones, if any, are counted too); never when even the
// newest unit would still be counted past the horizon. It is how long a
// sliding log of window w makes a request wait.
func (l *ledger) after(from, w, keep int64) int64 {
	if l.sum(from-w, from) <= keep {
		return from
	}
	// Units age out in order: find the entry whose ageing out leaves at
	// most keep in the window.
	in := l.sum(from-w, from+maxHorizon)
	for i := range l.e {
		e := l.e[i]
		if e.at <= from-w {
			continue
		}
		in -= e.n
		if in <= keep {
			return e.at + w
		}
	}
	return never
}

// clone returns a copy that shares no memory with l.
func (l ledger) clone() ledger {
	if l.e == nil {
		return l
	}
	return ledger{e: append([]entry(nil), l.e...)}
}

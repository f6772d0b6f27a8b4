package ratelimittest

// slidingCounter keeps the counts of the current aligned window, which
// started at start, and of the previous one. At elapsed time e into the
// current window it estimates the count of the last window-long span as
// prev*(window-e)/window + curr and admits a request while that estimate is
// below the limit (as Cloudflare's limiter does), so a steady overload gets
// the limit per window. For a cost of c units the estimate must stay below
// limit+1-c. Rounded (WithRoundedCounts, go-chi/httprate), the estimate
// rounded to the nearest unit must be at most limit-c: the estimate below
// limit-c+1/2. The comparisons are exact, in 128-bit integers and half
// units: 2*(prev*(window-e) + curr*window) < t*window, where t is
// 2*(limit+1-c), or 2*(limit-c)+1 rounded.
type slidingCounter struct {
	r          *rule
	off        int64 // windows start at off modulo the window (AnchorFirstRequest)
	now, start int64
	prev, curr int64
}

func (m *slidingCounter) advance(now int64) {
	m.now = now
	ws := m.off + floorDiv(now-m.off, m.r.window)*m.r.window
	if ws == m.start {
		return
	}
	if ws == m.start+m.r.window {
		m.prev = m.curr
	} else {
		m.prev = 0
	}
	m.start, m.curr = ws, 0
}

func (m *slidingCounter) fits(cost int64) (bool, int64) {
	w, l := m.r.window, m.r.limit
	if cost > l {
		return false, never
	}
	// t, in half units: the estimate (with the cost) must stay below t/2.
	t := 2 * (l + 1 - cost)
	if m.r.rounded {
		t = 2*(l-cost) + 1
	}
	e := m.now - m.start
	lhs := mul128(2*m.prev, w-e).add(mul128(2*m.curr, w))
	if lhs.cmp(mul128(t, w)) < 0 {
		return true, 0
	}
	// Later in this window: 2*prev*(w-e') < a*w with a = t-2*curr, that
	// is w-e' <= ceil(a*w/(2*prev))-1.
	if a := t - 2*m.curr; a > 0 && m.prev > 0 {
		if x := mulDivCeil(a, w, 2*m.prev); x > 1 {
			return false, m.start + w - x + 1 - m.now
		}
	}
	// In the next window curr becomes prev: 2*curr*(w-e'') < t*w.
	e2 := int64(0)
	if m.curr > 0 {
		e2 = max(0, w-mulDivCeil(t, w, 2*m.curr)+1)
	}
	return false, m.start + w + e2 - m.now
}

func (m *slidingCounter) take(cost int64) { m.curr += cost }

// charge counts a refused request in the current window too: the estimate
// passes the limit, and the excess weighs on the next window as prev.
func (m *slidingCounter) charge(cost int64) { m.curr += cost }

func (m *slidingCounter) status() (int64, int64) {
	w := m.r.window
	e := m.now - m.start
	rem := m.r.limit - m.curr - mulDiv(m.prev, w-e, w)
	if m.r.rounded {
		rem = m.r.limit - m.curr - mulDivRound(m.prev, w-e, w)
	}
	if rem < 0 {
		rem = 0
	}
	switch {
	case m.r.endResets && (m.curr > 0 || m.prev > 0):
		return rem, m.start + w - m.now
	case m.curr > 0:
		return rem, m.start + 2*w - m.now
	case m.prev > 0:
		return rem, m.start + w - m.now
	}
	return rem, 0
}

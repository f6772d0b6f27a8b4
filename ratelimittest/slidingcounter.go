package ratelimittest

// slidingCounter keeps the counts of the current aligned window, which
// started at start, and of the previous one. At elapsed time e into the
// current window it estimates the count of the last window-long span as
// prev*(window-e)/window + curr and admits a request while that estimate is
// below the limit (as Cloudflare's and go-chi/httprate's limiters do), so a
// steady overload gets the limit per window. For a cost of c units the
// estimate must stay below limit+1-c. The comparison is exact, in 128-bit
// integers: prev*(window-e) + (curr+c)*window < (limit+1)*window.
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
	e := m.now - m.start
	lhs := mul128(m.prev, w-e).add(mul128(m.curr+cost, w))
	if lhs.cmp(mul128(l+1, w)) < 0 {
		return true, 0
	}
	// Later in this window: prev*(w-e') < a*w with a = l+1-curr-cost, that
	// is w-e' <= ceil(a*w/prev)-1.
	if a := l + 1 - m.curr - cost; a > 0 && m.prev > 0 {
		if x := mulDivCeil(a, w, m.prev); x > 1 {
			return false, m.start + w - x + 1 - m.now
		}
	}
	// In the next window curr becomes prev: curr*(w-e'') < (l+1-cost)*w.
	e2 := int64(0)
	if m.curr > 0 {
		e2 = max(0, w-mulDivCeil(l+1-cost, w, m.curr)+1)
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
	if rem < 0 {
		rem = 0
	}
	switch {
	case m.curr > 0:
		return rem, m.start + 2*w - m.now
	case m.prev > 0:
		return rem, m.start + w - m.now
	}
	return rem, 0
}

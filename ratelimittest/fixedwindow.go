package ratelimittest

// fixedWindow counts units in the window [start, start+window), its
// windows at off past the clock's multiples of the window (0, or where the
// key's first request fell: AnchorStart).
type fixedWindow struct {
	r               *rule
	now, start, off int64
	count           int64
}

func (m *fixedWindow) advance(now int64) {
	m.now = now
	if ws := m.off + floorDiv(now-m.off, m.r.window)*m.r.window; ws != m.start {
		m.start, m.count = ws, 0
	}
}

func (m *fixedWindow) fits(cost int64) (bool, int64) {
	switch {
	case cost > m.r.limit:
		return false, never
	case cost <= m.r.limit-m.count:
		return true, 0
	}
	return false, m.start + m.r.window - m.now
}

func (m *fixedWindow) take(cost int64) { m.count += cost }

// charge counts a refused request too, as an INCR before the comparison
// does: the count passes the limit and is forgotten with the window.
func (m *fixedWindow) charge(cost int64) { m.count += cost }

func (m *fixedWindow) status() (int64, int64) {
	if m.count == 0 {
		return m.r.limit, 0
	}
	return max(0, m.r.limit-m.count), m.start + m.r.window - m.now
}

// anchoredWindow is a fixed window that a key's first request opens, rather
// than the clock: [start, start+window) from that request, and the next
// one from the first request after it ends (AnchorFirstRequest). Until a
// request arrives no window is open and the quota is whole.
type anchoredWindow struct {
	r          *rule
	now, start int64
	open       bool
	count      int64
}

func (m *anchoredWindow) advance(now int64) {
	m.now = now
	// now >= start (a key's time never runs backwards), so now-start only
	// overflows across centuries; treat that as ended too.
	if e := now - m.start; m.open && (e >= m.r.window || e < 0) {
		m.open, m.count = false, 0
	}
}

func (m *anchoredWindow) arrive() {
	if !m.open {
		m.open, m.start, m.count = true, m.now, 0
	}
}

func (m *anchoredWindow) fits(cost int64) (bool, int64) {
	switch {
	case cost > m.r.limit:
		return false, never
	case cost <= m.r.limit-m.count:
		return true, 0
	}
	// Only an open window can hold a count.
	return false, m.r.window - (m.now - m.start)
}

func (m *anchoredWindow) take(cost int64) {
	m.arrive() // a caller that skipped arrive still charges a window
	m.count += cost
}

// charge counts a refused request in the key's window, as take does.
func (m *anchoredWindow) charge(cost int64) { m.take(cost) }

func (m *anchoredWindow) status() (int64, int64) {
	if !m.open {
		return m.r.limit, 0
	}
	return max(0, m.r.limit-m.count), m.r.window - (m.now - m.start)
}

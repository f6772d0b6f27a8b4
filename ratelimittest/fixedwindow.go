package ratelimittest

// fixedWindow counts units in the aligned window [start, start+window).
type fixedWindow struct {
	r          *rule
	now, start int64
	count      int64
}

func (m *fixedWindow) advance(now int64) {
	m.now = now
	if ws := floorDiv(now, m.r.window) * m.r.window; ws != m.start {
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

func (m *fixedWindow) status() (int64, int64) {
	if m.count == 0 {
		return m.r.limit, 0
	}
	return m.r.limit - m.count, m.start + m.r.window - m.now
}

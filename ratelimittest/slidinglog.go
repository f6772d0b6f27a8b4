package ratelimittest

// slidingLog keeps the admission time of each admitted unit that is still
// inside the window (now-window, now], oldest first, in a ring that grows up
// to limit entries. Admitting cost units needs count+cost <= limit, so the
// log never holds more than limit entries, and a rejected request is
// written to it only when refusals are charged (see charge).
type slidingLog struct {
	r    *rule
	now  int64
	buf  []int64 // ring of admission times
	head int     // index of the oldest entry
	n    int     // entries in use
}

func (m *slidingLog) at(i int) int64 { return m.buf[(m.head+i)%len(m.buf)] }

func (m *slidingLog) advance(now int64) {
	m.now = now
	for m.n > 0 && now-m.at(0) >= m.r.window {
		m.head = (m.head + 1) % len(m.buf)
		m.n--
	}
}

func (m *slidingLog) fits(cost int64) (bool, int64) {
	n := int64(m.n)
	switch {
	case cost > m.r.limit:
		return false, never
	case cost <= m.r.limit-n:
		return true, 0
	}
	// The k oldest entries must leave the window first; the k-th leaves
	// window after it was admitted.
	k := n + cost - m.r.limit
	return false, m.at(int(k-1)) + m.r.window - m.now
}

func (m *slidingLog) take(cost int64) {
	for ; cost > 0; cost-- {
		if int64(m.n) == m.r.limit {
			// Only a charged refusal finds the log full (see charge):
			// the oldest entry goes.
			m.head = (m.head + 1) % len(m.buf)
			m.n--
		}
		if m.n == len(m.buf) {
			m.grow()
		}
		m.buf[(m.head+m.n)%len(m.buf)] = m.now
		m.n++
	}
}

// charge logs a refused request's units too, as a sorted set that is
// added to before it is counted does (Redis ZADD, then ZCARD). The log
// still holds at most limit entries: a unit logged into a full log pushes
// out the oldest. That loses nothing: a request of cost c fits once at most
// limit-c units are inside the window, which only the newest limit entries
// decide, so the log admits exactly what an unbounded one would.
func (m *slidingLog) charge(cost int64) { m.take(cost) }

// grow doubles the ring, up to limit entries, keeping the order.
func (m *slidingLog) grow() {
	size := 2 * len(m.buf)
	if size < 8 {
		size = 8
	}
	if int64(size) > m.r.limit {
		size = int(m.r.limit)
	}
	buf := make([]int64, size)
	for i := 0; i < m.n; i++ {
		buf[i] = m.at(i)
	}
	m.buf, m.head = buf, 0
}

func (m *slidingLog) status() (int64, int64) {
	if m.n == 0 {
		return m.r.limit, 0
	}
	return m.r.limit - int64(m.n), m.at(m.n-1) + m.r.window - m.now
}

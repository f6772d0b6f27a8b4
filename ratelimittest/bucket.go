package ratelimittest

// The two buckets count in scaled units so that a rate of limit per window
// is exact: one unit of cost is den scaled units and the bucket gains (or
// drains) num scaled units per nanosecond, where num/den is limit/window in
// lowest terms. A full bucket is burst*den scaled units.

// tokenBucket starts full with burst tokens; each admitted unit takes one,
// and tokens come back at limit per window up to burst.
type tokenBucket struct {
	r     *rule
	level int64 // scaled tokens in the bucket
	last  int64
}

// flow is how many scaled units dt nanoseconds move at num per nanosecond,
// capped at room (computed without overflow).
func flow(dt, num, room int64) int64 {
	if dt <= 0 {
		return 0
	}
	if dt >= ceilDiv(room, num) {
		return room
	}
	return dt * num
}

func (m *tokenBucket) advance(now int64) {
	m.level += flow(now-m.last, m.r.num, m.r.fullScale-m.level)
	m.last = max(m.last, now)
}

func (m *tokenBucket) fits(cost int64) (bool, int64) {
	if cost > m.r.burst {
		return false, never
	}
	c := cost * m.r.den
	if m.level >= c {
		return true, 0
	}
	return false, ceilDiv(c-m.level, m.r.num)
}

func (m *tokenBucket) take(cost int64) { m.level -= cost * m.r.den }

// charge takes a refused request's tokens anyway, as a server that calls
// x/time/rate's Reserve and refuses when the delay is positive, without
// cancelling, does: the level goes negative, down to minus a whole burst
// (the debt is bounded so that the arithmetic stays exact in int64).
func (m *tokenBucket) charge(cost int64) {
	m.level = max(m.level-cost*m.r.den, -m.r.fullScale)
}

func (m *tokenBucket) status() (int64, int64) {
	return max(0, m.level/m.r.den), ceilDiv(m.r.fullScale-m.level, m.r.num)
}

// leakyBucket is the leaky bucket as a meter: each admitted unit pours one
// unit of water into a bucket of size burst, which leaks limit per window; a
// request whose water would overflow the bucket is rejected and pours
// nothing. Once the bucket is full, admissions are spaced window/limit apart.
type leakyBucket struct {
	r     *rule
	water int64 // scaled units in the bucket
	last  int64
}

func (m *leakyBucket) advance(now int64) {
	m.water -= flow(now-m.last, m.r.num, m.water)
	m.last = max(m.last, now)
}

func (m *leakyBucket) fits(cost int64) (bool, int64) {
	if cost > m.r.burst {
		return false, never
	}
	over := m.water + cost*m.r.den - m.r.fullScale
	if over <= 0 {
		return true, 0
	}
	return false, ceilDiv(over, m.r.num)
}

func (m *leakyBucket) take(cost int64) { m.water += cost * m.r.den }

// charge pours a refused request's water too: the bucket holds more than
// its size, up to twice it (a whole burst of debt, as the token bucket).
func (m *leakyBucket) charge(cost int64) {
	m.water = min(m.water+cost*m.r.den, 2*m.r.fullScale)
}

func (m *leakyBucket) status() (int64, int64) {
	return max(0, (m.r.fullScale-m.water)/m.r.den), ceilDiv(m.water, m.r.num)
}

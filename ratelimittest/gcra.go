package ratelimittest

// mixed is an exact time ns + frac/num nanoseconds, 0 <= frac < num, where
// num is the rule's reduced rate numerator; the emission interval
// T = window/limit = den/num ns is such a number.
type mixed struct{ ns, frac int64 }

// mixedOf returns scaled/num as a mixed number, for scaled >= 0.
func mixedOf(scaled, num int64) mixed { return mixed{scaled / num, scaled % num} }

func (a mixed) add(b mixed, num int64) mixed {
	s := mixed{a.ns + b.ns, a.frac + b.frac}
	if s.frac >= num {
		s.ns++
		s.frac -= num
	}
	return s
}

func (a mixed) sub(b mixed, num int64) mixed {
	s := mixed{a.ns - b.ns, a.frac - b.frac}
	if s.frac < 0 {
		s.ns--
		s.frac += num
	}
	return s
}

func (a mixed) less(b mixed) bool { return a.ns < b.ns || (a.ns == b.ns && a.frac < b.frac) }

// ceil rounds up to whole nanoseconds.
func (a mixed) ceil() int64 {
	if a.frac > 0 {
		return a.ns + 1
	}
	return a.ns
}

// gcra is the generic cell rate algorithm in its virtual-scheduling form.
// It stores the theoretical arrival time tat of the next unit. With emission
// interval T and tolerance tau = (burst-1)*T, a unit arriving at t conforms
// if t >= tat - tau; it then moves tat to max(tat, t) + T. A request of cost
// c is admitted if all its units conform, which is
// max(tat, t) - t <= (burst-c)*T.
type gcra struct {
	r   *rule
	now int64
	tat mixed
}

func (m *gcra) advance(now int64) {
	m.now = now
	if m.tat.less(mixed{ns: now}) {
		m.tat = mixed{ns: now}
	}
}

func (m *gcra) fits(cost int64) (bool, int64) {
	if cost > m.r.burst {
		return false, never
	}
	limit := mixedOf((m.r.burst-cost)*m.r.den, m.r.num) // (burst-c)*T
	ahead := m.tat.sub(mixed{ns: m.now}, m.r.num)       // tat - now
	if !limit.less(ahead) {
		return true, 0
	}
	// Conforms once now' >= tat - (burst-c)*T.
	return false, m.tat.sub(limit, m.r.num).ceil() - m.now
}

func (m *gcra) take(cost int64) {
	m.tat = m.tat.add(mixedOf(cost*m.r.den, m.r.num), m.r.num)
}

// charge moves the theoretical arrival time for a refused request too, up
// to a whole burst of debt: tat - now <= 2*burst*T, the bound the buckets
// keep.
func (m *gcra) charge(cost int64) {
	m.take(cost)
	if most := (mixed{ns: m.now}).add(mixedOf(2*m.r.fullScale, m.r.num), m.r.num); most.less(m.tat) {
		m.tat = most
	}
}

func (m *gcra) status() (int64, int64) {
	ahead := m.tat.sub(mixed{ns: m.now}, m.r.num)
	scaled := ahead.ns*m.r.num + ahead.frac // (tat-now)*num <= 2*burst*den
	return max(0, (m.r.fullScale-scaled)/m.r.den), ahead.ceil()
}

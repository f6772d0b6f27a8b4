package ratelimittest

import (
	"sync"
	"sync/atomic"
)

// limiter holds every key's meters. Keys live in a sync.Map, each behind
// its own mutex, so requests for different keys never wait for each other.
type limiter struct {
	rules []*rule
	keys  sync.Map // string -> *keyState
	// chargeRefused charges a refused request to every policy as if it
	// had been admitted (WithChargeRefused).
	chargeRefused bool

	newKeys  atomic.Int64 // keys created since the last sweep
	sweeping atomic.Bool
}

// sweepEvery is how many new keys trigger a sweep of keys whose quota is
// fully restored (so memory stays bounded when keys come and go).
const sweepEvery = 4096

type keyState struct {
	mu     sync.Mutex
	last   int64 // latest time seen; time never runs backwards for a key
	meters []meter
	dead   bool // removed by a sweep; look the key up again
}

// decision is the outcome for one request under every policy.
type decision struct {
	admitted bool
	// wait is the time until the request would be admitted (the largest
	// wait of the policies that refused it), or never.
	wait   int64
	status []policyStatus // one per rule, after charging
	now    int64          // the (monotonic) time the decision was made at
}

// policyStatus is what the headers say about one policy.
type policyStatus struct {
	rule      *rule
	remaining int64
	reset     int64 // ns until fully restored, or for a refusal until admitted
	refused   bool  // this policy refused the request
	wait      int64 // when refused: ns until it would admit, or never
}

func newLimiter(rules []*rule) *limiter { return &limiter{rules: rules} }

// decide admits or refuses a request of the given costs (one per rule) for
// key at now, charging every policy only when all admit it.
func (l *limiter) decide(key string, now int64, costs []int64, out []policyStatus) decision {
	for {
		ks := l.state(key, now)
		ks.mu.Lock()
		if ks.dead {
			ks.mu.Unlock()
			continue
		}
		d := ks.decideLocked(l.rules, now, costs, out, l.chargeRefused)
		ks.mu.Unlock()
		return d
	}
}

// fits reports whether a request of the given costs for key would be
// admitted at now, and if not how long until it would be (if nothing else
// is admitted first), or never. It charges nothing and opens no anchored
// window: it only brings the key's meters to now, as the next request would,
// so what any later request finds is unchanged. A key that holds no state
// is answered from fresh meters, which are not kept.
func (l *limiter) fits(key string, now int64, costs []int64) (bool, int64) {
	if v, ok := l.keys.Load(key); ok {
		ks := v.(*keyState)
		ks.mu.Lock()
		defer ks.mu.Unlock()
		if !ks.dead {
			now = max(now, ks.last)
			ks.last = now
			return fitsAll(ks.meters, now, costs)
		}
	}
	meters := make([]meter, len(l.rules))
	for i, r := range l.rules {
		meters[i] = r.newMeter(now)
	}
	return fitsAll(meters, now, costs)
}

// fitsAll advances meters to now and reports whether every one admits its
// cost, and if not the longest wait (or never).
func fitsAll(meters []meter, now int64, costs []int64) (bool, int64) {
	ok, wait := true, int64(0)
	for i, m := range meters {
		m.advance(now)
		fit, w := m.fits(costs[i])
		if fit {
			continue
		}
		ok = false
		switch {
		case w == never || wait == never:
			wait = never
		case w > wait:
			wait = w
		}
	}
	return ok, wait
}

func (ks *keyState) decideLocked(rules []*rule, now int64, costs []int64, out []policyStatus, chargeRefused bool) decision {
	if now < ks.last {
		now = ks.last
	}
	ks.last = now
	d := decision{admitted: true, now: now, status: out[:len(rules)]}
	for i, m := range ks.meters {
		m.advance(now)
		if a, ok := m.(arriver); ok {
			a.arrive()
		}
		ok, wait := m.fits(costs[i])
		d.status[i] = policyStatus{rule: rules[i], refused: !ok, wait: wait}
		if ok {
			continue
		}
		d.admitted = false
		switch {
		case wait == never || d.wait == never:
			d.wait = never
		case wait > d.wait:
			d.wait = wait
		}
	}
	// A refusal is charged too (WithChargeRefused) unless no wait would
	// admit the request: then it is not a matter of rate.
	charged := !d.admitted && chargeRefused && d.wait != never
	if charged {
		// Charging moves the time a retry would be admitted, in any
		// policy (one that admitted this request may be full now): the
		// wait becomes the exact time until the same costs fit again.
		d.wait = 0
	}
	for i, m := range ks.meters {
		switch {
		case d.admitted:
			m.take(costs[i])
		case charged:
			m.charge(costs[i])
			if ok, wait := m.fits(costs[i]); !ok {
				d.wait = max(d.wait, wait)
				if d.status[i].refused {
					d.status[i].wait = wait
				}
			}
		}
		st := &d.status[i]
		st.remaining, st.reset = m.status()
		if st.refused && st.wait != never {
			// A refusal's reset is when this policy would admit the
			// request, so that it agrees with Retry-After.
			st.reset = st.wait
		}
	}
	return d
}

func (l *limiter) state(key string, now int64) *keyState {
	if v, ok := l.keys.Load(key); ok {
		return v.(*keyState)
	}
	ks := &keyState{last: now, meters: make([]meter, len(l.rules))}
	for i, r := range l.rules {
		ks.meters[i] = r.newMeter(now)
	}
	v, loaded := l.keys.LoadOrStore(key, ks)
	if !loaded && l.newKeys.Add(1) >= sweepEvery {
		l.sweep(now)
	}
	return v.(*keyState)
}

// sweep drops keys whose every policy is fully restored: a fresh state is
// the same as theirs.
func (l *limiter) sweep(now int64) {
	if !l.sweeping.CompareAndSwap(false, true) {
		return
	}
	defer l.sweeping.Store(false)
	l.newKeys.Store(0)
	l.keys.Range(func(k, v any) bool {
		ks := v.(*keyState)
		ks.mu.Lock()
		idle := true
		t := max(now, ks.last)
		ks.last = t
		for _, m := range ks.meters {
			m.advance(t)
			if _, reset := m.status(); reset > 0 {
				idle = false
				break
			}
		}
		if idle {
			ks.dead = true
			l.keys.CompareAndDelete(k, ks)
		}
		ks.mu.Unlock()
		return true
	})
}

// keyCount reports how many keys hold state (for tests).
func (l *limiter) keyCount() int {
	n := 0
	l.keys.Range(func(any, any) bool { n++; return true })
	return n
}

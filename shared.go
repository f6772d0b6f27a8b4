package headway

import (
	"context"
	"time"

	"github.com/headway-go/headway/pace"
)

// A shared store (Redis) costs a round trip or two per update, and only the
// request whose turn it is in its key's line reserves: one lease per round
// trip, whatever the quota allows. On a loaded Redis a fleet of three ran at
// a third of its 50/s quota. So when the line holds more requests like the
// one whose turn it is (same route, no cost, no cap or limiter of the
// caller's), it reserves for them too, in the same update, up to
// aheadMax: the leases wait in the line's pool, and the requests whose turn
// comes take one instead of a round trip. Leases nobody takes are given
// back when the line empties.

// aheadMax bounds the leases reserved in one update.
const aheadMax = 8

// pooled is a lease reserved ahead for a request of route.
type pooled struct {
	lease pace.Lease
	route string
}

// shared reports whether p's store is one that reserving ahead is for: not
// this process's memory.
func (p *pacer) shared() bool {
	if p.mem != nil {
		return false
	}
	_, mem := p.store.(*pace.MemoryStore)
	return !mem
}

// ahead returns how many leases to reserve for the requests behind t in its
// line that are like r: of its route, among the first waiting of each
// priority (0 when r cannot share).
func (kw *keyWaiters) ahead(t ticket, r *pace.Request, caps []int, limiters bool) int {
	if len(r.Cost) > 0 || len(caps) > 0 || limiters {
		return 0
	}
	kw.mu.Lock()
	defer kw.mu.Unlock()
	// The first few waiting of each priority, of r's route.
	n := 0
	for _, lv := range kw.lineOf(t.q).levels {
		for i := range min(lv.q.len(), 2*aheadMax) {
			if w := lv.q.at(i); !w.gone && w.route == r.Route {
				if n++; n == aheadMax-1 {
					return n
				}
			}
		}
	}
	return n
}

// pool keeps leases reserved ahead for route in t's line.
func (kw *keyWaiters) pool(t ticket, route string, ls []pace.Lease) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	wl := kw.lineOf(t.q)
	for _, l := range ls {
		wl.pool = append(wl.pool, pooled{lease: l, route: route})
	}
}

// takePooled returns a lease reserved ahead in t's line for a request like
// r (its route, and no cost), if one is there.
func (kw *keyWaiters) takePooled(t ticket, r *pace.Request) (pace.Lease, bool) {
	if len(r.Cost) > 0 {
		return pace.Lease{}, false
	}
	route := r.Route
	kw.mu.Lock()
	defer kw.mu.Unlock()
	wl := kw.lineOf(t.q)
	for i, pl := range wl.pool {
		if pl.route == route {
			wl.pool = append(wl.pool[:i], wl.pool[i+1:]...)
			return pl.lease, true
		}
	}
	return pace.Lease{}, false
}

// reserveAhead is reserve for a shared store: it reserves a lease for the
// request and, if it gets one, up to n more for the requests like it behind
// it, in the same update.
func (p *pacer) reserveAhead(ctx context.Context, key string, now time.Time, preq pace.Request, n int) (pace.Decision, []pace.Lease, error) {
	var d pace.Decision
	var extra []pace.Lease
	err := pace.Apply(ctx, p.store, key, func(s *pace.State) error {
		extra = extra[:0] // the update may be tried again on a newer state
		d = s.Reserve(now, preq, &p.cfg)
		for i := 0; d.OK && i < n; i++ {
			e := s.Reserve(now, preq, &p.cfg)
			if !e.OK {
				break
			}
			extra = append(extra, e.Lease)
		}
		return nil
	})
	return d, extra, err
}

// givePoolBack cancels the leases left in the pools of key's empty lines.
func (p *pacer) givePoolBack(key string, ls []pace.Lease) {
	if len(ls) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	pace.Apply(ctx, p.store, key, func(s *pace.State) error {
		for _, l := range ls {
			s.Cancel(l, &p.cfg)
		}
		return nil
	})
}

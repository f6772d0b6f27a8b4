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

// A lease reserved ahead tells the state that its request went when it was
// reserved, though it goes when its turn comes: later by the time the
// holder takes to pass the turn on, and the model, which orders answers by
// when their requests went, reads the quota less well (a fleet of three on
// a Redis on loopback was refused 3-5 times in 300, where it was once
// without). So only a store slow enough that its round trips, not the
// quota, would set the pace reserves ahead: one whose reserves took
// aheadMinRTT or more lately.
const aheadMinRTT = 2 * time.Millisecond

// slowStore reports whether p's store has been slow enough lately for
// reserving ahead (aheadMinRTT).
func (p *pacer) slowStore() bool { return p.storeRTT.Load() >= int64(aheadMinRTT) }

// timedStore records that a reserve in the shared store took d: a moving
// average over about the last eight.
func (p *pacer) timedStore(d time.Duration) {
	old := p.storeRTT.Load()
	p.storeRTT.Store(old + (int64(max(d, 0))-old)/8)
}

// pooled is a lease reserved ahead for a request of route.
type pooled struct {
	lease pace.Lease
	route string
	at    time.Time // when it was put in the pool
}

// A lease reserved ahead may wait in its pool about as long as the store's
// round trip that it saves (poolAge). The requests it was reserved for have
// their turn as soon as the one before has taken its lease; one that waited
// longer was reserved for a request that left or is late, saves nothing
// over reserving afresh, and would tell the state it went when it was
// reserved (a fleet under the race detector sent six such leases 16 ms
// after they were reserved, into a quota that the answers meanwhile had
// shown spent): it is given back instead.
func (p *pacer) poolAge() time.Duration {
	return max(time.Duration(p.storeRTT.Load()), aheadMinRTT)
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

// pool keeps leases reserved ahead for route in t's line, from now.
func (kw *keyWaiters) pool(t ticket, route string, ls []pace.Lease, now time.Time) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	wl := kw.lineOf(t.q)
	for _, l := range ls {
		wl.pool = append(wl.pool, pooled{lease: l, route: route, at: now})
	}
}

// takePooled returns a lease reserved ahead in t's line for a request like
// r (its route, and no cost), if one is there that has not waited in the
// pool longer than maxAge at now, and the leases it found older: the
// caller gives them back.
func (kw *keyWaiters) takePooled(t ticket, r *pace.Request, now time.Time, maxAge time.Duration) (l pace.Lease, ok bool, stale []pace.Lease) {
	if len(r.Cost) > 0 {
		return pace.Lease{}, false, nil
	}
	route := r.Route
	kw.mu.Lock()
	defer kw.mu.Unlock()
	wl := kw.lineOf(t.q)
	keep := wl.pool[:0]
	for _, pl := range wl.pool {
		switch {
		case now.Sub(pl.at) > maxAge:
			stale = append(stale, pl.lease)
		case !ok && pl.route == route:
			l, ok = pl.lease, true
		default:
			keep = append(keep, pl)
		}
	}
	clear(wl.pool[len(keep):])
	wl.pool = keep
	return l, ok, stale
}

// unpool takes out of wl's pool one lease reserved ahead for route, as a
// request of route leaves the line before its turn, and returns it (the
// caller gives it back); kw.mu is held.
func (wl *waitLine) unpool(route string) []pace.Lease {
	for i, pl := range wl.pool {
		if pl.route == route {
			wl.pool = append(wl.pool[:i], wl.pool[i+1:]...)
			return []pace.Lease{pl.lease}
		}
	}
	return nil
}

// reserveAhead is reserve for a shared store: it reserves a lease for the
// request and, if it gets one, up to n more for the requests like it behind
// it, in the same update.
func (p *pacer) reserveAhead(ctx context.Context, key string, now time.Time, preq pace.Request, n int) (pace.Decision, []pace.Lease, error) {
	var d pace.Decision
	var extra []pace.Lease
	t0 := p.c.clock.Now()
	defer func() { p.timedStore(p.c.clock.Now().Sub(t0)) }()
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

// givePoolBack cancels, in its own goroutine, leases reserved ahead that
// no request will take (the pool of a line that emptied, of a request that
// left, or too old): the request that found them goes without waiting for
// the store.
func (p *pacer) givePoolBack(key string, ls []pace.Lease) {
	if len(ls) == 0 {
		return
	}
	go p.cancelLeases(key, ls)
}

// cancelLeases cancels leases ls of key in the store.
func (p *pacer) cancelLeases(key string, ls []pace.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	pace.Apply(ctx, p.store, key, func(s *pace.State) error {
		for _, l := range ls {
			s.Cancel(l, &p.cfg)
		}
		return nil
	})
}

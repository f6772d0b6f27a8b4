package headway

import (
	"net/http"
	"time"

	"github.com/headway-go/headway/pace"
)

// pacerOf returns rt's pacing layer (rt is NewTransport's).
func pacerOf(rt http.RoundTripper) *pacer {
	switch t := rt.(type) {
	case *pacer:
		return t
	case *retryTransport:
		p, _ := t.obs.(*pacer)
		return p
	}
	return nil
}

// SentOnCredit returns how many requests to key rt's pacing layer sent on
// credit (credit.go).
func SentOnCredit(rt http.RoundTripper, key string) int {
	kw := pacerOf(rt).keyWaiters(key)
	kw.fast.mu.Lock()
	defer kw.fast.mu.Unlock()
	n := len(kw.fast.recs)
	if kw.fast.base > 0 {
		n += int(kw.fast.base) - 1
	}
	return n
}

// InFlight tells key's state in rt's pacing layer of the requests sent on
// credit, and returns how many leases it counts in flight, and how many of
// those were lent to requests sent on credit.
func InFlight(rt http.RoundTripper, key string) (n, lent int) {
	p := pacerOf(rt)
	kw := p.keyWaiters(key)
	now := p.c.clock.Now()
	p.mem.UpdateInPlaceAt(now, key, func(s *pace.State) error {
		kw.fast.update(s, now, time.Time{}, &p.cfg, "", "", false, func() {})
		n = s.InFlight()
		return nil
	})
	kw.fast.mu.Lock()
	defer kw.fast.mu.Unlock()
	return n, len(kw.fast.lent)
}

// WithoutCredit makes the pacing layer ask the key's state for every
// request, as it did before credit.go: for comparisons.
func WithoutCredit() Option { return func(c *config) { c.noCredit = true } }

// WindowState returns key's count of requests in flight (keyWaiters.flying),
// its window's (learncap.go), and whether it has a window, or none for good.
func WindowState(rt http.RoundTripper, key string) (flying, inFlight int, lc bool, noWindow bool) {
	p := pacerOf(rt)
	v, ok := p.waiters.Load(key)
	if !ok {
		return -1, -1, false, false
	}
	kw := v.(*keyWaiters)
	kw.mu.Lock()
	defer kw.mu.Unlock()
	if kw.lc != nil {
		inFlight = kw.lc.inFlight
	}
	return kw.flying, inFlight, kw.lc != nil, kw.noWindow
}

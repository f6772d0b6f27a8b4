package headway

import "fmt"

// WithMaxInFlight caps the requests of a key (WithKey: per host by default)
// that are in flight at once to n: for an API that limits concurrent
// requests rather than, or as well as, their rate ("at most 4 requests at a
// time"). A request is in flight from when it is sent until its response's
// headers arrive (or it fails); the next waits in its key's line, in order
// and by priority (ContextWithPriority), and gives up as any wait does (its
// context, WithMaxWait). With patterns, as in WithQuota ("POST
// api.example.com/v1/jobs", "api.example.com/uploads/"), the cap counts and
// holds only the requests they match; declare as many caps as the API
// documents, and a request waits until each that matches it has room.
// Retries count as they are sent. WithMaxInFlight needs the pacing layer
// (it does nothing with WithoutPacing); it panics on n < 1 or an invalid
// pattern: they are programming errors.
func WithMaxInFlight(n int, patterns ...string) Option {
	if n < 1 {
		panic(fmt.Sprintf("headway: WithMaxInFlight(%d, %q): want n >= 1", n, patterns))
	}
	c := capRoute{n: n, routes: newRoutes(patterns...)} // panics on an invalid pattern
	return func(cfg *config) { cfg.caps = append(cfg.caps, c) }
}

// capRoute is an in-flight cap and the routes it governs.
type capRoute struct {
	n int
	routes
}

// acquire counts one more request in flight under each of caps, if each
// has room, and reports whether it did.
func (kw *keyWaiters) acquire(caps []int, limits []capRoute) bool {
	if len(caps) == 0 {
		return true
	}
	kw.mu.Lock()
	defer kw.mu.Unlock()
	if len(kw.flight) < len(limits) {
		kw.flight = append(kw.flight, make([]int, len(limits)-len(kw.flight))...)
	}
	for _, i := range caps {
		if kw.flight[i] >= limits[i].n {
			return false
		}
	}
	for _, i := range caps {
		kw.flight[i]++
	}
	kw.flying++
	return true
}

// release counts one request fewer in flight under each of caps and, when
// wake, wakes the requests that wait for room (not when the caller, which
// has its line's turn, gives back a place it took but did not use).
func (kw *keyWaiters) release(caps []int, wake bool) {
	if len(caps) == 0 {
		return
	}
	kw.mu.Lock()
	defer kw.mu.Unlock()
	kw.releaseLocked(caps)
	if wake {
		kw.wake()
	}
}

// releaseLocked is release, without waking, with kw.mu held.
func (kw *keyWaiters) releaseLocked(caps []int) {
	if len(caps) == 0 {
		return
	}
	for _, i := range caps {
		kw.flight[i]--
	}
	kw.flying--
}

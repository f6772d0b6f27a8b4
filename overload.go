package headway

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway/internal/decide"
)

// DefaultOverloadRatio is the overload throttle's K (WithOverloadThrottle):
// a key is sent at most about twice as many attempts as it accepts.
const DefaultOverloadRatio = 2

// WithOverloadThrottle sets the overload throttle's ratio k, or turns it off
// with k <= 0. The throttle holds back first attempts, not only retries,
// when a key's backend fails most of them, in the manner of client-side
// adaptive throttling (Google SRE book, ch. 21): over the last few seconds
// of a key, with requests counting the attempts answered or failed and the
// first attempts held back, and accepts the attempts answered with a
// status below 500 (a 429 is an answer: the pacing layer deals with it), a
// new request is held back with probability
//
//	(requests - k*accepts) / (requests + 1)
//
// once the key has about 50 outcomes a second (a client that sends a few
// is left to its retry budget), and never more than 90% of them, so that a trickle still goes and a
// backend that heals is seen: its accepts raise the share sent again within
// about a second. A request held back is not sent; it fails at once with a
// *RetryError (Reason ReasonOverloaded) that wraps ErrOverloaded. A healthy
// key (requests <= k*accepts) holds nothing back. The default k is
// DefaultOverloadRatio; the throttle is part of the retry layer (off with
// WithoutRetries).
func WithOverloadThrottle(k float64) Option {
	return func(c *config) {
		if math.IsNaN(k) || k <= 0 {
			c.overload = 0
			return
		}
		c.overload = k
	}
}

// Overload throttle's memory and bounds.
const (
	// overloadTau is how fast the counts forget: an outcome weighs
	// e^(-age/overloadTau). At 200 ms the share sent is back above 90%
	// 0.5-0.9 s after a backend heals (TestOverloadThrottle, 80 runs); at
	// 250 ms it took 0.6-1.2 s, past the second the test asks for in one
	// run in 20 or 40.
	overloadTau = 200 * time.Millisecond
	// overloadMaxHold is the largest share of requests held back.
	overloadMaxHold = 0.9
	// overloadMinRequests is the least count of requests (decayed) under
	// which nothing is held back: a client that sends a few requests a
	// second is left to its retry budget.
	overloadMinRequests = 10
)

// overload is the overload throttle's state, per key.
type overload struct {
	keys    sync.Map // key -> *overloadKey
	added   atomic.Int64
	sweeper background
}

// overloadKey holds a key's decayed counts of requests and accepts.
type overloadKey struct {
	mu       sync.Mutex
	requests float64
	accepts  float64
	at       int64 // when the counts were last decayed, Unix nanoseconds
	used     atomic.Bool
}

// get returns key's counts, creating them when create (nil otherwise: a
// key that never failed keeps none).
func (o *overload) get(key string, create bool) *overloadKey {
	if !create && o.added.Load() == 0 {
		return nil // no request has failed yet: no key to look up
	}
	if v, ok := o.keys.Load(key); ok {
		k := v.(*overloadKey)
		if !k.used.Load() {
			k.used.Store(true)
		}
		return k
	}
	if !create {
		return nil
	}
	v, loaded := o.keys.LoadOrStore(key, &overloadKey{})
	if !loaded && o.added.Add(1)%sweepEvery == 0 {
		o.sweeper.run(func() {
			o.keys.Range(func(k, v any) bool {
				if !v.(*overloadKey).used.Swap(false) {
					o.keys.Delete(k)
				}
				return true
			})
		})
	}
	k := v.(*overloadKey)
	k.used.Store(true)
	return k
}

// decay ages the counts to now; k.mu is held.
func (k *overloadKey) decay(now int64) {
	if dt := now - k.at; dt > 0 {
		f := math.Exp(-float64(dt) / float64(overloadTau))
		k.requests *= f
		k.accepts *= f
		k.at = now
	} else if k.at == 0 {
		k.at = now
	}
}

// admit reports whether a first attempt to key, asked for now, may be
// sent: false holds it back, with the probability the counts give (drawn
// from rnd), and counts it as a request not accepted. One sent is counted
// when its outcome is known (record): requests still on their way are
// neither refused nor accepted yet.
func (o *overload) admit(key string, ratio float64, clk Clock, rnd *decide.Rand) bool {
	k := o.get(key, false)
	if k == nil {
		return true // nothing failed
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.decay(clk.Now().UnixNano())
	hold := (k.requests - ratio*k.accepts) / (k.requests + 1)
	if hold <= 0 || k.requests < overloadMinRequests || rnd.Float64() >= min(hold, overloadMaxHold) {
		return true
	}
	k.requests++
	return false
}

// record counts an attempt to key whose outcome is known now: accepted
// when it was answered with a status below 500.
func (o *overload) record(key string, clk Clock, accepted bool) {
	k := o.get(key, !accepted)
	if k == nil {
		return // a key counts from its first failure
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.decay(clk.Now().UnixNano())
	k.requests++
	if accepted {
		k.accepts++
	}
}

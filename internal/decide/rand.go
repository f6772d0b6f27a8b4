package decide

import (
	"math/rand/v2"
	"sync"
)

// Rand makes a rand.Source safe for concurrent use and turns it into
// uniform floats. A nil source uses math/rand/v2's goroutine-safe global
// generator. It is itself a rand.Source, so one user-supplied source can
// back several consumers under one lock.
type Rand struct {
	mu  sync.Mutex
	src rand.Source
}

// NewRand wraps src (nil: the global generator).
func NewRand(src rand.Source) *Rand {
	if r, ok := src.(*Rand); ok {
		return r
	}
	return &Rand{src: src}
}

// Uint64 implements rand.Source.
func (r *Rand) Uint64() uint64 {
	if r == nil || r.src == nil {
		return rand.Uint64()
	}
	r.mu.Lock()
	u := r.src.Uint64()
	r.mu.Unlock()
	return u
}

// Float64 returns a uniform number in [0, 1).
func (r *Rand) Float64() float64 { return float64(r.Uint64()>>11) / (1 << 53) }

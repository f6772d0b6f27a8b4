package headway

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/headway-go/headway/internal/decide"
	"github.com/headway-go/headway/ratelimit"
)

// Default backoff: the first retry waits up to DefaultBaseDelay, each further
// retry doubles that, and no backoff exceeds DefaultMaxDelay.
const (
	DefaultBaseDelay = 500 * time.Millisecond
	DefaultMaxDelay  = 30 * time.Second
)

// Backoff decides how long to wait before a retry when the server has not
// said (no Retry-After). Implementations must be safe for concurrent use.
//
// retry counts retries of one request from 1; prev is the delay this Backoff
// returned for the previous retry of the same request (0 before the first),
// which lets decorrelated strategies grow from it. Delay must return a
// non-negative duration; the retry layer clamps what it gets anyway.
type Backoff interface {
	Delay(retry int, prev time.Duration) time.Duration
}

// BackoffFunc adapts a function to the Backoff interface.
type BackoffFunc func(retry int, prev time.Duration) time.Duration

// Delay calls f.
func (f BackoffFunc) Delay(retry int, prev time.Duration) time.Duration { return f(retry, prev) }

// NewBackoff returns capped exponential backoff with the given jitter: the
// undisturbed delay before retry n is min(cap, base*2^(n-1)). src supplies
// the randomness (nil: math/rand/v2's global generator); pass a seeded
// source for reproducible delays. It is made safe for concurrent use.
//
// Edge inputs are made safe rather than rejected: a negative base counts as
// 0, a cap <= 0 means "no cap below ratelimit.MaxDuration" (100 years), a cap below base wins over
// base, and any retry number (even 1000) gives a finite delay.
func NewBackoff(base, cap time.Duration, jitter Jitter, src rand.Source) Backoff {
	return newExpBackoff(base, cap, jitter, decide.NewRand(src))
}

// newExpBackoff is NewBackoff with an already locked source, so a transport
// can share one source, under one lock, between backoff and spread.
func newExpBackoff(base, cap time.Duration, jitter Jitter, rnd *decide.Rand) *expBackoff {
	base = max(base, 0)
	if cap <= 0 || cap > ratelimit.MaxDuration {
		cap = ratelimit.MaxDuration
	}
	base = min(base, cap)
	return &expBackoff{base: base, cap: cap, jitter: jitter, rnd: rnd}
}

type expBackoff struct {
	base, cap time.Duration
	jitter    Jitter
	rnd       *decide.Rand
}

// exponential returns min(cap, base*2^(retry-1)) without overflowing.
func (b *expBackoff) exponential(retry int) time.Duration {
	if retry < 1 {
		retry = 1
	}
	if b.base == 0 {
		return 0
	}
	if retry > 63 {
		return b.cap
	}
	f := float64(b.base) * math.Ldexp(1, retry-1)
	if f >= float64(b.cap) {
		return b.cap
	}
	return time.Duration(f)
}

// between returns a uniform duration in [lo, hi].
func (b *expBackoff) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(b.rnd.Float64()*float64(hi-lo))
}

// Delay implements Backoff.
func (b *expBackoff) Delay(retry int, prev time.Duration) time.Duration {
	switch b.jitter {
	case JitterEqual:
		t := b.exponential(retry)
		return b.between(t/2, t)
	case JitterDecorrelated:
		prev = max(prev, b.base)
		hi := b.cap
		if prev < b.cap/3 {
			hi = 3 * prev
		}
		return b.between(max(b.base, hi/3), hi)
	case JitterNone:
		return b.exponential(retry)
	default: // JitterFull and unknown values: the safest spread.
		return b.between(0, b.exponential(retry))
	}
}

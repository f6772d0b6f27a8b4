package headway

import (
	"math"
	"sync"
	"sync/atomic"
)

// Default retry budget: retries of failures (5xx and transport errors) may
// add at most 10% to the requests sent to one key, plus a reserve of 10.
const (
	DefaultBudgetRatio   = 0.1
	DefaultBudgetReserve = 10
)

// RetryBudget bounds how many retries of failures (5xx and transport
// errors) a client adds on top of its requests, per key, so that an outage is
// not multiplied by every client's retries (gRPC A6 retry throttling, Finagle
// RetryBudget, SRE book ch. 22). Retries of 429s are not counted: they are
// governed by the server's Retry-After. Implementations must be safe for
// concurrent use.
type RetryBudget interface {
	// Deposit records a new request (its first attempt) to key.
	Deposit(key string)
	// Withdraw asks for one retry to key and reports whether it is allowed.
	Withdraw(key string) bool
}

// NewRetryBudget returns a token-bucket retry budget per key. Each key starts
// with reserve tokens and can hold at most max(reserve, 1); every request
// deposits ratio tokens and every retry withdraws one. Over N requests to a
// key at most reserve + ratio*N retries happen, so with the defaults (0.1,
// 10) a total outage costs about 1.1 attempts per request instead of
// WithMaxAttempts. A negative or NaN ratio counts as 0,
// and so does a negative reserve.
//
// The in-process budget keeps one small entry per key. A key that is not
// used between two sweeps (one every 1024 new keys) is forgotten, so a
// client that talks to many hosts does not keep them all: a forgotten key
// starts again with the reserve.
func NewRetryBudget(ratio float64, reserve int) RetryBudget {
	if math.IsNaN(ratio) || ratio < 0 {
		ratio = 0
	}
	ratio = min(ratio, math.MaxInt32) // +Inf fills the bucket at every request
	reserve = max(reserve, 0)
	// Tokens are counted in thousandths, so that ten deposits of 0.1 make
	// exactly one retry (float sums would fall just short of it).
	return &tokenBudget{
		ratio:   int64(math.Round(ratio * tokenScale)),
		reserve: int64(min(reserve, math.MaxInt32)) * tokenScale,
		max:     int64(max(min(reserve, math.MaxInt32), 1)) * tokenScale,
	}
}

// tokenScale is the number of budget units in one retry.
const tokenScale = 1000

type tokenBudget struct {
	ratio, reserve, max int64                        // in thousandths of a retry
	keys                sync.Map                     // string -> *budgetBucket
	last                atomic.Pointer[budgetBucket] // the bucket looked up last
	added               atomic.Int64
	sweeper             background
}

// budgetBucket is one key's tokens, changed by compare-and-swap: a request
// to a key whose bucket is full (the common case) only reads it.
type budgetBucket struct {
	tokens atomic.Int64
	used   atomic.Bool // since the last sweep
	gone   atomic.Bool // swept: no longer in keys
	key    string
}

// bucket returns key's bucket, creating it. The key used last is found
// without the map: most clients call one API.
func (b *tokenBudget) bucket(key string) *budgetBucket {
	k := b.last.Load()
	if k == nil || k.key != key || k.gone.Load() {
		v, ok := b.keys.Load(key)
		if !ok {
			var loaded bool
			fresh := &budgetBucket{key: key}
			fresh.tokens.Store(b.reserve)
			v, loaded = b.keys.LoadOrStore(key, fresh)
			if !loaded && b.added.Add(1)%sweepEvery == 0 {
				b.sweeper.run(b.sweep)
			}
		}
		k = v.(*budgetBucket)
		b.last.Store(k)
	}
	if !k.used.Load() {
		k.used.Store(true)
	}
	return k
}

// sweepEvery is how many new keys pass between sweeps of idle keys.
const sweepEvery = 1024

// sweep forgets the keys not used since the previous sweep.
func (b *tokenBudget) sweep() {
	b.keys.Range(func(k, v any) bool {
		if k := v.(*budgetBucket); !k.used.Swap(false) {
			b.keys.Delete(k.key)
			k.gone.Store(true)
		}
		return true
	})
}

// Deposit implements RetryBudget.
func (b *tokenBudget) Deposit(key string) {
	if b.ratio == 0 {
		return
	}
	k := b.bucket(key)
	for {
		t := k.tokens.Load()
		n := min(t+b.ratio, b.max)
		if n == t || k.tokens.CompareAndSwap(t, n) {
			return
		}
	}
}

// Withdraw implements RetryBudget.
func (b *tokenBudget) Withdraw(key string) bool {
	k := b.bucket(key)
	for {
		t := k.tokens.Load()
		if t < tokenScale {
			return false
		}
		if k.tokens.CompareAndSwap(t, t-tokenScale) {
			return true
		}
	}
}

package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/headway-go/headway/pace"
)

// Store is a pace.Store in Redis: each pacing key's pace.State is one Redis
// string, replaced atomically by a Lua script, so that every process using
// the same Redis and prefix paces from the same state (see the package
// documentation). It falls back to pacing in this process, or fails, while
// Redis is unavailable. A Store is safe for concurrent use; make one per
// process and share it between transports.
type Store struct {
	client redis.UniversalClient
	config

	outage atomic.Pointer[outage] // nil while Redis is in use
	epochs atomic.Uint64          // outages so far
	evMu   sync.Mutex             // orders the switches and their reports
	locks  keyLocks
}

var (
	_ pace.Store   = (*Store)(nil)
	_ pace.InPlace = (*Store)(nil)
)

// New returns a Store that keeps pacing state in Redis through client (a
// *redis.Client, a *redis.ClusterClient, a Sentinel-backed failover client,
// ...). The client's ContextTimeoutEnabled option is recommended, so that a
// call the store gives up on frees its connection at once; the store bounds
// every call either way.
func New(client redis.UniversalClient, opts ...Option) *Store {
	s := &Store{client: client}
	s.config = config{prefix: DefaultPrefix, timeout: DefaultTimeout, retry: DefaultRetryInterval, now: time.Now}
	for _, o := range opts {
		o(&s.config)
	}
	s.locks.m = map[string]*keyLock{}
	return s
}

// RedisKey returns the Redis key that holds key's state: the prefix, and
// the hex SHA-256 of key as a hash tag.
func (s *Store) RedisKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	b := make([]byte, 0, len(s.prefix)+2+2*len(sum))
	b = append(b, s.prefix...)
	b = append(b, '{')
	b = hex.AppendEncode(b, sum[:])
	b = append(b, '}')
	return string(b)
}

// Mode says where the store keeps pacing state now: Shared (in Redis), or,
// while Redis is unavailable, Local or Unavailable (WithFailClosed).
func (s *Store) Mode() Mode {
	switch {
	case s.outage.Load() == nil:
		return Shared
	case s.failClosed:
		return Unavailable
	default:
		return Local
	}
}

// Load implements pace.Store: it returns key's state from Redis, or from
// the fallback while Redis is unavailable. Redis forgets a state when its
// time to live ends, a millisecond or so after the state's Expires.
func (s *Store) Load(ctx context.Context, key string) (pace.State, error) {
	if err := ctx.Err(); err != nil {
		return pace.State{}, err
	}
	if o := s.current(); o != nil {
		return s.loadLocal(ctx, o, key)
	}
	rkey := s.RedisKey(key)
	st, err := s.get(ctx, rkey)
	if err != nil {
		o, err := s.failed(ctx, err, rkey)
		if o == nil {
			return pace.State{}, err
		}
		return s.loadLocal(ctx, o, key)
	}
	return st, nil
}

// CompareAndSwap implements pace.Store: it replaces key's state in Redis if
// its version is still version, or, while Redis is unavailable, in the
// fallback. A version that Load returned from Redis is not valid in the
// fallback, nor one from the fallback in Redis: the swap reports false, and
// pace.Update loads the state again from where it now is.
func (s *Store) CompareAndSwap(ctx context.Context, key string, version uint64, next pace.State) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if o := s.current(); o != nil {
		return s.swapLocal(ctx, o, key, version, next)
	}
	if version&localTag != 0 {
		return false, nil // loaded from the fallback before Redis returned
	}
	rkey := s.RedisKey(key)
	ok, err := s.swap(ctx, rkey, version, next)
	if err != nil {
		o, err := s.failed(ctx, err, rkey)
		if o == nil {
			return false, err
		}
		return false, nil // what Redis did is unknown: load again, locally
	}
	return ok, nil
}

// maxAttempts bounds UpdateInPlace's compare-and-swap loop, as
// pace.Update's.
const maxAttempts = 64

// UpdateInPlace implements pace.InPlace, which pace.Apply and pace.Update
// use: it loads key's state, applies f, and swaps the result in, again
// until no other process changed the state meanwhile. The updates of one
// key in this process wait for one another, so that they do not race
// through Redis. An error from f is returned as it is, and nothing is
// stored.
func (s *Store) UpdateInPlace(ctx context.Context, key string, f func(*pace.State) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if o := s.current(); o != nil {
		return s.updateLocal(ctx, o, key, f)
	}
	rkey := s.RedisKey(key)
	unlock, err := s.locks.lock(ctx, rkey)
	if err != nil {
		return err
	}
	defer unlock()
	for range maxAttempts {
		if o := s.outage.Load(); o != nil {
			return s.updateLocal(ctx, o, key, f)
		}
		st, err := s.get(ctx, rkey)
		if err == nil {
			version := st.Version
			if err := f(&st); err != nil {
				return err
			}
			var ok bool
			if ok, err = s.swap(ctx, rkey, version, st); err == nil {
				if ok {
					return nil
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				continue
			}
		}
		o, err := s.failed(ctx, err, rkey)
		if o == nil {
			return err
		}
		return s.updateLocal(ctx, o, key, f)
	}
	return pace.ErrConflict
}

// get loads the state under rkey from Redis.
func (s *Store) get(ctx context.Context, rkey string) (pace.State, error) {
	val, err := call(s, ctx, "load", s.timeout, func(ctx context.Context) (string, error) {
		v, err := s.client.Get(ctx, rkey).Result()
		if errors.Is(err, redis.Nil) {
			return "", nil // no state: version 0
		}
		return v, err
	})
	if err != nil {
		return pace.State{}, err
	}
	// A state is returned until Redis expires it (PX, a millisecond or so
	// after its Expires): a state judged forgotten here by this clock,
	// while Redis still holds it, would give a version that the script,
	// once Redis has dropped it, no longer finds.
	st, ok := decode(val)
	if !ok && s.logger != nil {
		s.logger.LogAttrs(ctx, slog.LevelWarn, "redisstore: unreadable pacing state replaced",
			slog.String("redis_key", rkey))
	}
	return st, nil
}

// swap replaces the state under rkey with next if its version is version.
func (s *Store) swap(ctx context.Context, rkey string, version uint64, next pace.State) (bool, error) {
	now := s.now()
	val, err := encode(version+1, now, next)
	if err != nil {
		return false, err
	}
	ttl := ttlMillis(next.Expires, now)
	n, err := call(s, ctx, "compare-and-swap", s.timeout, func(ctx context.Context) (int64, error) {
		return casScript.Run(ctx, s.client, []string{rkey}, strconv.FormatUint(version, 10), val, ttl).Int64()
	})
	return n == 1, err
}

// ttlMillis returns the time to live, in milliseconds, of a state that
// expires at expires, written at now: at least one millisecond (Redis
// refuses PX 0), and pace.DefaultIdleTTL for a state without Expires.
func ttlMillis(expires, now time.Time) int64 {
	if expires.IsZero() {
		return pace.DefaultIdleTTL.Milliseconds()
	}
	d := expires.Sub(now)
	if d <= time.Millisecond {
		return 1
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// call runs fn against Redis within timeout, and returns at the timeout
// whether or not fn has: the go-redis client may not apply the deadline to
// its connection (ContextTimeoutEnabled), and then fn would wait on a
// stalled Redis for its read timeout. An error is the caller's context's
// error when that ended first.
func call[T any](s *Store, ctx context.Context, op string, timeout time.Duration, fn func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn(cctx)
		done <- result{v, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-cctx.Done():
		r.err = cctx.Err()
	}
	if r.err != nil {
		if err := ctx.Err(); err != nil {
			return r.v, err
		}
		if errors.Is(r.err, context.DeadlineExceeded) {
			r.err = &TimeoutError{Op: op, After: timeout}
		}
	}
	return r.v, r.err
}

// keyLocks serializes the updates of each key in this process; a lock is
// forgotten when nobody holds or waits for it.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{} // holds a token while locked
	refs int           // holders and waiters
}

// lock locks key, or gives up when ctx ends first, and returns the unlock.
func (l *keyLocks) lock(ctx context.Context, key string) (func(), error) {
	l.mu.Lock()
	k := l.m[key]
	if k == nil {
		k = &keyLock{ch: make(chan struct{}, 1)}
		l.m[key] = k
	}
	k.refs++
	l.mu.Unlock()
	select {
	case k.ch <- struct{}{}:
		return func() { <-k.ch; l.release(key, k) }, nil
	case <-ctx.Done():
		l.release(key, k)
		return nil, ctx.Err()
	}
}

func (l *keyLocks) release(key string, k *keyLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k.refs--; k.refs == 0 {
		delete(l.m, key)
	}
}

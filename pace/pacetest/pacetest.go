// Package pacetest checks that a pace.Store keeps the contract that pace
// relies on, in the spirit of testing/fstest: a store's own tests call
// TestStore with a function that returns a new, empty store, and every rule
// below is a subtest that names the rule it found broken.
//
// # The contract
//
// A Store holds one State per key and has two duties: Load a key's state,
// and CompareAndSwap it atomically. TestStore checks that
//
//   - Load of a key never written returns the zero State (Version 0) and no
//     error; Load creates nothing.
//   - CompareAndSwap at version 0 creates a key; at the key's current
//     version it replaces the state, which then has version+1 whatever
//     next.Version says; at any other version (stale, future, or 0 on a key
//     that exists) it reports false and changes nothing.
//   - A state reads back as it was written: its content, as
//     State.MarshalBinary encodes it, byte for byte (a store may keep those
//     bytes, or a deep copy made with State.Clone), and its Expires to the
//     nanosecond, as an instant (its location and monotonic clock reading
//     need not survive). The suite's states are built through pace's API
//     (Reserve, Complete, Cancel), as requests leave them: FullState has
//     policies, leases in flight, a pause, declared quotas and the rest.
//   - The store shares no memory with its callers: changing a State
//     through its methods (Reserve, Complete, which change its slices'
//     elements in place) after passing it to CompareAndSwap or after Load
//     returned it does not change what the store holds, and the store does
//     not change the caller's value either.
//   - Keys are arbitrary byte strings compared byte for byte, and isolated
//     from one another: the empty key is a key like any other, as are
//     long keys (8 KiB), Unicode, invalid UTF-8, NUL bytes, and the
//     characters a Redis store may treat specially (":" separators, "{}"
//     hash tags, "*?[]" glob patterns).
//   - CompareAndSwap is linearizable: 50 goroutines that each reserve (and
//     cancel) a lease 20 times on one key with pace.Update leave a state
//     that has granted exactly 1000 leases (the next lease is number 1001;
//     pace.Lease.Seq counts them) at version 1000, no two updates having
//     been granted the same lease number (each saw a different
//     predecessor); writers on different keys do not disturb one another.
//     pace.ErrConflict is retried there: it says the store was contended,
//     not wrong.
//   - pace.Update returns f's error and stores nothing, and honours a
//     cancelled context: when it fails with the context's error, nothing
//     of f's was stored, and when the key is contended it gives up with the
//     context's error instead of trying again.
//   - A state whose Expires has passed is forgotten: Load returns a State
//     with nothing in it but its Version, which is 0 or the version the
//     key last had (MemoryStore keeps the version until it sweeps the
//     key; a Redis key that expired is gone), and CompareAndSwap at that
//     version writes the key anew. A state whose Expires has not passed is
//     kept, and each CompareAndSwap sets the key's Expires anew, so a key
//     written again before it expires lives on. (The zero Expires is
//     never written by the suite: pace always sets one.)
//
// # Time
//
// A store judges Expires by some clock. The suite reads it (WithClock's now,
// time.Now by default) to set Expires, and moves it past a state's Expires
// either with WithClock's advance, at once, or, without advance, by waiting
// on the real clock for as long as WithExpiry allows. A unit test of an
// in-process store should use a fake clock and pass both; a store that
// expires keys on its own real clock, such as Redis, passes none, or only
// WithExpiry with short lives (the expiry subtests then take about ttl).
//
// The subtests run one at a time, so one fake clock may serve every store
// that newStore returns. newStore is called once per subtest and must return
// an empty store each time; a store on a shared server can use t.Name() for a
// fresh key prefix and t.Cleanup to remove what it wrote.
//
// # Example
//
// An in-process store on a fake clock:
//
//	func TestMemoryStore(t *testing.T) {
//		var mu sync.Mutex
//		now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
//		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
//		advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
//		pacetest.TestStore(t, func(t *testing.T) pace.Store {
//			return pace.NewMemoryStore(clock)
//		}, pacetest.WithClock(clock, advance))
//	}
//
// A store on a Redis server, which expires keys on its own clock:
//
//	func TestRedisStore(t *testing.T) {
//		client := redis.NewClient(&redis.Options{Addr: addr})
//		pacetest.TestStore(t, func(t *testing.T) pace.Store {
//			prefix := t.Name() + ":"
//			t.Cleanup(func() { deleteKeys(client, prefix) })
//			return redisstore.New(client, redisstore.WithPrefix(prefix))
//		}, pacetest.WithExpiry(200*time.Millisecond, 2*time.Second))
//	}
package pacetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/pace"
)

// An Option changes how TestStore exercises a store.
type Option func(*config)

// WithClock gives the clock that the stores judge Expires by. now reads it
// (nil: time.Now). advance, when not nil, moves it forward by d, and must
// return only once the store would judge by the new time; the expiry
// subtests then take no real time, and a store must forget a state as soon
// as its clock has passed the state's Expires. When advance is nil the suite
// waits on the real clock instead.
func WithClock(now func() time.Time, advance func(d time.Duration)) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
		c.advance = advance
	}
}

// WithExpiry sets how long the states that the expiry subtests expect to be
// forgotten live (ttl: their Expires is ttl after the clock's now when they
// are written), and, without an advance function, how long after that
// Expires the suite waits for the store to forget them (within) before it
// calls the state kept. With a fake clock the defaults are a minute and
// nothing; on real time, 250ms and 2s. On real time ttl must leave room
// for a few round trips to the store, and within for its clock's skew and
// its expiry's lag.
func WithExpiry(ttl, within time.Duration) Option {
	return func(c *config) {
		if ttl > 0 {
			c.ttl = ttl
		}
		if within > 0 {
			c.within = within
		}
	}
}

// config is TestStore's options.
type config struct {
	now     func() time.Time
	advance func(time.Duration)
	ttl     time.Duration // life of the states expected to expire
	within  time.Duration // real time: how long past Expires to wait
}

// sleep waits on the real clock; pacetest's own tests replace it.
var sleep = time.Sleep

// keep is how long the states that must not expire live: far longer than
// anything the suite waits for.
func (c *config) keep() time.Duration { return time.Hour + 10*c.ttl }

// TestStore checks that the stores newStore returns keep the Store contract
// (see the package documentation), each rule as a subtest of t. newStore is
// called once per subtest, with that subtest's t, and must return a new,
// empty store.
func TestStore(t *testing.T, newStore func(t *testing.T) pace.Store, opts ...Option) {
	t.Helper()
	c := &config{now: time.Now}
	for _, o := range opts {
		o(c)
	}
	if c.ttl <= 0 {
		if c.advance != nil {
			c.ttl = time.Minute
		} else {
			c.ttl = 250 * time.Millisecond
		}
	}
	if c.within <= 0 {
		c.within = 2 * time.Second
	}
	s := &suite{c: c, newStore: newStore}
	for _, st := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"LoadMissing", s.loadMissing},
		{"CreateRoundTrip", s.createRoundTrip},
		{"VersionAdvances", s.versionAdvances},
		{"NextVersionIgnored", s.nextVersionIgnored},
		{"StaleVersion", s.staleVersion},
		{"FutureVersion", s.futureVersion},
		{"CreateExisting", s.createExisting},
		{"NoSharedMemoryAfterCAS", s.noSharedAfterCAS},
		{"NoSharedMemoryAfterLoad", s.noSharedAfterLoad},
		{"KeysIsolated", s.keysIsolated},
		{"OddKeys", s.oddKeys},
		{"ConcurrentUpdatesOneKey", s.concurrentOneKey},
		{"ConcurrentUpdatesManyKeys", s.concurrentManyKeys},
		{"UpdateError", s.updateError},
		{"UpdateCancelled", s.updateCancelled},
		{"Expiry", s.expiry},
	} {
		t.Run(st.name, st.run)
	}
}

// suite holds what the subtests share.
type suite struct {
	c        *config
	newStore func(t *testing.T) pace.Store
}

// store returns a new store for t, failing t if there is none.
func (s *suite) store(t *testing.T) pace.Store {
	t.Helper()
	st := s.newStore(t)
	require.NotNil(t, st, "newStore returned a nil Store")
	return st
}

// load loads key, failing t on an error.
func load(t *testing.T, st pace.Store, key string) pace.State {
	t.Helper()
	got, err := st.Load(context.Background(), key)
	require.NoError(t, err, "Load(%q)", short(key))
	return got
}

// cas swaps key at version, failing t on an error, and reports whether it
// did.
func cas(t *testing.T, st pace.Store, key string, version uint64, next pace.State) bool {
	t.Helper()
	ok, err := st.CompareAndSwap(context.Background(), key, version, next)
	require.NoError(t, err, "CompareAndSwap(%q, %d)", short(key), version)
	return ok
}

// mustCAS swaps key at version and fails t unless it did.
func mustCAS(t *testing.T, st pace.Store, key string, version uint64, next pace.State) {
	t.Helper()
	require.True(t, cas(t, st, key, version, next),
		"CompareAndSwap(%q, %d) must succeed: the key's version is %d", short(key), version, version)
}

// requireState fails t unless got is want at version: the same content
// (MarshalBinary's bytes) and the same Expires instant.
func requireState(t *testing.T, want pace.State, version uint64, got pace.State, msg string, args ...any) {
	t.Helper()
	if d := sameState(want, version, got); d != "" {
		require.Fail(t, d, append([]any{msg}, args...)...)
	}
}

// requireForgotten fails t unless got says nothing but a version.
func requireForgotten(t *testing.T, got pace.State, msg string, args ...any) {
	t.Helper()
	require.True(t, got.Expires.IsZero(), append([]any{msg + ": its Expires is %v"}, append(args, got.Expires)...)...)
	require.Equal(t, emptyContent, content(t, got), append([]any{msg + ": it has content"}, args...)...)
}

// requireMissing fails t unless got is the zero State: version 0, nothing
// in it.
func requireMissing(t *testing.T, got pace.State, msg string, args ...any) {
	t.Helper()
	require.Equal(t, uint64(0), got.Version, append([]any{msg + ": its Version"}, args...)...)
	requireForgotten(t, got, msg, args...)
}

// short abbreviates a long key in messages.
func short(key string) string {
	if len(key) > 40 {
		return fmt.Sprintf("%s...(%d bytes)", key[:20], len(key))
	}
	return key
}

// small returns a small state that lives long: one that has granted n
// leases (see counter).
func (s *suite) small(n uint64) pace.State {
	return counter(n, s.c.now().Add(s.c.keep()))
}

func (s *suite) loadMissing(t *testing.T) {
	st := s.store(t)
	for _, key := range []string{"missing", "", "missing:too"} {
		got, err := st.Load(context.Background(), key)
		require.NoError(t, err, "Load of a key never written (%q) must not fail", key)
		requireMissing(t, got, "Load of a key never written (%q) must return the zero State (Version 0)", key)
	}
	require.False(t, cas(t, st, "missing", 1, s.small(1)),
		"CompareAndSwap at version 1 on a key only loaded must fail: Load must not create the key")
	requireMissing(t, load(t, st, "missing"), "a CompareAndSwap that failed must not create the key")
}

func (s *suite) createRoundTrip(t *testing.T) {
	st := s.store(t)
	want := FullState(s.c.now(), s.c.keep())
	require.True(t, cas(t, st, "k", 0, want),
		"CompareAndSwap at version 0 must create a key that has no state")
	requireState(t, want, 1, load(t, st, "k"),
		"Load must return the state written, at version 1 "+
			"(its content as MarshalBinary encodes it, its Expires as an instant to the nanosecond)")
	requireState(t, want, 1, load(t, st, "k"), "a second Load must return the same state")
}

func (s *suite) versionAdvances(t *testing.T) {
	st := s.store(t)
	for v := range uint64(5) {
		next := s.small(v + 10)
		require.True(t, cas(t, st, "k", v, next),
			"CompareAndSwap at the key's current version %d must succeed", v)
		requireState(t, next, v+1, load(t, st, "k"),
			"after a CompareAndSwap at version %d the key must hold its state at version %d", v, v+1)
	}
}

func (s *suite) nextVersionIgnored(t *testing.T) {
	st := s.store(t)
	next := s.small(1)
	next.Version = 42
	mustCAS(t, st, "k", 0, next)
	require.Equal(t, uint64(1), load(t, st, "k").Version,
		"CompareAndSwap at version 0 must give the state version 1, whatever next.Version says")
	next.Version = 7
	mustCAS(t, st, "k", 1, next)
	require.Equal(t, uint64(2), load(t, st, "k").Version,
		"CompareAndSwap at version 1 must give the state version 2, whatever next.Version says")
}

func (s *suite) staleVersion(t *testing.T) {
	st := s.store(t)
	first, second := s.small(1), s.small(2)
	mustCAS(t, st, "k", 0, first)
	mustCAS(t, st, "k", 1, second)
	for _, v := range []uint64{1, 0} {
		require.False(t, cas(t, st, "k", v, s.small(99)),
			"CompareAndSwap at stale version %d (the key is at 2) must report false", v)
		requireState(t, second, 2, load(t, st, "k"),
			"a CompareAndSwap at stale version %d must change nothing", v)
	}
}

func (s *suite) futureVersion(t *testing.T) {
	st := s.store(t)
	first := s.small(1)
	mustCAS(t, st, "k", 0, first)
	for _, v := range []uint64{2, 3, 1 << 63} {
		require.False(t, cas(t, st, "k", v, s.small(99)),
			"CompareAndSwap at version %d, ahead of the key's version 1, must report false", v)
	}
	requireState(t, first, 1, load(t, st, "k"), "a CompareAndSwap at a future version must change nothing")
	require.False(t, cas(t, st, "new", 1, s.small(99)),
		"CompareAndSwap at version 1 on a key with no state must report false")
	requireMissing(t, load(t, st, "new"), "a CompareAndSwap at version 1 on a key with no state must not create it")
}

func (s *suite) createExisting(t *testing.T) {
	st := s.store(t)
	first := s.small(1)
	mustCAS(t, st, "k", 0, first)
	require.False(t, cas(t, st, "k", 0, s.small(99)),
		"CompareAndSwap at version 0 on a key that has a state must report false")
	requireState(t, first, 1, load(t, st, "k"),
		"a CompareAndSwap at version 0 on an existing key must change nothing")
}

func (s *suite) noSharedAfterCAS(t *testing.T) {
	st := s.store(t)
	base := s.c.now()
	next := FullState(base, s.c.keep())
	want := FullState(base, s.c.keep())
	mustCAS(t, st, "k", 0, next)
	requireState(t, want, next.Version, next,
		"CompareAndSwap must not change the caller's state")
	scrambleState(&next)
	requireState(t, want, 1, load(t, st, "k"),
		"changing a State (Reserve, Complete) after passing it to CompareAndSwap must not change the stored state")

	// The same through an update of an existing key, to another state.
	next = FullState(base.Add(time.Second), s.c.keep())
	want = FullState(base.Add(time.Second), s.c.keep())
	mustCAS(t, st, "k", 1, next)
	scrambleState(&next)
	requireState(t, want, 2, load(t, st, "k"),
		"changing a State after a CompareAndSwap that replaced a key's state must not change the stored state")
}

func (s *suite) noSharedAfterLoad(t *testing.T) {
	st := s.store(t)
	base := s.c.now()
	want := FullState(base, s.c.keep())
	mustCAS(t, st, "k", 0, FullState(base, s.c.keep()))
	a, b := load(t, st, "k"), load(t, st, "k")
	scrambleState(&a)
	requireState(t, want, 1, b, "two Loads must not share memory: changing one changed the other")
	requireState(t, want, 1, load(t, st, "k"),
		"changing a State (Reserve, Complete) that Load returned must not change the stored state")
	// What Load returned is the caller's to keep: a later write must not
	// reach it either.
	c := load(t, st, "k")
	next := FullState(base.Add(time.Second), s.c.keep())
	mustCAS(t, st, "k", 1, next)
	requireState(t, want, 1, c, "a CompareAndSwap must not change a State that Load returned earlier")
}

func (s *suite) keysIsolated(t *testing.T) {
	st := s.store(t)
	keys := []string{"a", "b", "A", "a ", " a", "ab", "a:", "a:b", "b:a"}
	// Each state is built once: on a clock that moves, a state built again
	// later would expire later than the one written.
	written := make([]pace.State, len(keys))
	for i, k := range keys {
		written[i] = s.small(uint64(i + 1))
		mustCAS(t, st, k, 0, written[i])
	}
	for i, k := range keys {
		requireState(t, written[i], 1, load(t, st, k),
			"key %q must hold its own state, not another key's", k)
	}
	// Write one key again: only it changes.
	mustCAS(t, st, "a", 1, s.small(100))
	mustCAS(t, st, "a", 2, s.small(101))
	for i, k := range keys[1:] {
		requireState(t, written[i+1], 1, load(t, st, k),
			"writing key %q must not change key %q", "a", k)
	}
	require.False(t, cas(t, st, "b", 3, s.small(1)),
		"key \"b\" is at version 1 and key \"a\" at 3: a CompareAndSwap of \"b\" at version 3 must fail")
	requireMissing(t, load(t, st, "c"), "a key never written must stay missing")
}

// oddKeyList returns keys a store must treat like any other: compared byte for
// byte, each with its own state.
func oddKeyList() []string {
	long := strings.Repeat("k", 8<<10)
	return []string{
		"", " ", "\t", "\n", "\x00", "a\x00b", "a\x00c",
		":", "a:b", "a:b:", "::",
		"{}", "{", "}", "{a}", "{a}:b", "{a}:c", "a{b}c", "{a}{b}",
		"*", "?", "[a]", "a*", "\\", "\"", "'", "%s", "%",
		"ключ", "🔑", "日本語", "é", "e\u0301", "\u2028",
		"\xff", "\xfe", "\xff\xfe", "a\xc3",
		long + "1", long + "2", "1" + long,
	}
}

func (s *suite) oddKeys(t *testing.T) {
	st := s.store(t)
	keys := oddKeyList()
	written := make([]pace.State, len(keys)) // built once, as in keysIsolated
	for i, k := range keys {
		got, err := st.Load(context.Background(), k)
		require.NoError(t, err, "Load(%q) must not fail", short(k))
		requireMissing(t, got, "Load(%q) of a key never written must return the zero State", short(k))
		written[i] = s.small(uint64(i + 1))
		mustCAS(t, st, k, 0, written[i])
	}
	for i, k := range keys {
		requireState(t, written[i], 1, load(t, st, k),
			"key %q (key %d) must hold its own state: keys are byte strings, each distinct", short(k), i)
	}
	for i, k := range keys {
		again := s.small(uint64(i + 1000))
		mustCAS(t, st, k, 1, again)
		requireState(t, again, 2, load(t, st, k),
			"key %q (key %d) must be replaceable at version 1", short(k), i)
	}
}

// retryUpdate is pace.Update, tried again while it gives up with
// pace.ErrConflict: a contended store is not a wrong one.
func retryUpdate(ctx context.Context, st pace.Store, key string, f func(*pace.State) error) (pace.State, error) {
	for range 1000 {
		got, err := pace.Update(ctx, st, key, f)
		if !errors.Is(err, pace.ErrConflict) {
			return got, err
		}
	}
	return pace.State{}, fmt.Errorf("%w 1000 times in a row", pace.ErrConflict)
}

func (s *suite) concurrentOneKey(t *testing.T) {
	const goroutines, each = 50, 20
	st := s.store(t)
	seqs := make([][]uint64, goroutines)
	errs := make([]error, goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for range each {
				// f runs again when a swap fails: seq is the lease of
				// the update that was stored.
				var seq uint64
				_, err := retryUpdate(context.Background(), st, "counter", func(p *pace.State) error {
					n, err := bump(p)
					seq = n
					p.Expires = s.c.now().Add(s.c.keep())
					return err
				})
				if err != nil {
					errs[g] = err
					return
				}
				seqs[g] = append(seqs[g], seq)
			}
		})
	}
	close(start)
	wg.Wait()
	for g, err := range errs {
		require.NoError(t, err, "goroutine %d: pace.Update failed", g)
	}
	got := load(t, st, "counter")
	require.Equal(t, uint64(goroutines*each), granted(t, got),
		"%d goroutines x %d pace.Updates that each reserve a lease on one key must leave a state that has granted %d: "+
			"a CompareAndSwap that succeeded lost another's update", goroutines, each, goroutines*each)
	require.Equal(t, uint64(goroutines*each), got.Version,
		"after %d successful CompareAndSwaps from version 0 the version must be %d", goroutines*each, goroutines*each)
	seen := make([]bool, goroutines*each+1)
	for g := range seqs {
		for _, n := range seqs[g] {
			require.True(t, n >= 1 && n <= goroutines*each && !seen[n],
				"two updates stored were granted lease %d (or it is out of range): they saw the same predecessor", n)
			seen[n] = true
		}
	}
}

func (s *suite) concurrentManyKeys(t *testing.T) {
	const keys, perKey, each = 10, 5, 20
	st := s.store(t)
	var failed atomic.Value
	start := make(chan struct{})
	var wg sync.WaitGroup
	for k := range keys {
		// Each key starts from a state of its own: 1000, 2000, ... leases.
		key := fmt.Sprintf("key-%d", k)
		mustCAS(t, st, key, 0, s.small(uint64(1000*(k+1))))
		for range perKey {
			wg.Go(func() {
				<-start
				for range each {
					_, err := retryUpdate(context.Background(), st, key, func(p *pace.State) error {
						_, err := bump(p)
						p.Expires = s.c.now().Add(s.c.keep())
						return err
					})
					if err != nil {
						failed.CompareAndSwap(nil, fmt.Errorf("%s: %w", key, err))
						return
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		require.NoError(t, err, "pace.Update failed")
	}
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		got := load(t, st, key)
		n := granted(t, got)
		require.Equal(t, uint64(1000*(k+1)), n/1000*1000, "key %q holds another key's state", key)
		require.Equal(t, uint64(1000*(k+1)+perKey*each), n,
			"key %q: %d goroutines x %d updates must each add a lease to the %d it had, whatever the other keys' writers do",
			key, perKey, each, 1000*(k+1))
		require.Equal(t, uint64(1+perKey*each), got.Version,
			"key %q: created, then %d successful CompareAndSwaps: it must be at version %d", key, perKey*each, 1+perKey*each)
	}
}

func (s *suite) updateError(t *testing.T) {
	st := s.store(t)
	errBoom := errors.New("boom")
	calls := 0
	_, err := pace.Update(context.Background(), st, "new", func(p *pace.State) error {
		calls++
		bump(p) //nolint:errcheck // f fails either way
		p.Expires = s.c.now().Add(s.c.keep())
		return errBoom
	})
	require.ErrorIs(t, err, errBoom, "pace.Update must return the error of f")
	require.Equal(t, 1, calls, "pace.Update must not call f again after it failed")
	requireMissing(t, load(t, st, "new"),
		"pace.Update must store nothing when f fails: the key must still be missing")

	first := s.small(1)
	mustCAS(t, st, "old", 0, first)
	_, err = pace.Update(context.Background(), st, "old", func(p *pace.State) error {
		bump(p) //nolint:errcheck // f fails either way
		p.Expires = s.c.now().Add(2 * s.c.keep())
		return errBoom
	})
	require.ErrorIs(t, err, errBoom, "pace.Update must return the error of f")
	requireState(t, first, 1, load(t, st, "old"),
		"pace.Update must store nothing when f fails: the key must keep its state and version")
}

// contended wraps a Store so that another writer always replaces a key's
// state just before CompareAndSwap: the swap then always fails.
type contended struct {
	pace.Store
	now    func() time.Time
	keep   time.Duration
	writes atomic.Int64
	err    atomic.Value // the first error of the other writer
}

func (c *contended) CompareAndSwap(ctx context.Context, key string, version uint64, next pace.State) (bool, error) {
	bg := context.Background() // the other writer's context is not cancelled
	cur, err := c.Store.Load(bg, key)
	if err == nil {
		next := cur.Clone()
		if _, err = bump(&next); err == nil {
			next.Expires = c.now().Add(c.keep)
			var ok bool
			ok, err = c.Store.CompareAndSwap(bg, key, cur.Version, next)
			if err == nil && !ok {
				err = fmt.Errorf("the other writer's CompareAndSwap at version %d, just loaded, failed", cur.Version)
			}
		}
	}
	if err != nil {
		c.err.CompareAndSwap(nil, err)
	} else {
		c.writes.Add(1)
	}
	return c.Store.CompareAndSwap(ctx, key, version, next)
}

func (s *suite) updateCancelled(t *testing.T) {
	st := s.store(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	marked := s.small(1000) // f's state
	mark := func(p *pace.State) error {
		v := p.Version
		*p = marked.Clone()
		p.Version = v
		return nil
	}

	// Uncontended, with the context already cancelled: the store may do
	// its work or fail with the context's error, not half of each.
	mustCAS(t, st, "quiet", 0, s.small(1))
	before := load(t, st, "quiet")
	_, err := pace.Update(ctx, st, "quiet", mark)
	if err != nil {
		require.ErrorIs(t, err, context.Canceled,
			"pace.Update with a cancelled context must fail with the context's error or succeed")
		requireState(t, before, 1, load(t, st, "quiet"),
			"pace.Update failed with the context's error, but stored f's state")
	} else {
		requireState(t, marked, 2, load(t, st, "quiet"),
			"pace.Update with a cancelled context succeeded, but did not store f's state")
	}

	// Contended: every CompareAndSwap fails, so Update must give up with
	// the context's error rather than trying again.
	c := &contended{Store: st, now: s.c.now, keep: s.c.keep()}
	calls := 0
	_, err = pace.Update(ctx, c, "busy", func(p *pace.State) error { calls++; return mark(p) })
	if e, _ := c.err.Load().(error); e != nil {
		require.NoError(t, e, "the suite's other writer failed")
	}
	require.ErrorIs(t, err, context.Canceled,
		"pace.Update with a cancelled context on a contended key must give up with the context's error")
	require.LessOrEqual(t, calls, 1, "pace.Update with a cancelled context must not try again after a failed CompareAndSwap")
	got := load(t, st, "busy")
	require.NotEqual(t, content(t, marked), content(t, got), "pace.Update gave up but f's state was stored")
	require.Equal(t, uint64(c.writes.Load()), granted(t, got), "the other writer's updates must all be kept")

	// Contended without a deadline: it gives up with ErrConflict, having
	// stored nothing of f's.
	c = &contended{Store: st, now: s.c.now, keep: s.c.keep()}
	_, err = pace.Update(context.Background(), c, "busier", mark)
	if e, _ := c.err.Load().(error); e != nil {
		require.NoError(t, e, "the suite's other writer failed")
	}
	require.ErrorIs(t, err, pace.ErrConflict, "pace.Update on a key that always changes under it must give up with ErrConflict")
	got = load(t, st, "busier")
	require.NotEqual(t, content(t, marked), content(t, got), "pace.Update gave up but f's state was stored")
	require.Equal(t, uint64(c.writes.Load()), granted(t, got), "the other writer's updates must all be kept")
}

func (s *suite) expiry(t *testing.T) {
	st := s.store(t)
	base := s.c.now()
	dies := base.Add(s.c.ttl)
	mortal := FullState(base, s.c.ttl)
	mortal.Expires = dies
	lives := FullState(base, s.c.keep())
	renewed := s.small(7)

	mustCAS(t, st, "mortal", 0, mortal)
	mustCAS(t, st, "lives", 0, lives)
	mustCAS(t, st, "renewed", 0, counter(6, dies))
	mustCAS(t, st, "renewed", 1, renewed)
	got := load(t, st, "mortal")
	if s.c.now().Before(dies) {
		requireState(t, mortal, 1, got, "a state must be kept until its Expires")
	}

	// Move past dies: at once on a fake clock, else wait until the store
	// forgets "mortal".
	if s.c.advance != nil {
		s.c.advance(2 * s.c.ttl)
		require.True(t, s.c.now().After(dies), "the clock did not move past Expires after advance(%v)", 2*s.c.ttl)
		got = load(t, st, "mortal")
	} else {
		deadline := dies.Add(s.c.within)
		step := min(max(s.c.ttl/10, time.Millisecond), 50*time.Millisecond)
		for {
			got = load(t, st, "mortal")
			if !s.c.now().Before(dies) && isForgotten(got) {
				break
			}
			if s.c.now().After(deadline) {
				break
			}
			sleep(step)
		}
	}

	t.Run("Forgotten", func(t *testing.T) {
		requireForgotten(t, got,
			"a state whose Expires has passed must be forgotten: Load must return a State with nothing in it but its Version")
		require.Contains(t, []uint64{0, 1}, got.Version,
			"a forgotten key's version must be 0, or the version it last had (1)")
		again := s.small(3)
		require.True(t, cas(t, st, "mortal", got.Version, again),
			"CompareAndSwap at the version that Load returned for a forgotten key (%d) must write it anew", got.Version)
		requireState(t, again, got.Version+1, load(t, st, "mortal"), "a forgotten key written anew must hold its new state")
	})
	t.Run("Kept", func(t *testing.T) {
		requireState(t, lives, 1, load(t, st, "lives"), "a state whose Expires has not passed must be kept")
	})
	t.Run("Renewed", func(t *testing.T) {
		requireState(t, renewed, 2, load(t, st, "renewed"),
			"a key written again with a later Expires before its first Expires passed must be kept: "+
				"each CompareAndSwap sets the key's Expires")
	})
}

package pace_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/pace"
	"github.com/headway-go/headway/pace/pacetest"
)

// clock is a fake clock: it moves only when told to. BlockNext makes its
// next reading wait, so that a test can hold a MemoryStore entry's lock
// (MemoryStore.Load reads the clock under it).
type clock struct {
	ns    atomic.Int64
	block atomic.Pointer[blocked]
}

type blocked struct{ entered, release chan struct{} }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time {
	if b := c.block.Swap(nil); b != nil {
		close(b.entered)
		<-b.release
	}
	return time.Unix(0, c.ns.Load()).UTC()
}

func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// BlockNext makes the next reading of the clock wait until release is
// called; entered is closed when that reading begins.
func (c *clock) BlockNext() (entered <-chan struct{}, release func()) {
	b := &blocked{entered: make(chan struct{}), release: make(chan struct{})}
	c.block.Store(b)
	return b.entered, func() { close(b.release) }
}

func TestMemoryStore(t *testing.T) {
	c := newClock()
	pacetest.TestStore(t, func(*testing.T) pace.Store {
		return pace.NewMemoryStore(c.Now)
	}, pacetest.WithClock(c.Now, c.Advance))
}

// counterAt is the instant of the reservations that count.
var counterAt = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// bump reserves a lease in s and cancels it: s has granted one lease more.
func bump(t *testing.T, s *pace.State) {
	t.Helper()
	d := s.Reserve(counterAt, pace.Request{}, nil)
	require.True(t, d.OK, "a counting state must grant a lease: %v", d.Why)
	s.Cancel(d.Lease, nil)
}

// counter returns a state that has granted n leases (all cancelled), and
// expires at exp: the tests' states differ in n.
func counter(t *testing.T, n uint64, exp time.Time) pace.State {
	t.Helper()
	var s pace.State
	for range n {
		bump(t, &s)
	}
	s.Expires = exp
	return s
}

// granted returns how many leases s has granted.
func granted(t *testing.T, s pace.State) uint64 {
	t.Helper()
	c := s.Clone()
	d := c.Reserve(counterAt, pace.Request{}, nil)
	require.True(t, d.OK, "a counting state must grant a lease: %v", d.Why)
	return d.Lease.Seq() - 1
}

// requireState fails t unless got is want at version: the same content
// (MarshalBinary's bytes) and Expires.
func requireState(t *testing.T, want pace.State, version uint64, got pace.State, msg string, args ...any) {
	t.Helper()
	w, err := want.MarshalBinary()
	require.NoError(t, err)
	g, err := got.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, version, got.Version, append([]any{msg + ": version"}, args...)...)
	require.True(t, want.Expires.Equal(got.Expires), append([]any{msg + ": Expires %v, want %v"}, append(args, got.Expires, want.Expires)...)...)
	require.Equal(t, w, g, append([]any{msg + ": content"}, args...)...)
}

// put creates key with a state that has granted n leases, expiring at exp.
func put(t *testing.T, m *pace.MemoryStore, key string, n uint64, exp time.Time) {
	t.Helper()
	ok, err := m.CompareAndSwap(context.Background(), key, 0, counter(t, n, exp))
	require.NoError(t, err)
	require.True(t, ok, "creating %q", key)
}

func get(t *testing.T, m *pace.MemoryStore, key string) pace.State {
	t.Helper()
	s, err := m.Load(context.Background(), key)
	require.NoError(t, err)
	return s
}

func TestMemoryStoreSweepForgetsOnlyExpiredKeys(t *testing.T) {
	c := newClock()
	m := pace.NewMemoryStore(c.Now)
	t0 := c.Now()
	for i := range 10 {
		put(t, m, fmt.Sprintf("old-%d", i), uint64(i+1), t0.Add(time.Second))
		put(t, m, fmt.Sprintf("new-%d", i), uint64(i+1), t0.Add(time.Hour))
	}
	put(t, m, "edge", 1, t0.Add(2*time.Second))
	put(t, m, "forever", 1, time.Time{})
	c.Advance(2 * time.Second) // "edge" expires now: Expires is the first instant it is gone

	require.Equal(t, 22, m.Len(), "expired keys are held until a sweep")
	require.Equal(t, pace.State{Version: 1}, get(t, m, "old-3"),
		"an expired key not yet swept loads as nothing but its version")
	require.Equal(t, pace.State{Version: 1}, get(t, m, "edge"), "a key expires at its Expires")

	require.Equal(t, 11, m.Sweep(), "Sweep returns how many keys it kept")
	require.Equal(t, 11, m.Len(), "Sweep must forget the 11 expired keys and only them")
	for i := range 10 {
		requireState(t, counter(t, uint64(i+1), t0.Add(time.Hour)), 1,
			get(t, m, fmt.Sprintf("new-%d", i)), "a key that has not expired must be kept as it was")
		require.Equal(t, pace.State{Version: 1}, get(t, m, fmt.Sprintf("old-%d", i)),
			"a swept key must be gone, but load at a version no lower than the one it had (1)")
	}
	require.Equal(t, uint64(1), granted(t, get(t, m, "forever")), "a state without Expires never expires")
	put(t, m, "old-0", 100, t0.Add(time.Hour))
	require.Equal(t, 12, m.Len())
	require.Equal(t, uint64(2), get(t, m, "old-0").Version,
		"a swept key created again must get a version above every one it had")
}

// waitLocked waits until n goroutines whose stacks contain fn are blocked
// acquiring a sync.Mutex.
func waitLocked(t *testing.T, fn string, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(10 * time.Second) // a bound on a hang, not a sleep
	for {
		stacks := string(buf[:runtime.Stack(buf, true)])
		found := 0
		for g := range strings.SplitSeq(stacks, "\n\n") {
			header, _, _ := strings.Cut(g, "\n")
			if strings.Contains(header, "[sync.Mutex.Lock") && strings.Contains(g, fn) {
				found++
			}
		}
		if found >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines in %s never blocked on a mutex:\n%s", n, fn, stacks)
		}
		runtime.Gosched()
	}
}

// TestMemoryStoreSweptWriterStartsAgain orders a writer, a sweep and an
// entry's lock so that the writer holds an entry that the sweep removes:
// the entry's dead flag must make its compare-and-swap fail, or the update
// would land in an entry the store no longer holds.
func TestMemoryStoreSweptWriterStartsAgain(t *testing.T) {
	c := newClock()
	m := pace.NewMemoryStore(c.Now)
	ctx := context.Background()
	put(t, m, "k", 1, c.Now().Add(time.Second))
	c.Advance(2 * time.Second)

	// The writer loads the expired key (version 1), then waits in f.
	inF, goF := make(chan struct{}), make(chan struct{})
	calls := 0
	type result struct {
		s   pace.State
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Through Load and CompareAndSwap (f outside the entry's lock), as
		// a shared store is used, not MemoryStore's in-place fast path.
		s, err := pace.Update(ctx, casOnly{m}, "k", func(s *pace.State) error {
			calls++
			if calls == 1 {
				close(inF)
				<-goF
			}
			bump(t, s)
			s.Expires = c.Now().Add(time.Hour)
			return nil
		})
		done <- result{s, err}
	}()
	<-inF

	// A reader holds the entry's lock while it reads the clock.
	entered, release := c.BlockNext()
	go m.Load(ctx, "k") //nolint:errcheck // only its hold on the lock matters
	<-entered
	// A sweep queues for the entry's lock, then the writer does.
	swept := make(chan int, 1)
	go func() { swept <- m.Sweep() }()
	waitLocked(t, "(*MemoryStore).Sweep", 1)
	close(goF)
	waitLocked(t, "(*MemoryStore).CompareAndSwap", 1)
	// The sweep goes first and forgets the key; the writer finds its
	// entry dead, and starts again.
	release()
	require.Equal(t, 0, <-swept)
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, 2, calls, "the writer's first compare-and-swap must fail on the swept entry, and it must start again")
	require.Equal(t, uint64(2), r.s.Version, "the writer must have created the key anew, above its swept version 1")
	requireState(t, r.s, r.s.Version, get(t, m, "k"), "the writer's update must be in the store")
	require.Equal(t, 1, m.Len())
}

func TestMemoryStoreReclaimsExpiredKeys(t *testing.T) {
	const n = 100_000
	c := newClock()
	m := pace.NewMemoryStore(c.Now)
	t0 := c.Now()
	for i := range n {
		put(t, m, fmt.Sprintf("old-%d", i), 1, t0.Add(time.Minute))
	}
	require.Equal(t, n, m.Len(), "keys that have not expired are all kept")
	c.Advance(2 * time.Minute)
	for i := range n {
		put(t, m, fmt.Sprintf("new-%d", i), 1, c.Now().Add(time.Hour))
	}
	require.Equal(t, n, m.Len(),
		"after %d new keys, the %d expired keys must have been swept, and only they", n, n)
	for _, i := range []int{0, 1, n / 2, n - 1} {
		require.Equal(t, pace.State{Version: 1}, get(t, m, fmt.Sprintf("old-%d", i)),
			"old-%d must be gone, its version kept", i)
		require.Equal(t, uint64(1), granted(t, get(t, m, fmt.Sprintf("new-%d", i))), "new-%d must be kept", i)
	}
}

// casOnly hides a store's InPlace method: Update goes through Load and
// CompareAndSwap.
type casOnly struct{ pace.Store }

// TestMemoryStoreConcurrentSweeps orders two sweeps so that the second
// holds the entry of a key that the first removed and that was created
// again since: it must not remove the new entry.
func TestMemoryStoreConcurrentSweeps(t *testing.T) {
	c := newClock()
	m := pace.NewMemoryStore(c.Now)
	ctx := context.Background()
	put(t, m, "k", 1, c.Now().Add(time.Second))
	c.Advance(2 * time.Second)

	// A reader holds the entry's lock; sweep A, a second reader and sweep
	// B queue for it, in that order.
	entered, release := c.BlockNext()
	go m.Load(ctx, "k") //nolint:errcheck // only its hold on the lock matters
	<-entered
	sweptA, sweptB := make(chan int, 1), make(chan int, 1)
	go func() { sweptA <- m.Sweep() }()
	waitLocked(t, "(*MemoryStore).Sweep", 1)
	go m.Load(ctx, "k") //nolint:errcheck // only its hold on the lock matters
	waitLocked(t, "(*MemoryStore).Load", 1)
	go func() { sweptB <- m.Sweep() }()
	waitLocked(t, "(*MemoryStore).Sweep", 2)

	// Sweep A removes the key; the second reader then holds the old
	// entry's lock while the key is created again.
	entered2, release2 := c.BlockNext()
	release()
	require.Equal(t, 0, <-sweptA)
	<-entered2
	put(t, m, "k", 2, c.Now().Add(time.Hour))
	release2()
	<-sweptB
	requireState(t, counter(t, 2, c.Now().Add(time.Hour)), 2, get(t, m, "k"),
		"a sweep that reached the key's old entry removed its new one, which had not expired")
}

// TestMemoryStoreVersionAfterSweep has a writer load an expired key, which
// is then swept and created again by another writer: the first writer's
// compare-and-swap, at the version it loaded, must fail rather than
// overwrite what it never saw (ABA), so versions must not start again from
// 0 after a sweep.
func TestMemoryStoreVersionAfterSweep(t *testing.T) {
	c := newClock()
	m := pace.NewMemoryStore(c.Now)
	ctx := context.Background()
	put(t, m, "k", 1, c.Now().Add(time.Second))
	c.Advance(2 * time.Second)

	inF, goF := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(goF) })
	t.Cleanup(release) // a failure below must not leave the writer waiting
	type result struct {
		s     pace.State
		err   error
		calls int
	}
	done := make(chan result, 1)
	go func() {
		// Through Load and CompareAndSwap, f outside the entry's lock (as
		// a shared store is used): MemoryStore's in-place path would run f
		// under the lock, and the sweep below would wait for it forever.
		calls := 0
		s, err := pace.Update(ctx, casOnly{m}, "k", func(s *pace.State) error {
			calls++
			if calls == 1 {
				close(inF)
				<-goF
			}
			for range 100 {
				bump(t, s)
			}
			s.Expires = c.Now().Add(time.Hour)
			return nil
		})
		done <- result{s, err, calls}
	}()
	<-inF // the writer loaded version 1, expired
	require.Equal(t, 0, m.Sweep())
	require.GreaterOrEqual(t, get(t, m, "k").Version, uint64(1), "a swept key's version must not go back")
	second, err := pace.Update(ctx, m, "k", func(s *pace.State) error {
		bump(t, s)
		s.Expires = c.Now().Add(time.Hour)
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, second.Version, uint64(1), "a key created again after a sweep must get a version it never had")
	release()
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, uint64(101), granted(t, get(t, m, "k")),
		"the first writer's update must build on the second's (1 lease + 100), not overwrite it")
	require.Equal(t, 2, r.calls, "the first writer's compare-and-swap at the version it loaded must fail once")
	require.Equal(t, second.Version+1, r.s.Version)
	requireState(t, r.s, r.s.Version, get(t, m, "k"), "the first writer's update must be in the store")
}

// TestMemoryStoreCreateAfterSweep checks how a key the store holds nothing
// for is created once a sweep has forgotten versions: above all of them.
func TestMemoryStoreCreateAfterSweep(t *testing.T) {
	c := newClock()
	m := pace.NewMemoryStore(c.Now)
	ctx := context.Background()
	require.Equal(t, pace.State{}, get(t, m, "new"), "before any sweep, a key never written loads at version 0")
	put(t, m, "a", 1, c.Now().Add(time.Second))
	for v := uint64(1); v < 5; v++ {
		ok, err := m.CompareAndSwap(ctx, "a", v, counter(t, v+1, c.Now().Add(time.Second)))
		require.NoError(t, err)
		require.True(t, ok)
	}
	put(t, m, "b", 1, c.Now().Add(time.Second))
	c.Advance(2 * time.Second)
	require.Equal(t, pace.State{Version: 5}, get(t, m, "a"), "an expired key keeps its version until it is swept")
	require.Equal(t, 0, m.Sweep())
	require.Equal(t, 0, m.Len())

	for _, key := range []string{"a", "b", "new"} {
		require.Equal(t, pace.State{Version: 5}, get(t, m, key),
			"after a sweep, a key the store holds nothing for loads above every version it forgot")
	}
	for _, v := range []uint64{1, 4, 6} {
		ok, err := m.CompareAndSwap(ctx, "a", v, counter(t, 99, time.Time{}))
		require.NoError(t, err)
		require.False(t, ok, "CompareAndSwap at version %d on a swept key at 5 must fail", v)
	}
	require.Equal(t, 0, m.Len(), "a CompareAndSwap that failed must not create the key")

	ok, err := m.CompareAndSwap(ctx, "a", 5, counter(t, 10, time.Time{}))
	require.NoError(t, err)
	require.True(t, ok, "CompareAndSwap at the version Load returned must create the key")
	requireState(t, counter(t, 10, time.Time{}), 6, get(t, m, "a"), "created at the version Load returned")
	ok, err = m.CompareAndSwap(ctx, "b", 0, counter(t, 20, time.Time{}))
	require.NoError(t, err)
	require.True(t, ok, "CompareAndSwap at version 0 must still create a key the store holds nothing for")
	requireState(t, counter(t, 20, time.Time{}), 6, get(t, m, "b"), "but above every version the store forgot")

	boom := fmt.Errorf("boom")
	require.ErrorIs(t, m.UpdateInPlace(ctx, "new", func(*pace.State) error { return boom }), boom)
	require.Equal(t, 2, m.Len(), "an update that failed must not leave an entry for a key it would have created")
	require.NoError(t, m.UpdateInPlace(ctx, "new", func(s *pace.State) error {
		*s = counter(t, 30, time.Time{})
		return nil
	}))
	requireState(t, counter(t, 30, time.Time{}), 6, get(t, m, "new"), "updated in place")
}

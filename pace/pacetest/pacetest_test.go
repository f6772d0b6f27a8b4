package pacetest

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/pace"
)

// fakeClock moves only when told to.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2031, 5, 6, 7, 8, 9, 10, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// bytesStore keeps each state as MarshalBinary's bytes, as a store on a
// server would, and forgets a key once its Expires has passed, as Redis
// does: a forgotten key is gone (version 0). broken names a defect to
// build in, for the suite to find.
type bytesStore struct {
	now    func() time.Time
	broken string

	mu   sync.Mutex
	keys map[string]*bytesEntry
}

type bytesEntry struct {
	data    []byte
	state   pace.State // "aliases": the caller's value, kept as it is
	version uint64
	expires time.Time
}

func newBytesStore(now func() time.Time, broken string) *bytesStore {
	return &bytesStore{now: now, broken: broken, keys: map[string]*bytesEntry{}}
}

func (j *bytesStore) key(k string) string {
	if j.broken == "truncates keys" && len(k) > 64 {
		return k[:64]
	}
	return k
}

// entry returns k's entry, forgetting it if it has expired. j.mu is held.
func (j *bytesStore) entry(k string) *bytesEntry {
	e := j.keys[k]
	if e != nil && j.broken != "never forgets" && !j.now().Before(e.expires) {
		delete(j.keys, k)
		return nil
	}
	return e
}

func (j *bytesStore) Load(_ context.Context, k string) (pace.State, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e := j.entry(j.key(k))
	if e == nil {
		if j.broken == "load creates" {
			j.keys[j.key(k)] = &bytesEntry{data: emptyContent, version: 1, expires: j.now().Add(time.Hour)}
			return pace.State{Version: 1}, nil
		}
		return pace.State{}, nil
	}
	if j.broken == "aliases" {
		return e.state, nil
	}
	s := pace.State{Version: e.version, Expires: e.expires}
	if err := s.UnmarshalBinary(e.data); err != nil {
		// Unreadable: a fresh state at the key's version, as redisstore
		// reads one.
		return pace.State{Version: e.version}, nil
	}
	return s, nil
}

func (j *bytesStore) CompareAndSwap(_ context.Context, k string, version uint64, next pace.State) (bool, error) {
	j.mu.Lock()
	e := j.entry(j.key(k))
	cur := uint64(0)
	if e != nil {
		cur = e.version
	}
	if cur != version && j.broken != "ignores versions" {
		j.mu.Unlock()
		return false, nil
	}
	if j.broken == "not atomic" {
		// Compare, then let others run, then swap: a lost update.
		j.mu.Unlock()
		runtime.Gosched()
		j.mu.Lock()
	}
	defer j.mu.Unlock()
	if j.broken == "drops nanoseconds" {
		next.Expires = next.Expires.Truncate(time.Millisecond)
	}
	data, err := next.MarshalBinary()
	if err != nil {
		return false, err
	}
	if j.broken == "truncates values" && len(data) > 64 {
		data = data[:64]
	}
	expires := next.Expires
	if e != nil && j.broken == "expiry set on create only" {
		expires = e.expires
	}
	if j.broken == "ignores versions" || j.broken == "not atomic" {
		if old := j.keys[j.key(k)]; old != nil {
			cur = old.version
		}
	}
	next.Version = cur + 1
	j.keys[j.key(k)] = &bytesEntry{data: data, state: next, version: cur + 1, expires: expires}
	return true, nil
}

func TestBytesStore(t *testing.T) {
	c := newFakeClock()
	TestStore(t, func(*testing.T) pace.Store { return newBytesStore(c.Now, "") }, WithClock(c.Now, c.Advance))
}

// TestBytesStoreMovingClock runs the suite on a clock that moves a
// millisecond at every reading, as a real one moves between the suite's
// steps: the suite must compare a store's state with the state it wrote,
// not with one built again later.
func TestBytesStoreMovingClock(t *testing.T) {
	c := newFakeClock()
	now := func() time.Time {
		c.Advance(time.Millisecond)
		return c.Now()
	}
	TestStore(t, func(*testing.T) pace.Store { return newBytesStore(c.Now, "") }, WithClock(now, c.Advance))
}

// TestRealTime runs the suite as it runs for a store on real time (no
// advance function), with the suite's sleeps moving a fake clock instead.
func TestRealTime(t *testing.T) {
	c := newFakeClock()
	var slept atomic.Int64
	sleep = func(d time.Duration) { slept.Add(int64(d)); c.Advance(d) }
	t.Cleanup(func() { sleep = time.Sleep })
	TestStore(t, func(*testing.T) pace.Store { return newBytesStore(c.Now, "") },
		WithClock(c.Now, nil), WithExpiry(100*time.Millisecond, time.Second))
	require.Positive(t, slept.Load(), "the suite must wait for expiry when it cannot advance the clock")
	require.Less(t, time.Duration(slept.Load()), 200*time.Millisecond,
		"the suite must poll, not wait for the whole grace period")
}

// TestBrokenStores runs the suite, in a child process, against stores with
// a defect each, and checks that it fails the subtests that should find it.
func TestBrokenStores(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary again")
	}
	for broken, want := range map[string][]string{
		"aliases":                   {"NoSharedMemoryAfterCAS", "NoSharedMemoryAfterLoad"},
		"ignores versions":          {"StaleVersion", "FutureVersion", "CreateExisting"},
		"not atomic":                {"ConcurrentUpdatesOneKey"},
		"load creates":              {"LoadMissing"},
		"truncates keys":            {"OddKeys"},
		"drops nanoseconds":         {"CreateRoundTrip"},
		"truncates values":          {"CreateRoundTrip", "NoSharedMemoryAfterLoad", "Expiry"},
		"never forgets":             {"Expiry/Forgotten"},
		"expiry set on create only": {"Expiry/Renewed"},
		"never forgets, real time":  {"Expiry/Forgotten"},
	} {
		t.Run(strings.ReplaceAll(broken, " ", "_"), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenStoreChild$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), "PACETEST_BROKEN="+broken)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the suite passed a store that %s:\n%s", broken, out)
			failed := regexp.MustCompile(`--- FAIL: TestBrokenStoreChild/(\S+)`).FindAllStringSubmatch(string(out), -1)
			var names []string
			for _, f := range failed {
				names = append(names, f[1])
			}
			for _, w := range want {
				require.Contains(t, names, w, "a store that %s must fail %s; failed: %v\n%s", broken, w, names, out)
			}
		})
	}
}

// TestBrokenStoreChild is TestBrokenStores's child process.
func TestBrokenStoreChild(t *testing.T) {
	broken := os.Getenv("PACETEST_BROKEN")
	if broken == "" {
		t.Skip("run by TestBrokenStores")
	}
	c := newFakeClock()
	opts := []Option{WithClock(c.Now, c.Advance)}
	if b, ok := strings.CutSuffix(broken, ", real time"); ok {
		broken = b
		sleep = func(d time.Duration) { c.Advance(d) }
		opts = []Option{WithClock(c.Now, nil)}
	}
	TestStore(t, func(*testing.T) pace.Store { return newBytesStore(c.Now, broken) }, opts...)
}

// TestFullState: FullState is a busy key's state, the same for the same
// base and life, and another for another base.
func TestFullState(t *testing.T) {
	base := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	s := FullState(base, time.Hour)
	require.Equal(t, uint64(99), s.Version)
	require.True(t, s.Expires.Equal(base.Add(time.Hour+987654321)), "Expires is base+life and a fraction")
	require.NotEqual(t, base.Location(), s.Expires.Location(), "Expires is in another location than base")
	data := content(t, s)
	require.Greater(t, len(data), 400, "FullState holds policies, leases, quotas, routes")
	require.Equal(t, data, content(t, FullState(base.In(time.FixedZone("x", 3600)), time.Hour)),
		"the same base, wherever it is, gives the same state")
	require.NotEqual(t, data, content(t, FullState(base.Add(time.Second), time.Hour)))

	// What it holds shows in what it decides.
	c := s.Clone()
	d := c.Reserve(base, pace.Request{Route: "GET /search/code"}, fullConfig)
	require.False(t, d.OK, "the search resource is paused")
	require.False(t, d.At.Before(base.Add(2*time.Second)),
		"the search resource's pause ends 2s after base and more: it waits %v (%v: %s)", d.At.Sub(base), d.Why, d.Detail)
	c = s.Clone()
	d = c.Reserve(base.Add(5*time.Second), pace.Request{Route: "GET /items/0", Quotas: []int{1}}, fullConfig)
	if d.OK {
		require.Greater(t, d.Lease.Seq(), uint64(40), "FullState granted leases: %d", d.Lease.Seq())
	}

	// Built again, it is the same value, down to its encoding.
	var back pace.State
	require.NoError(t, back.UnmarshalBinary(data))
	require.Equal(t, data, content(t, back))
}

// TestScrambleReachesSharedMemory: scrambleState changes a State's slices
// in place, so that a store that kept them (a shallow copy) shows it.
func TestScrambleReachesSharedMemory(t *testing.T) {
	base := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	s := FullState(base, time.Hour)
	want := content(t, s)
	shallow := s // shares s's slices, as a store that kept the caller's value would
	scrambleState(&s)
	require.NotEqual(t, want, content(t, s), "scrambleState must change the state")
	require.NotEqual(t, want, content(t, shallow),
		"scrambleState must change the state's slices where they lie, not only replace them")
	require.Equal(t, uint64(99), s.Version, "scrambleState keeps the Version")
}

// TestCounters: counter's states differ by the leases they granted, which
// granted reads; bump adds one.
func TestCounters(t *testing.T) {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, n := range []uint64{0, 1, 7, 1000} {
		s := counter(n, exp)
		require.Equal(t, n, granted(t, s))
		require.Equal(t, n, granted(t, s), "granted does not change its argument")
		require.True(t, s.Expires.Equal(exp))
		seq, err := bump(&s)
		require.NoError(t, err)
		require.Equal(t, n+1, seq)
		require.Equal(t, n+1, granted(t, s))
	}
	require.NotEqual(t, content(t, counter(1, exp)), content(t, counter(2, exp)))
}

func TestSameState(t *testing.T) {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	a := counter(3, exp)
	require.Empty(t, sameState(a, 0, a))
	b := a
	b.Expires = exp.In(time.FixedZone("x", 3600))
	require.Empty(t, sameState(a, 0, b), "the same instant in another location")
	b.Expires = exp.Add(1)
	require.Contains(t, sameState(a, 0, b), "Expires")
	require.Contains(t, sameState(a, 1, a), "Version")
	require.Contains(t, sameState(a, 0, counter(4, exp)), "content")
	require.True(t, isForgotten(pace.State{Version: 4}))
	require.False(t, isForgotten(counter(1, time.Time{})))
	require.False(t, isForgotten(pace.State{Expires: exp}))
}

func TestOddKeysDistinct(t *testing.T) {
	keys := oddKeyList()
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	require.Len(t, slices.Compact(sorted), len(keys), "oddKeyList must not repeat a key")
	require.Contains(t, keys, "", "the empty key is a key")
}

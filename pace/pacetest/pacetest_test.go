package pacetest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
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

// jsonStore keeps each state JSON-encoded, as a store on a server would,
// and forgets a key once its Expires has passed, as Redis does: a
// forgotten key is gone (version 0). broken names a defect to build in,
// for the suite to find.
type jsonStore struct {
	now    func() time.Time
	broken string

	mu   sync.Mutex
	keys map[string]*jsonEntry
}

type jsonEntry struct {
	data    []byte
	state   pace.State // "aliases": the caller's value, kept as it is
	version uint64
	expires time.Time
}

func newJSONStore(now func() time.Time, broken string) *jsonStore {
	return &jsonStore{now: now, broken: broken, keys: map[string]*jsonEntry{}}
}

func (j *jsonStore) key(k string) string {
	if j.broken == "truncates keys" && len(k) > 64 {
		return k[:64]
	}
	return k
}

// entry returns k's entry, forgetting it if it has expired. j.mu is held.
func (j *jsonStore) entry(k string) *jsonEntry {
	e := j.keys[k]
	if e != nil && j.broken != "never forgets" && !j.now().Before(e.expires) {
		delete(j.keys, k)
		return nil
	}
	return e
}

func (j *jsonStore) Load(_ context.Context, k string) (pace.State, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e := j.entry(j.key(k))
	if e == nil {
		if j.broken == "load creates" {
			j.keys[j.key(k)] = &jsonEntry{data: []byte("{}"), version: 1, expires: j.now().Add(time.Hour)}
			return pace.State{Version: 1}, nil
		}
		return pace.State{}, nil
	}
	if j.broken == "aliases" {
		return e.state, nil
	}
	var s pace.State
	if err := json.Unmarshal(e.data, &s); err != nil {
		return pace.State{}, err
	}
	s.Version = e.version
	return s, nil
}

func (j *jsonStore) CompareAndSwap(_ context.Context, k string, version uint64, next pace.State) (bool, error) {
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
		next.PauseUntil = next.PauseUntil.Truncate(time.Millisecond)
	}
	data, err := json.Marshal(next)
	if err != nil {
		return false, err
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
	j.keys[j.key(k)] = &jsonEntry{data: data, state: next, version: cur + 1, expires: expires}
	return true, nil
}

func TestJSONStore(t *testing.T) {
	c := newFakeClock()
	TestStore(t, func(*testing.T) pace.Store { return newJSONStore(c.Now, "") }, WithClock(c.Now, c.Advance))
}

// TestJSONStoreMovingClock runs the suite on a clock that moves a
// millisecond at every reading, as a real one moves between the suite's
// steps: the suite must compare a store's state with the state it wrote,
// not with one built again later.
func TestJSONStoreMovingClock(t *testing.T) {
	c := newFakeClock()
	now := func() time.Time {
		c.Advance(time.Millisecond)
		return c.Now()
	}
	TestStore(t, func(*testing.T) pace.Store { return newJSONStore(c.Now, "") }, WithClock(now, c.Advance))
}

// TestRealTime runs the suite as it runs for a store on real time (no
// advance function), with the suite's sleeps moving a fake clock instead.
func TestRealTime(t *testing.T) {
	c := newFakeClock()
	var slept atomic.Int64
	sleep = func(d time.Duration) { slept.Add(int64(d)); c.Advance(d) }
	t.Cleanup(func() { sleep = time.Sleep })
	TestStore(t, func(*testing.T) pace.Store { return newJSONStore(c.Now, "") },
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
	TestStore(t, func(*testing.T) pace.Store { return newJSONStore(c.Now, broken) }, opts...)
}

// requireAllSet fails t if a field of v, or of an element of one of its
// slices, is zero, naming the field.
func requireAllSet(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch {
	case v.Type() == timeType:
		require.False(t, v.Interface().(time.Time).IsZero(), "FullState leaves %s zero", path)
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				requireAllSet(t, v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	case v.Kind() == reflect.Slice:
		require.Positive(t, v.Len(), "FullState leaves %s empty", path)
		for i := range v.Len() {
			requireAllSet(t, v.Index(i), path+"[i]")
		}
	default:
		require.False(t, v.IsZero(), "FullState leaves %s zero: a store that drops it would pass", path)
	}
}

// TestFullStateSetsEveryField keeps FullState complete as State grows.
func TestFullStateSetsEveryField(t *testing.T) {
	requireAllSet(t, reflect.ValueOf(FullState(time.Now(), time.Hour)), "State")
}

// TestFullStateJSON: a State written as JSON and read back normalizes to
// what was written, though its instants change location.
func TestFullStateJSON(t *testing.T) {
	want := FullState(time.Now(), time.Hour)
	data, err := json.Marshal(want)
	require.NoError(t, err)
	var got pace.State
	require.NoError(t, json.Unmarshal(data, &got))
	require.NotEqual(t, want, got, "FullState's instants must carry monotonic readings and locations that JSON drops")
	require.Equal(t, Normalize(want), Normalize(got))
}

func TestNormalize(t *testing.T) {
	now := time.Now() // with a monotonic reading
	s := pace.State{
		Expires: now.In(time.FixedZone("x", 3600)),
		Spent:   []pace.BucketSpent{},
		Quotas:  []pace.QuotaState{{Sends: []time.Time{now}}, {Sends: []time.Time{}}},
	}
	n := Normalize(s)
	require.Equal(t, pace.State{
		Expires: now.Round(0).UTC(),
		Quotas:  []pace.QuotaState{{Sends: []time.Time{now.Round(0).UTC()}}, {}},
	}, n)
	n.Quotas[0].Sends[0] = time.Time{}
	require.Equal(t, now, s.Quotas[0].Sends[0], "Normalize must copy, not change its argument")
}

func TestScrambleChangesEveryField(t *testing.T) {
	base := time.Now()
	s := FullState(base, time.Hour)
	scrambleState(&s)
	want, got := reflect.ValueOf(FullState(base, time.Hour)), reflect.ValueOf(s)
	var walk func(w, g reflect.Value, path string)
	walk = func(w, g reflect.Value, path string) {
		switch {
		case w.Type() == timeType:
			require.False(t, w.Interface().(time.Time).Equal(g.Interface().(time.Time)), "%s unchanged", path)
		case w.Kind() == reflect.Struct:
			for i := range w.NumField() {
				walk(w.Field(i), g.Field(i), path+"."+w.Type().Field(i).Name)
			}
		case w.Kind() == reflect.Slice:
			for i := range w.Len() {
				walk(w.Index(i), g.Index(i), path+"[i]")
			}
		default:
			require.NotEqual(t, w.Interface(), g.Interface(), "%s unchanged", path)
		}
	}
	walk(want, got, "State")
}

func TestOddKeysDistinct(t *testing.T) {
	keys := oddKeyList()
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	require.Len(t, slices.Compact(sorted), len(keys), "oddKeyList must not repeat a key")
	require.Contains(t, keys, "", "the empty key is a key")
}

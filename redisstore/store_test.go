package redisstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/pace"
	"github.com/headway-go/headway/pace/pacetest"
)

// TestStoreConformance runs pace's store conformance suite against a real
// Redis, on Redis's own clock (states expire by PX), failing closed with a
// generous timeout so that a slow machine shows as an error rather than as
// a silent fallback; and once more with the default options. The suite's
// clock is the real one.
func TestStoreConformance(t *testing.T) {
	requireRedis(t)
	client := sharedRedis.client(t)
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"FailClosed", []Option{WithFailClosed(), WithTimeout(5 * time.Second)}},
		{"Defaults", []Option{WithTimeout(time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pacetest.TestStore(t, func(t *testing.T) pace.Store {
				prefix := "conformance:" + t.Name() + ":"
				require.NoError(t, deleteKeys(client, prefix))
				t.Cleanup(func() { deleteKeys(client, prefix) })
				s := New(client, append([]Option{WithPrefix(prefix)}, tc.opts...)...)
				t.Cleanup(func() {
					if m := s.Mode(); m != Shared {
						t.Errorf("the store fell back from Redis during the suite (mode %v)", m)
					}
				})
				return s
			}, pacetest.WithExpiry(300*time.Millisecond, 3*time.Second))
		})
	}
}

// TestStoresShareState: two stores (two processes) on one Redis see each
// other's writes, and a swap at a version the other has moved past fails.
func TestStoresShareState(t *testing.T) {
	requireRedis(t)
	prefix := "share:" + t.Name() + ":"
	client := sharedRedis.client(t)
	require.NoError(t, deleteKeys(client, prefix))
	t.Cleanup(func() { deleteKeys(client, prefix) })
	a := New(sharedRedis.client(t), WithPrefix(prefix), WithFailClosed(), WithTimeout(5*time.Second))
	b := New(sharedRedis.client(t), WithPrefix(prefix), WithFailClosed(), WithTimeout(5*time.Second))
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	ok, err := a.CompareAndSwap(ctx, "api.example.com", 0, counted(t, 1, exp))
	require.NoError(t, err)
	require.True(t, ok)
	got, err := b.Load(ctx, "api.example.com")
	require.NoError(t, err)
	require.Equal(t, uint64(1), got.Version)
	require.Equal(t, uint64(1), leasesTaken(t, got))

	ok, err = b.CompareAndSwap(ctx, "api.example.com", 1, counted(t, 2, exp))
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = a.CompareAndSwap(ctx, "api.example.com", 1, counted(t, 99, exp))
	require.NoError(t, err)
	require.False(t, ok, "a swap at a version another process has moved past must fail")

	// Three stores, 16 goroutines each, incrementing one key: serialized
	// within each store, compare-and-swap between them.
	stores := []*Store{a, b, New(sharedRedis.client(t), WithPrefix(prefix), WithFailClosed(), WithTimeout(5*time.Second))}
	var wg sync.WaitGroup
	errs := make(chan error, 48)
	for _, s := range stores {
		for range 16 {
			wg.Go(func() {
				for range 10 {
					for {
						err := pace.Apply(ctx, s, "counter", func(st *pace.State) error {
							st.Expires = exp
							return bump(st)
						})
						if errors.Is(err, pace.ErrConflict) {
							continue
						}
						if err != nil {
							errs <- err
						}
						break
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got, err = a.Load(ctx, "counter")
	require.NoError(t, err)
	require.Equal(t, uint64(480), leasesTaken(t, got), "3 stores x 16 goroutines x 10 leases")
	require.Equal(t, uint64(480), got.Version)
}

// TestRedisKeys: the Redis key is the prefix and the hex SHA-256 of the
// pacing key in a hash tag; never the key itself, which may be secret.
func TestRedisKeys(t *testing.T) {
	s := New(nil)
	secret := "https://api.example.com/v1?api_key=sk_live_SECRET"
	sum := sha256.Sum256([]byte(secret))
	require.Equal(t, "headway:pace:{"+hex.EncodeToString(sum[:])+"}", s.RedisKey(secret))
	require.NotContains(t, s.RedisKey(secret), "SECRET")
	require.Equal(t, "x:{"+hex.EncodeToString(sha256.New().Sum(nil))+"}", New(nil, WithPrefix("x:")).RedisKey(""))
	require.NotEqual(t, s.RedisKey("a"), s.RedisKey("b"))

	if skipRedis != "" {
		return
	}
	// Nothing of the key reaches Redis's keys.
	prefix := "keys:" + t.Name() + ":"
	client := sharedRedis.client(t)
	require.NoError(t, deleteKeys(client, prefix))
	s = New(client, WithPrefix(prefix), WithFailClosed(), WithTimeout(5*time.Second))
	ok, err := s.CompareAndSwap(context.Background(), secret, 0, counted(t, 1, time.Now().Add(time.Minute)))
	require.NoError(t, err)
	require.True(t, ok)
	t.Cleanup(func() { deleteKeys(client, prefix) })
	keys, err := client.Keys(context.Background(), escapeGlob(prefix)+"*").Result()
	require.NoError(t, err)
	require.Equal(t, []string{s.RedisKey(secret)}, keys)
	slot, err := client.ClusterKeySlot(context.Background(), s.RedisKey(secret)).Result()
	if err == nil { // CLUSTER KEYSLOT works on a server without cluster mode too
		require.Equal(t, clusterSlot(hex.EncodeToString(sum[:])), slot, "the hash tag decides the slot")
	}
}

// clusterSlot is Redis Cluster's CRC16 slot of key.
func clusterSlot(key string) int64 {
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int64(crc % 16384)
}

func TestTTL(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		expires time.Time
		want    int64
	}{
		{now.Add(time.Second), 1000},
		{now.Add(time.Second + 1), 1001}, // rounded up
		{now.Add(time.Millisecond), 1},
		{now.Add(1), 1},
		{now, 1},                                          // never 0: Redis refuses PX 0
		{now.Add(-time.Hour), 1},                          // expired: gone at once
		{time.Time{}, pace.DefaultIdleTTL.Milliseconds()}, // pace always sets one
		{now.Add(100 * 365 * 24 * time.Hour), (100 * 365 * 24 * time.Hour).Milliseconds()},
	} {
		require.Equal(t, tc.want, ttlMillis(tc.expires, now), "expires %v", tc.expires)
	}
}

func TestEncoding(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	full := pacetest.FullState(base, time.Hour)
	val, err := encode(7, base, full)
	require.NoError(t, err)
	head := fmt.Sprintf("7:%d:%d:", base.UnixMilli(), full.Expires.UnixNano())
	require.True(t, strings.HasPrefix(string(val), head), "version, written, expires: %.60q", val)
	body, err := full.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, head+string(body), string(val), "then the state's own encoding")
	got, ok := decode(string(val))
	require.True(t, ok)
	requireState(t, full, 7, got)

	// No Expires: 0.
	small := counted(t, 3, time.Time{})
	val, err = encode(12, base, small)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(val), fmt.Sprintf("12:%d:0:", base.UnixMilli())), "%.40q", val)
	got, ok = decode(string(val))
	require.True(t, ok)
	requireState(t, small, 12, got)

	// What the Lua script reads as version 0 (missing, unreadable), decode
	// reads as version 0; an unreadable state (garbage, a format it does
	// not know, the JSON that redisstore wrote before) keeps its version,
	// so that the next swap replaces it.
	zero := string(emptyContent(t))
	for _, tc := range []struct {
		val     string
		version uint64
		ok      bool
	}{
		{"", 0, true},
		{"garbage", 0, false},
		{":{}", 0, false},
		{"-1:{}", 0, false},
		{"1x:{}", 0, false},
		{"123456789012345678901:{}", 0, false}, // 21 digits
		{"5:not json", 5, false},
		{"5:{}", 5, false},               // JSON, as written before states were opaque
		{"5:1893456000000:{}", 5, false}, // the same, with when it was written
		{"5:1893456000000:gnot gob", 5, false},
		{"5:1893456000000:0:" + zero, 5, true},
		{"5:1893456000000:0:" + zero + "x", 5, false}, // trailing bytes
		{"5:1893456000000:0:" + zero[:len(zero)-1], 5, false},
		{"5:1893456000000:0:" + string([]byte{zero[0] + 1}) + zero[1:], 5, false}, // a format to come
		{"5:1893456000000:0:", 5, false},
		{"5:1893456000000:x:" + zero, 5, false},
		{"5:1893456000000:-:" + zero, 5, false},
		{"5:18934x:0:" + zero, 5, false},
		{"5::0:" + zero, 5, false},
	} {
		got, ok := decode(tc.val)
		require.Equal(t, tc.ok, ok, "decode(%q)", tc.val)
		requireState(t, pace.State{}, tc.version, got)
	}
	got, ok = decode("5:1893456000000:-1000:" + zero)
	require.True(t, ok, "an Expires before 1970 is an instant like another")
	require.True(t, got.Expires.Equal(time.Unix(0, -1000)))
}

// emptyContent is the encoding of a State with nothing in it.
func emptyContent(t *testing.T) []byte {
	t.Helper()
	b, err := pace.State{}.MarshalBinary()
	require.NoError(t, err)
	return b
}

// requireState fails t unless got is want at version: the same content
// (MarshalBinary's bytes) and Expires.
func requireState(t *testing.T, want pace.State, version uint64, got pace.State) {
	t.Helper()
	w, err := want.MarshalBinary()
	require.NoError(t, err)
	g, err := got.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, version, got.Version, "version")
	require.True(t, want.Expires.Equal(got.Expires), "Expires %v, want %v", got.Expires, want.Expires)
	require.Equal(t, w, g, "content")
}

// counterAt is the instant of the reservations that count.
var counterAt = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// bump reserves a lease in st and cancels it, as a request that never
// left: st has granted one lease more.
func bump(st *pace.State) error {
	d := st.Reserve(counterAt, pace.Request{}, nil)
	if !d.OK {
		return fmt.Errorf("the state grants no lease: %v", d.Why)
	}
	st.Cancel(d.Lease, nil)
	return nil
}

// counted returns a state that has granted n leases (each cancelled), and
// expires at exp: the tests' states differ in n.
func counted(t *testing.T, n uint64, exp time.Time) pace.State {
	t.Helper()
	var st pace.State
	for range n {
		require.NoError(t, bump(&st))
	}
	st.Expires = exp
	return st
}

// leasesTaken returns how many leases a key's state has granted: the
// number of the next lease, less one. The next lease is reserved on a copy
// (nothing is written back), late enough that every lease has expired and
// every pause has ended, and again when it must wait.
func leasesTaken(t *testing.T, st pace.State) uint64 {
	t.Helper()
	c := st.Clone()
	at := time.Now().Add(pace.DefaultLeaseTTL + time.Hour)
	var d pace.Decision
	for range 100 {
		if d = c.Reserve(at, pace.Request{}, nil); d.OK {
			return d.Lease.Seq() - 1
		}
		at = d.At
	}
	t.Fatalf("the loaded state grants no lease: it waits until %v (%v: %s)", d.At, d.Why, d.Detail)
	return 0
}

// TestScriptReadsVersions checks the Lua script's reading of versions
// against decode's, on values written behind the store's back.
func TestScriptReadsVersions(t *testing.T) {
	requireRedis(t)
	prefix := "script:" + t.Name() + ":"
	client := sharedRedis.client(t)
	t.Cleanup(func() { deleteKeys(client, prefix) })
	s := New(client, WithPrefix(prefix), WithFailClosed(), WithTimeout(5*time.Second))
	ctx := context.Background()
	exp := time.Now().Add(time.Minute)
	binary, err := encode(8, time.Now(), counted(t, 3, exp))
	require.NoError(t, err)
	for i, raw := range []string{"garbage", "5:not json", "9007199254740993:{}", "5:{\"seq\":3}", "6:1893456000000:{\"seq\":3}", string(binary)} {
		key := fmt.Sprint("k", i)
		require.NoError(t, client.Set(ctx, s.RedisKey(key), raw, time.Minute).Err())
		st, err := s.Load(ctx, key)
		require.NoError(t, err)
		ok, err := s.CompareAndSwap(ctx, key, st.Version+1, counted(t, 0, exp))
		require.NoError(t, err)
		require.False(t, ok, "%q: a swap at another version than Load's must fail", raw)
		ok, err = s.CompareAndSwap(ctx, key, st.Version, counted(t, 42, exp))
		require.NoError(t, err)
		require.True(t, ok, "%q: a swap at the version Load returned (%d) must succeed", raw, st.Version)
		st2, err := s.Load(ctx, key)
		require.NoError(t, err)
		require.Equal(t, st.Version+1, st2.Version)
		require.Equal(t, uint64(42), leasesTaken(t, st2))
		ttl, err := client.PTTL(ctx, s.RedisKey(key)).Result()
		require.NoError(t, err)
		require.InDelta(t, float64(time.Minute), float64(ttl), float64(5*time.Second), "the key expires with the state")
	}
}

// TestForgetStale: when Redis returns, the states of the keys used during
// the outage that were last written before it began are deleted; those
// written since are kept.
func TestForgetStale(t *testing.T) {
	requireRedis(t)
	prefix := "stale:" + t.Name() + ":"
	client := sharedRedis.client(t)
	require.NoError(t, deleteKeys(client, prefix))
	t.Cleanup(func() { deleteKeys(client, prefix) })
	s := New(client, WithPrefix(prefix), WithFailClosed(), WithTimeout(5*time.Second))
	ctx := context.Background()
	began := time.Now()
	exp := began.Add(time.Hour)
	write := func(key string, at time.Time) {
		s.now = func() time.Time { return at }
		defer func() { s.now = time.Now }()
		ok, err := s.CompareAndSwap(ctx, key, 0, counted(t, 1, exp))
		require.NoError(t, err)
		require.True(t, ok)
	}
	write("before", began.Add(-time.Second))
	write("after", began.Add(time.Second))
	write("untouched", began.Add(-time.Second))
	o := &outage{since: began}
	for _, k := range []string{"before", "after", "missing"} {
		o.note(s.RedisKey(k))
	}
	s.forgetStale(o, 5*time.Second)
	for k, version := range map[string]uint64{"before": 0, "after": 1, "missing": 0, "untouched": 1} {
		st, err := s.Load(ctx, k)
		require.NoError(t, err)
		require.Equal(t, version, st.Version, "key %q", k)
	}
}

func TestModeAndErrors(t *testing.T) {
	require.Equal(t, "shared", Shared.String())
	require.Equal(t, "local", Local.String())
	require.Equal(t, "unavailable", Unavailable.String())
	require.Equal(t, "Mode(9)", Mode(9).String())

	cause := &TimeoutError{Op: "load", After: 50 * time.Millisecond}
	var err error = fmt.Errorf("headway: pacing state of api.example.com: %w",
		&UnavailableError{Err: cause, Since: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)})
	require.ErrorIs(t, err, ErrUnavailable)
	var ue *UnavailableError
	require.ErrorAs(t, err, &ue)
	var te *TimeoutError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "load", te.Op)
	require.True(t, te.Timeout())
	require.Contains(t, err.Error(), "redisstore: redis unavailable since 2030-01-02T03:04:05Z: redis load: no answer within 50ms")

	require.Equal(t, "redisstore: shared -> local: boom", Event{From: Shared, To: Local, Err: errors.New("boom")}.String())
	require.Equal(t, "redisstore: local -> shared: redis is back after 1.5s", Event{From: Local, To: Shared, Outage: 1500 * time.Millisecond}.String())
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	port, err := freePort()
	require.NoError(t, err)
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// TestFailOpenWithoutRedis: with nothing listening, the first call falls
// back at once (connection refused), the switch is reported, later calls
// never touch Redis, and pacing goes on in the fallback.
func TestFailOpenWithoutRedis(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: deadAddr(t), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	calls := &countHook{}
	client.AddHook(calls)
	var mu sync.Mutex
	var events []Event
	var logs bytes.Buffer
	s := New(client, WithRetryInterval(time.Hour), WithOnSwitch(func(e Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}), WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	ctx := context.Background()
	require.Equal(t, Shared, s.Mode())
	const secret = "https://api.example.com/?token=SECRET"
	_, err := s.Load(ctx, secret)
	require.NoError(t, err)
	require.Contains(t, logs.String(), "redis unavailable, pacing in this process alone")
	require.NotContains(t, logs.String(), "SECRET", "logs never hold pacing keys")
	st, err := s.Load(ctx, "k")
	require.NoError(t, err, "failing open, Load falls back")
	require.Equal(t, Local, s.Mode())
	require.Len(t, events, 1)
	require.Equal(t, Shared, events[0].From)
	require.Equal(t, Local, events[0].To)
	require.Error(t, events[0].Err)
	require.NotZero(t, st.Version&localTag, "a fallback version is told from Redis's")

	before := calls.n()
	exp := time.Now().Add(time.Minute)
	ok, err := s.CompareAndSwap(ctx, "k", st.Version, counted(t, 5, exp))
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.CompareAndSwap(ctx, "k", 0, counted(t, 6, exp))
	require.NoError(t, err)
	require.False(t, ok, "a Redis version is not valid in the fallback")
	require.NoError(t, pace.Apply(ctx, s, "k", bump))
	st, err = s.Load(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, uint64(6), leasesTaken(t, st))
	require.Equal(t, before, calls.n(), "while the circuit is open, nothing goes to Redis (retry interval: an hour)")
	require.Len(t, events, 1)
}

// TestFailClosedWithoutRedis: failing closed, every call fails with an
// *UnavailableError, the first after one attempt, the others at once.
func TestFailClosedWithoutRedis(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: deadAddr(t), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	calls := &countHook{}
	client.AddHook(calls)
	s := New(client, WithFailClosed(), WithRetryInterval(time.Hour))
	ctx := context.Background()
	_, err := s.Load(ctx, "k")
	var ue *UnavailableError
	require.ErrorAs(t, err, &ue)
	require.ErrorIs(t, err, ErrUnavailable)
	require.Equal(t, Unavailable, s.Mode())
	n := calls.n()
	_, err = s.CompareAndSwap(ctx, "k", 0, pace.State{})
	require.ErrorIs(t, err, ErrUnavailable)
	err = pace.Apply(ctx, s, "k", func(*pace.State) error { return nil })
	require.ErrorIs(t, err, ErrUnavailable)
	require.Equal(t, n, calls.n(), "while the circuit is open, nothing goes to Redis")
}

// TestCallerContext: the caller's own cancelled context is the caller's
// error, not Redis's: the store does not fall back.
func TestCallerContext(t *testing.T) {
	requireRedis(t)
	s := New(sharedRedis.client(t), WithPrefix("ctx:"+t.Name()+":"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Load(ctx, "k")
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.CompareAndSwap(ctx, "k", 0, pace.State{})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, s.UpdateInPlace(ctx, "k", func(*pace.State) error { return nil }), context.Canceled)
	require.Equal(t, Shared, s.Mode())
}

func TestKeyLocks(t *testing.T) {
	var l keyLocks
	l.m = map[string]*keyLock{}
	unlock, err := l.lock(context.Background(), "a")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = l.lock(ctx, "a")
	require.ErrorIs(t, err, context.DeadlineExceeded, "a held lock is waited for until the context ends")
	other, err := l.lock(context.Background(), "b")
	require.NoError(t, err, "keys do not share locks")
	other()
	unlock()
	unlock, err = l.lock(context.Background(), "a")
	require.NoError(t, err)
	unlock()
	require.Empty(t, l.m, "locks nobody holds are forgotten")
}

// countHook counts the commands a client sends.
type countHook struct {
	mu    sync.Mutex
	count int
}

func (h *countHook) n() int { h.mu.Lock(); defer h.mu.Unlock(); return h.count }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.count++
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

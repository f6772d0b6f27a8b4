package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/headway-go/headway/pace"
)

// outage is one period during which Redis is not used: from the call that
// failed until a PING is answered.
type outage struct {
	epoch uint64     // this outage's number, in the versions of the fallback
	since time.Time  // when the call failed
	cause error      // how it failed
	local pace.Store // the fallback (nil when failing closed)

	next    atomic.Int64 // earliest next PING, in Unix nanoseconds
	probing atomic.Bool  // a PING is on its way

	keys  sync.Map     // the Redis keys used meanwhile (string -> struct{})
	nkeys atomic.Int64 // how many
}

// maxStaleKeys bounds the keys an outage remembers, to forget their stale
// states when Redis returns.
const maxStaleKeys = 10_000

// note remembers that rkey was used during the outage.
func (o *outage) note(rkey string) {
	if o.nkeys.Load() >= maxStaleKeys {
		return
	}
	if _, loaded := o.keys.LoadOrStore(rkey, struct{}{}); !loaded {
		o.nkeys.Add(1)
	}
}

// Versions from the fallback carry localTag and the outage's epoch, so that
// they are told from Redis's (which never get near 2^48) and from another
// outage's fallback.
const (
	localTag   = 1 << 63
	epochShift = 48
	epochMask  = 1<<15 - 1
	localMask  = 1<<epochShift - 1
)

func (o *outage) tag(v uint64) uint64 {
	return localTag | (o.epoch&epochMask)<<epochShift | v&localMask
}

// untag returns the fallback's version of v, and whether v is one of this
// outage's.
func (o *outage) untag(v uint64) (uint64, bool) {
	if v&localTag == 0 || (v>>epochShift)&epochMask != o.epoch&epochMask {
		return 0, false
	}
	return v & localMask, true
}

// encodeError is a state that could not be encoded: not Redis's fault.
type encodeError struct{ err error }

func (e *encodeError) Error() string {
	return "redisstore: encoding the pacing state: " + e.err.Error()
}
func (e *encodeError) Unwrap() error { return e.err }

// failed handles the failure err of a Redis call on rkey. It returns the
// caller's context's error, or an error that is not Redis's, as it is;
// otherwise it opens the circuit (if no one else has), and returns the
// outage to fall back on, or, failing closed, an *UnavailableError.
func (s *Store) failed(ctx context.Context, err error, rkey string) (*outage, error) {
	if cerr := ctx.Err(); cerr != nil {
		return nil, cerr
	}
	if _, ok := errors.AsType[*encodeError](err); ok {
		return nil, err
	}
	o := s.trip(err)
	o.note(rkey)
	if s.failClosed {
		return nil, o.unavailable()
	}
	return o, nil
}

// trip opens the circuit after the failure err, and returns the outage
// (someone else's, if another call failed first).
func (s *Store) trip(err error) *outage {
	if o := s.outage.Load(); o != nil {
		return o
	}
	s.evMu.Lock()
	defer s.evMu.Unlock()
	if o := s.outage.Load(); o != nil {
		return o
	}
	now := s.now()
	o := &outage{epoch: s.epochs.Add(1), since: now, cause: err}
	if !s.failClosed {
		o.local = s.fallback
		if o.local == nil {
			o.local = pace.NewMemoryStore(s.now)
		}
	}
	o.next.Store(now.Add(s.retry).UnixNano())
	s.outage.Store(o)
	ev := Event{From: Shared, To: s.Mode(), At: now, Err: err}
	if s.logger != nil {
		msg := "redisstore: redis unavailable, pacing in this process alone until it answers"
		if s.failClosed {
			msg = "redisstore: redis unavailable, failing until it answers"
		}
		s.logger.LogAttrs(context.Background(), slog.LevelWarn, msg,
			slog.String("error", err.Error()), slog.Duration("retry_interval", s.retry))
	}
	if s.onSwitch != nil {
		s.onSwitch(ev)
	}
	return o
}

// unavailable is the error of a call made while failing closed.
func (o *outage) unavailable() error { return &UnavailableError{Err: o.cause, Since: o.since} }

// probe starts a PING in the background if the retry interval has passed
// since the last one and none is on its way. Nothing waits for it.
func (s *Store) probe(o *outage) {
	if !s.probeDue(o) {
		return
	}
	go s.ping(o, false)
}

// probeInline is probe for a store that fails closed: the call that finds
// the retry interval passed PINGs Redis itself, within the timeout, rather
// than fail when Redis may be back. It reports whether Redis answered.
func (s *Store) probeInline(o *outage) bool {
	return s.probeDue(o) && s.ping(o, true)
}

// probeDue reports whether a PING is due, and if so claims it.
func (s *Store) probeDue(o *outage) bool {
	now := s.now()
	if now.UnixNano() < o.next.Load() || !o.probing.CompareAndSwap(false, true) {
		return false
	}
	o.next.Store(now.Add(s.retry).UnixNano())
	return true
}

// ping asks Redis whether it is back and, if it is, forgets the stale
// states and closes the circuit. It reports whether Redis answered. inline
// says that a call waits for it.
func (s *Store) ping(o *outage, inline bool) bool {
	defer o.probing.Store(false)
	_, err := call(s, context.Background(), "ping", s.timeout, func(ctx context.Context) (string, error) {
		return s.client.Ping(ctx).Result()
	})
	if err != nil {
		o.next.Store(s.now().Add(s.retry).UnixNano())
		if s.logger != nil {
			s.logger.LogAttrs(context.Background(), slog.LevelDebug, "redisstore: redis still unavailable",
				slog.String("error", err.Error()))
		}
		return false
	}
	timeout := s.timeout
	if !inline {
		timeout = max(timeout, staleTimeout)
	}
	s.forgetStale(o, timeout)
	s.recovered(o)
	return true
}

// staleTimeout bounds forgetStale in the background.
const staleTimeout = time.Second

// forgetStale deletes, among the keys used during outage o, those whose
// state was last written before the outage began. They may count as in
// flight requests whose answers went to the fallback, or nowhere, until
// those leases expire (a minute); without them, the first process back
// starts the key afresh (one request goes first), and the others find its
// state. States written since, by processes that kept Redis, are kept. It
// does its best within timeout.
func (s *Store) forgetStale(o *outage, timeout time.Duration) {
	var keys []string
	o.keys.Range(func(k, _ any) bool {
		keys = append(keys, k.(string))
		return true
	})
	if len(keys) == 0 {
		return
	}
	since := o.since.UnixMilli()
	n, err := call(s, context.Background(), "forget stale states", timeout, func(ctx context.Context) (int, error) {
		pipe := s.client.Pipeline()
		cmds := make([]*redis.Cmd, len(keys))
		for i, k := range keys {
			cmds[i] = staleScript.Eval(ctx, pipe, []string{k}, since)
		}
		_, err := pipe.Exec(ctx)
		n := 0
		for _, c := range cmds {
			if v, _ := c.Int(); v == 1 {
				n++
			}
		}
		return n, err
	})
	if s.logger != nil {
		attrs := []slog.Attr{slog.Int("forgotten", n), slog.Int("keys", len(keys))}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		s.logger.LogAttrs(context.Background(), slog.LevelDebug, "redisstore: states written before the outage forgotten", attrs...)
	}
}

// current returns the outage in progress, nil when Redis is to be used. A
// store that fails closed tries Redis again first when the retry interval
// has passed.
func (s *Store) current() *outage {
	o := s.outage.Load()
	if o != nil && o.local == nil && s.probeInline(o) {
		return nil
	}
	return o
}

// recovered closes the circuit: Redis answered during outage o.
func (s *Store) recovered(o *outage) {
	s.evMu.Lock()
	defer s.evMu.Unlock()
	if !s.outage.CompareAndSwap(o, nil) {
		return
	}
	now := s.now()
	ev := Event{From: Local, To: Shared, At: now, Outage: now.Sub(o.since)}
	if s.failClosed {
		ev.From = Unavailable
	}
	if s.logger != nil {
		s.logger.LogAttrs(context.Background(), slog.LevelInfo, "redisstore: redis is back, pacing state shared again",
			slog.Duration("outage", ev.Outage))
	}
	if s.onSwitch != nil {
		s.onSwitch(ev)
	}
}

// loadLocal is Load during outage o.
func (s *Store) loadLocal(ctx context.Context, o *outage, key string) (pace.State, error) {
	o.note(s.RedisKey(key))
	if o.local == nil {
		return pace.State{}, o.unavailable()
	}
	s.probe(o)
	st, err := o.local.Load(ctx, key)
	if err != nil {
		return pace.State{}, err
	}
	st.Version = o.tag(st.Version)
	return st, nil
}

// swapLocal is CompareAndSwap during outage o.
func (s *Store) swapLocal(ctx context.Context, o *outage, key string, version uint64, next pace.State) (bool, error) {
	o.note(s.RedisKey(key))
	if o.local == nil {
		return false, o.unavailable()
	}
	s.probe(o)
	v, ok := o.untag(version)
	if !ok {
		return false, nil // loaded from Redis, or in another outage
	}
	return o.local.CompareAndSwap(ctx, key, v, next)
}

// updateLocal is UpdateInPlace during outage o.
func (s *Store) updateLocal(ctx context.Context, o *outage, key string, f func(*pace.State) error) error {
	o.note(s.RedisKey(key))
	if o.local == nil {
		return o.unavailable()
	}
	s.probe(o)
	return pace.Apply(ctx, o.local, key, f)
}

package pace

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Store holds each key's State. It has two duties, so that a shared store
// (Redis, ...) can take the in-process one's place without touching the
// algorithm: load a key's state, and replace it atomically. Implementations
// must be safe for concurrent use; package pacetest checks one against this
// contract.
type Store interface {
	// Load returns key's state. For a key with no state (never written,
	// or forgotten after its Expires) it returns a State with nothing in
	// it but its Version: 0, or a version the store keeps so that the
	// key's versions never go back (see MemoryStore).
	Load(ctx context.Context, key string) (State, error)
	// CompareAndSwap replaces key's state with next if its version is
	// still version, giving next the version version+1, and reports
	// whether it did. A key with no state is created at the version Load
	// returned for it, or at version 0 if the store holds nothing for it
	// (a store may then give it a version above every one it had before,
	// so that its versions never go back). The store may forget the key
	// once next.Expires has passed.
	CompareAndSwap(ctx context.Context, key string, version uint64, next State) (bool, error)
}

// ErrConflict is returned by Update when the key's state kept changing
// under it for too many attempts.
var ErrConflict = errors.New("pace: state changed concurrently too many times")

// maxUpdateAttempts bounds Update's compare-and-swap loop.
const maxUpdateAttempts = 64

// InPlace is implemented by stores that can apply a change to a key's
// state under their own lock, without copying it (see Apply).
type InPlace interface {
	// UpdateInPlace applies f to key's state under the store's lock. f
	// must leave the state unchanged when it returns an error.
	UpdateInPlace(ctx context.Context, key string, f func(*State) error) error
}

// Apply is Update for a change that returns an error only before it has
// changed anything (as State's methods do): on a store that implements
// InPlace, f changes the stored state under the store's lock, without the
// copy Update makes.
func Apply(ctx context.Context, store Store, key string, f func(*State) error) error {
	if ip, ok := store.(InPlace); ok {
		return ip.UpdateInPlace(ctx, key, f)
	}
	_, err := Update(ctx, store, key, f)
	return err
}

// Update applies f to key's state in store, atomically: it loads the state,
// lets f change a copy, and replaces the state only if no one else did
// meanwhile, trying again if someone did. It returns the state f produced.
// An error from f is returned as it is, and nothing is stored.
func Update(ctx context.Context, store Store, key string, f func(*State) error) (State, error) {
	if ip, ok := store.(InPlace); ok {
		var out State
		err := ip.UpdateInPlace(ctx, key, func(s *State) error {
			next := s.Clone()
			if err := f(&next); err != nil {
				return err
			}
			next.Version = s.Version
			*s = next
			out = next.Clone()
			out.Version++
			return nil
		})
		if err != nil {
			return State{}, err
		}
		return out, nil
	}
	for range maxUpdateAttempts {
		cur, err := store.Load(ctx, key)
		if err != nil {
			return State{}, err
		}
		next := cur.Clone()
		if err := f(&next); err != nil {
			return State{}, err
		}
		ok, err := store.CompareAndSwap(ctx, key, cur.Version, next)
		if err != nil {
			return State{}, err
		}
		if ok {
			next.Version = cur.Version + 1
			return next, nil
		}
		if err := ctx.Err(); err != nil {
			return State{}, err
		}
	}
	return State{}, ErrConflict
}

// MemoryStore is the in-process Store: a map of keys, each behind its own
// lock, so that keys do not contend. Keys whose state has expired are
// forgotten as new keys arrive (swept).
//
// A key's versions never go back, so that a compare-and-swap at a version
// loaded before others wrote the key fails, even if the key expired and was
// swept meanwhile: an expired key keeps its version until it is swept, and
// a key the store holds nothing for is at the store's floor, a version no
// lower than any a swept key had, and is created at one above it.
type MemoryStore struct {
	now  func() time.Time
	keys sync.Map // string -> *memEntry

	// floor is the version of every key the store holds no entry for:
	// Sweep raises it to the version of each entry it removes, before
	// removing it. Only Load, CompareAndSwap and updates of such keys, and
	// Sweep, touch it.
	floor atomic.Uint64

	mu       sync.Mutex
	added    int // keys added since the last sweep
	sweepAt  int // sweep when added reaches this
	sweeping bool

	lastSweepNano atomic.Int64 // when the last sweep began, Unix nanoseconds (0: none yet)
}

type memEntry struct {
	mu sync.Mutex
	// state is the key's state; nil while it is frozen (see Sweep): its
	// content is then encoded in frozen, and its Version and Expires are
	// ver and exp.
	state  *State
	frozen []byte // the encoding, its runs of zeros packed (packZeros)
	ver    uint64
	exp    int64 // Unix nanoseconds; 0: none
	used   bool  // read or written since the last sweep
	dead   bool  // swept: a writer that still holds it must start again
}

// version and expires are the state's, frozen or not; e.mu is held.
func (e *memEntry) version() uint64 {
	if e.state == nil {
		return e.ver
	}
	return e.state.Version
}

func (e *memEntry) expires() time.Time {
	if e.state == nil {
		if e.exp == 0 {
			return time.Time{}
		}
		return time.Unix(0, e.exp)
	}
	return e.state.Expires
}

// thaw makes e.state whole again if it was frozen, and marks e used; e.mu
// is held.
func (e *memEntry) thaw() {
	e.used = true
	if e.state != nil {
		return
	}
	s := new(State)
	if s.UnmarshalBinary(unpackZeros(e.frozen)) != nil {
		*s = State{} // cannot happen with what freeze wrote; a fresh state is safe
	}
	s.Version, s.Expires = e.ver, e.expires()
	e.state, e.frozen = s, nil
}

// freeze keeps e's state encoded: an idle key costs its encoding, whose
// runs of zeros are packed (most of a few hundred bytes: the fields of
// what the key never saw), rather than a State (two kilobytes and more);
// e.mu is held.
func (e *memEntry) freeze() {
	if e.state == nil {
		return
	}
	b, err := e.state.MarshalBinary()
	if err != nil {
		return
	}
	e.exp = 0
	if exp := e.state.Expires; !exp.IsZero() {
		e.exp = exp.UnixNano()
	}
	e.frozen, e.ver, e.state = packZeros(b), e.state.Version, nil
}

// packZeros returns b with each run of zeros written as a zero and the
// run's length (1 to 255), in a slice of its own size.
func packZeros(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		if b[i] != 0 {
			out = append(out, b[i])
			i++
			continue
		}
		n := 0
		for i < len(b) && b[i] == 0 && n < 255 {
			n++
			i++
		}
		out = append(out, 0, byte(n))
	}
	return append(make([]byte, 0, len(out)), out...)
}

// unpackZeros undoes packZeros (a run cut short reads as its zeros so far).
func unpackZeros(p []byte) []byte {
	out := make([]byte, 0, 2*len(p))
	for i := 0; i < len(p); i++ {
		if p[i] != 0 {
			out = append(out, p[i])
			continue
		}
		if i+1 < len(p) {
			i++
			out = append(out, make([]byte, p[i])...)
		}
	}
	return out
}

// NewMemoryStore returns an empty in-process store. now is the clock that
// expiry is judged by (nil: time.Now).
func NewMemoryStore(now func() time.Time) *MemoryStore {
	if now == nil {
		now = time.Now
	}
	return &MemoryStore{now: now, sweepAt: 1024}
}

// Load implements Store. A key the store holds no state for loads as a
// State with nothing in it but a version no lower than any it had: 0 until
// the store has swept a key.
func (m *MemoryStore) Load(_ context.Context, key string) (State, error) {
	v, ok := m.keys.Load(key)
	if !ok {
		return State{Version: m.floor.Load()}, nil
	}
	e := v.(*memEntry)
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, exp := e.version(), e.expires(); v != 0 && !exp.IsZero() && !m.now().Before(exp) {
		return State{Version: v}, nil // forgotten, but versions never go back
	}
	e.thaw()
	return e.state.Clone(), nil
}

// CompareAndSwap implements Store. A key the store holds nothing for
// (never written, or swept) is created at version 0, or at the version
// Load returned for it if no sweep has raised the store's floor since, and
// gets the version one above the floor: 1 until the store has swept a key.
func (m *MemoryStore) CompareAndSwap(_ context.Context, key string, version uint64, next State) (bool, error) {
	var e *memEntry
	created := false
	if v, ok := m.keys.Load(key); ok {
		e = v.(*memEntry)
		e.mu.Lock()
	} else {
		if version != 0 && version != m.floor.Load() {
			return false, nil
		}
		e, created = m.create(key)
	}
	ok := !e.dead && (e.version() == version || created && version == 0)
	if ok {
		v := e.version()
		ns := next.Clone()
		ns.Version = v + 1
		e.state, e.frozen, e.used = &ns, nil, true
	} else if created {
		m.forget(key, e) // nothing written: the key stays without an entry
	}
	e.mu.Unlock()
	if created && ok {
		m.added1()
	}
	return ok, nil
}

// create returns key's entry, locked: a new one, at the store's floor
// version, if the store had none (created), else the one it has.
func (m *MemoryStore) create(key string) (e *memEntry, created bool) {
	e = &memEntry{state: new(State)}
	e.mu.Lock()
	if v, loaded := m.keys.LoadOrStore(key, e); loaded {
		e = v.(*memEntry)
		e.mu.Lock()
		return e, false
	}
	// Read the floor only now that e is in the map, and before anyone can
	// see its state: a sweep that removed an earlier entry of key raised
	// the floor to its version before removing it.
	e.state.Version = m.floor.Load()
	return e, true
}

// forget removes e, key's entry, locked by the caller: a writer that still
// holds it must start again.
func (m *MemoryStore) forget(key any, e *memEntry) {
	e.dead = true
	m.keys.CompareAndDelete(key, e)
}

// UpdateInPlace implements InPlace: f changes key's state under the key's
// lock, with no copy; the version advances when f succeeds.
func (m *MemoryStore) UpdateInPlace(ctx context.Context, key string, f func(*State) error) error {
	return m.update(key, time.Time{}, false, f)
}

// UpdateInPlaceAt is UpdateInPlace for a caller that has just read the
// store's clock: now is what it said, and expiry is judged by it rather than
// by reading the clock again under the key's lock.
func (m *MemoryStore) UpdateInPlaceAt(now time.Time, key string, f func(*State) error) error {
	return m.update(key, now, true, f)
}

func (m *MemoryStore) update(key string, now time.Time, haveNow bool, f func(*State) error) error {
	for {
		var e *memEntry
		created := false
		if v, ok := m.keys.Load(key); ok {
			e = v.(*memEntry)
			e.mu.Lock()
		} else {
			e, created = m.create(key)
		}
		if e.dead {
			e.mu.Unlock()
			continue // swept meanwhile: the key has a new entry
		}
		e.thaw()
		if e.state.Version != 0 && !e.state.Expires.IsZero() {
			if !haveNow {
				now = m.now()
			}
			if !now.Before(e.state.Expires) {
				*e.state = State{Version: e.state.Version}
			}
		}
		version := e.state.Version
		err := f(e.state)
		if err == nil {
			e.state.Version = version + 1
		} else {
			e.state.Version = version
			if created {
				m.forget(key, e) // nothing written: the key stays without an entry
			}
		}
		e.mu.Unlock()
		if created && err == nil {
			m.added1()
		} else if haveNow {
			m.maybeSweep(now, false)
		}
		return err
	}
}

// Len returns how many keys the store holds, expired ones included until
// they are swept.
func (m *MemoryStore) Len() int {
	n := 0
	m.keys.Range(func(any, any) bool { n++; return true })
	return n
}

// sweepInterval is the most time between two sweeps while new keys arrive.
const sweepInterval = time.Minute

// added1 counts a new key and sweeps expired ones once the number of keys
// added since the last sweep reaches the number of keys then kept (the
// sweep's cost is spread over the keys that caused it), or once a minute
// has passed since the last sweep.
func (m *MemoryStore) added1() {
	m.mu.Lock()
	m.added++
	enough := m.added >= m.sweepAt
	m.mu.Unlock()
	m.maybeSweep(m.now(), enough)
}

// maybeSweep starts a sweep, in its own goroutine so that no request waits
// for it, when one is due: enough keys were added since the last (added1
// says), or a minute has passed (so that idle keys are frozen and
// expired ones forgotten whether or not new keys come). It costs one
// atomic load when none is due.
func (m *MemoryStore) maybeSweep(now time.Time, enough bool) {
	last := m.lastSweepNano.Load()
	if last == 0 {
		m.lastSweepNano.CompareAndSwap(0, now.UnixNano())
		last = m.lastSweepNano.Load()
	}
	if now.UnixNano()-last < int64(sweepInterval) && !enough {
		return
	}
	m.mu.Lock()
	if m.sweeping {
		m.mu.Unlock()
		return
	}
	m.sweeping = true
	m.mu.Unlock()
	m.lastSweepNano.Store(now.UnixNano())
	go func() {
		kept := m.Sweep()
		m.mu.Lock()
		m.added, m.sweepAt, m.sweeping = 0, max(1024, kept), false
		m.mu.Unlock()
	}()
}

// raiseFloor raises the store's floor to v if it is lower.
func (m *MemoryStore) raiseFloor(v uint64) {
	for f := m.floor.Load(); v > f && !m.floor.CompareAndSwap(f, v); f = m.floor.Load() {
	}
}

// Sweep forgets the keys whose state has expired and returns how many are
// kept. The state of a key that nobody read or wrote since the previous
// sweep is kept encoded until it is used again. The versions of the keys it forgets are not lost: see MemoryStore.
func (m *MemoryStore) Sweep() int {
	now := m.now()
	kept := 0
	m.keys.Range(func(k, v any) bool {
		e := v.(*memEntry)
		e.mu.Lock()
		if e.dead { // removed meanwhile (by another sweep, or a failed creation)
			e.mu.Unlock()
			return true
		}
		exp := e.expires()
		dead := !exp.IsZero() && !now.Before(exp)
		switch {
		case dead:
			m.raiseFloor(e.version())
			m.forget(k, e)
		case !e.used:
			e.freeze() // idle since the last sweep
			kept++
		default:
			e.used = false
			kept++
		}
		e.mu.Unlock()
		return true
	})
	return kept
}

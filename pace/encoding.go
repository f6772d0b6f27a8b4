package pace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// ErrBadState is what UnmarshalBinary's errors wrap: the bytes are not a
// State this package wrote (garbage, a truncated value, a format it does
// not know). A store that meets one should take the key as fresh: its
// state is what was learnt, and is learnt again.
var ErrBadState = errors.New("pace: unreadable state")

// stateFormat is the first byte of MarshalBinary's output: which layout
// follows. It is not ASCII, nor a byte that can start a UTF-8 character,
// so that an encoded state is never taken for text (JSON, say). Any change
// to the layout below takes the next value (0xBA, ...); UnmarshalBinary
// answers a format it does not know with ErrBadState, and the stores then
// start the key afresh.
//
// A field added to keyState, or to anything below it, must be written and
// read here: TestEncodingComplete fails, naming the field, until it is.
const stateFormat = 0xB9

// stateFormatB8 is the format before a policy kept when a refusal last
// doubted its sliding counter's slack (policy.slackDoubted). It is still
// read; none is.
const stateFormatB8 = 0xB8

// stateFormatB7 is the format before a policy kept which of its bucket's
// rates refusals refuted (policy.resetsDoubted, exactDoubted). It is still
// read; none are.
const stateFormatB7 = 0xB7

// stateFormatB6 is the format before a policy searched for a window
// shorter than a second (policy.wCap, wLo, pEnd). It is still read; the
// search starts unbegun.
const stateFormatB6 = 0xB6

// stateFormatB5 is the format before a policy counted its admissions by
// the reset instant their answers gave, and kept its newest admissions (policy.labE, labN, adm, countRefused). It is still
// read; the count starts empty.
const stateFormatB5 = 0xB5

// stateFormatB4 is the format before the silent model kept how long its
// most cautious candidate held requests back (silent.lost). It is still
// read; that starts at zero.
const stateFormatB4 = 0xB4

// stateFormatB3 is the format before a policy kept when its newest window
// opened (anchorAt). It is still read; that instant starts unknown.
const stateFormatB3 = 0xB3

// stateFormatB2 is the format before the silent model's sliding counters:
// one word of candidates, and no counters among the bounds. It is still
// read, so that a key's state in a store outlives an upgrade; its counters
// start refuted.
const stateFormatB2 = 0xB2

// maxStrings bounds the strings an encoding refers back to (see
// encoder.str).
const maxStrings = 32

// MarshalBinary implements encoding.BinaryMarshaler: it returns the
// content of s in a compact, versioned binary form that UnmarshalBinary
// reads back to an equal State, for a Store that keeps states outside the
// process.
//
// Version and Expires are not part of it: a store keeps them itself (the
// version is the store's own, and the expiry is the store's to enforce).
//
// Nothing secret travels in it. Routes are kept as 64-bit hashes only,
// never as text; what strings it holds are those the server sent in its
// rate-limit headers (bucket and policy names, units), and pace's own
// reasons for a pause.
//
// # Layout (format 0xB8)
//
// One byte, 0xB8, then the fields of the state in the order of their
// declaration, nothing between them, nothing after them:
//
//   - unsigned integers as uvarints (encoding/binary), signed ones as
//     zig-zag varints; instants as Unix nanoseconds (0 for none; a
//     time.Time comes back in UTC, without its monotonic reading), and
//     within a list or a pair as the difference from the one before (a
//     ledger's entries, a lease's expiry from its grant), which keeps them
//     to a few bytes;
//   - booleans as one byte, 0 or 1; small sets (uint8) as one byte, and
//     the silent model's set of candidates as its 64-bit words, each a
//     uvarint;
//   - float64s as the uvarint of math.Float64bits with its bytes reversed
//     (as encoding/gob does), so that 0 and round numbers take a byte or
//     two, and every bit, NaN's included, survives;
//   - route hashes as 8 bytes, little-endian;
//   - strings as a uvarint tag: 0 for "", 1 for a new string (its length
//     as a uvarint, then its bytes), n >= 2 for the (n-2)-th new string of
//     the encoding (of the first 32), so that a bucket's name is written
//     once;
//   - slices as their length, then their elements; arrays as their length
//     too, which must be the array's.
func (s State) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, s.k.sizeHint()))
}

// AppendBinary implements encoding.BinaryAppender: it appends
// MarshalBinary's form of s to b.
func (s State) AppendBinary(b []byte) ([]byte, error) {
	e := encoder{b: append(b, stateFormat)}
	e.keyState(&s.k)
	return e.b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler: it replaces the
// content of s with the state MarshalBinary encoded in data, keeping
// s.Version and s.Expires, which the encoding does not hold. It does not
// keep data.
//
// Bytes that are not such a state (garbage, a truncated value, trailing
// bytes, a length longer than what follows, a format it does not know)
// give an error that wraps ErrBadState, and leave s a fresh state: nothing
// in it but its Version and Expires. It reads the form, not the model's
// beliefs: a state is trusted to be one that this package wrote.
func (s *State) UnmarshalBinary(data []byte) error {
	k, err := decodeState(data)
	if err != nil {
		s.k = keyState{}
		return err
	}
	s.k = k
	return nil
}

// sizeHint guesses the size of k's encoding, so that MarshalBinary
// allocates once.
func (k *keyState) sizeHint() int {
	n := 64 + 32*len(k.leases) + 16*len(k.buckets) + 16*len(k.routes)
	for i := range k.policies {
		p := &k.policies[i]
		n += 256 + 6*(len(p.own.e)+len(p.logF.e)+len(p.ctrF.e)) + 8*len(p.anchors)
	}
	for i := range k.quotas {
		n += 16 + 12*len(k.quotas[i].sends)
	}
	return n
}

// encoder appends a state's fields to b.
type encoder struct {
	b    []byte
	strs [maxStrings]string // the new strings written so far, the first ns
	ns   int
}

func (e *encoder) u(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) i(v int64)  { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) n(v int)    { e.b = binary.AppendUvarint(e.b, uint64(v)) }
func (e *encoder) u8(v uint8) { e.b = append(e.b, v) }

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) f(v float64) { e.u(bits.ReverseBytes64(math.Float64bits(v))) }

func (e *encoder) fixed64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }

// time writes an instant as Unix nanoseconds, 0 for the zero time.
func (e *encoder) time(t time.Time) { e.i(unixNano(t)) }

// str writes s: "" as 0, a string written before as a reference to it, a
// new one in full.
func (e *encoder) str(s string) {
	if s == "" {
		e.b = append(e.b, 0)
		return
	}
	for j, t := range e.strs[:e.ns] {
		if t == s {
			e.n(j + 2)
			return
		}
	}
	e.b = append(e.b, 1)
	e.n(len(s))
	e.b = append(e.b, s...)
	if e.ns < maxStrings {
		e.strs[e.ns] = s
		e.ns++
	}
}

func (e *encoder) bounds(b bounds) {
	e.i(b.lo)
	e.i(b.hi - b.lo)
}

func (e *encoder) keyState(k *keyState) {
	e.u(k.seq)
	e.bool(k.answered)
	e.n(len(k.leases))
	var seq uint64
	var at int64
	for i := range k.leases {
		e.lease(&k.leases[i], seq, at)
		seq, at = k.leases[i].seq, k.leases[i].at
	}
	e.n(len(k.buckets))
	for i := range k.buckets {
		e.bucket(&k.buckets[i])
	}
	e.n(len(k.policies))
	for i := range k.policies {
		e.policy(&k.policies[i])
	}
	e.n(len(k.quotas))
	for i := range k.quotas {
		e.quota(&k.quotas[i])
	}
	e.n(len(k.routes))
	for _, r := range k.routes {
		e.route(r)
	}
	e.silent(&k.silent)
	e.i(k.clock.lo)
	e.i(k.clock.hi - k.clock.lo)
	e.bool(k.clock.known)
	e.i(k.rtt)
	e.i(k.rttMin)
	e.i(k.rttCur)
	e.i(k.rttPrev)
	e.u(k.rttSeen)
}

func (e *encoder) bucket(b *bucket) {
	e.str(b.name)
	e.i(b.pause)
	e.str(b.why)
	e.i(b.firstAfter)
}

func (e *encoder) route(r route) {
	e.fixed64(r.hash)
	e.str(r.bucket)
}

func (e *encoder) amount(a Amount) {
	e.str(string(a.Unit))
	e.i(a.N)
}

// lease writes l, whose number and grant follow seq's and at's.
func (e *encoder) lease(l *lease, seq uint64, at int64) {
	e.u(l.seq - seq)
	e.i(l.at - at)
	e.i(l.expires - l.at)
	e.str(l.bucket)
	e.fixed64(l.route)
	e.n(len(l.cost))
	for _, c := range l.cost {
		e.amount(c)
	}
	e.bool(l.first)
	e.n(len(l.quotas))
	for _, q := range l.quotas {
		e.i(int64(q))
	}
}

func (e *encoder) policy(p *policy) {
	e.str(p.bucket)
	e.str(p.name)
	e.str(string(p.unit))
	e.i(p.said)
	e.i(p.limit)
	e.bool(p.limitSaid)
	e.bool(p.seen)
	e.i(p.obsAt)
	e.i(p.obsRem)
	e.i(p.since)
	e.i(p.early)
	e.i(p.booked)
	e.i(p.last)
	e.ledger(&p.own)
	e.ledger(&p.logF)
	e.ledger(&p.ctrF)
	e.u8(p.alive)
	e.n(len(p.refuted))
	for _, t := range p.refuted {
		e.i(t)
	}
	e.n(len(p.score))
	for _, f := range p.score {
		e.f(f)
	}
	e.bounds(p.period)
	e.i(p.logW)
	e.i(p.jump)
	e.i(p.wCap)
	e.i(p.wLo)
	e.bounds(p.pEnd)
	e.bounds(p.lastReset)
	e.i(p.lastE)
	e.i(p.labE)
	e.i(p.labN)
	e.n(len(p.adm))
	for _, b := range p.adm {
		e.bounds(b)
	}
	e.i(p.countRefused)
	e.n(len(p.win))
	for _, b := range p.win {
		e.bounds(b)
	}
	e.bounds(p.ctr)
	e.i(p.guess)
	e.i(p.anchorAt)
	e.f(p.bLevel)
	e.i(p.bAt)
	e.f(p.rLo)
	e.f(p.rHi)
	e.f(p.rReset)
	e.f(p.rExact)
	e.f(p.rFloor)
	e.f(p.rUpper)
	e.i(p.resetsDoubted)
	e.i(p.exactDoubted)
	e.i(p.slackDoubted)
	e.u(p.probe)
	e.f(p.probeTokens)
	e.i(p.trickled)
	e.i(p.lastAdmit)
	e.i(p.regret)
	e.i(p.regretTo)
	e.i(p.rolledAt)
	e.u8(p.probeFor)
	e.u8(p.probeParam)
	e.i(int64(p.resets))
	e.i(p.alignedUntil)
	e.i(p.ownCum)
	e.n(len(p.anchors))
	var at int64
	for _, a := range p.anchors {
		e.anchor(a, at)
		at = a.at
	}
}

// anchor writes a, which follows the anchor at at.
func (e *encoder) anchor(a anchor, at int64) {
	e.i(a.at - at)
	e.i(a.level)
}

func (e *encoder) ledger(l *ledger) {
	e.n(len(l.e))
	var at int64
	for _, x := range l.e {
		e.entry(x, at)
		at = x.at
	}
}

// entry writes x, which follows the entry at at.
func (e *encoder) entry(x entry, at int64) {
	e.i(x.at - at)
	e.i(x.n)
}

func (e *encoder) quota(q *quotaState) {
	e.n(len(q.sends))
	var seq uint64
	var sent int64
	for _, s := range q.sends {
		e.send(s, seq, sent)
		seq, sent = s.seq, s.sent
	}
	e.f(q.tokens)
	e.i(q.filled)
}

// send writes s, which follows the send of lease seq sent at sent.
func (e *encoder) send(s quotaSend, seq uint64, sent int64) {
	e.u(s.seq - seq)
	e.i(s.sent - sent)
	e.i(s.recv - s.sent)
}

func (e *encoder) silent(a *silent) {
	e.bool(a.on)
	e.i(a.onAt)
	e.ledger(&a.own)
	e.ledger(&a.ref)
	for _, w := range a.alive {
		e.u(w)
	}
	c := a.silentCand
	if c == nil {
		c = &silentCand{} // the same bytes as before the first refusal
	}
	for i := range c.lo {
		e.i(c.lo[i])
		e.i(c.hi[i])
	}
	for i := range c.tat {
		e.i(c.tat[i])
		e.i(c.tatAll[i])
	}
	e.u(a.probe)
	e.i(a.probeLeft)
	e.bool(a.probeRefused)
	e.f(a.tokens)
	e.i(a.earned)
	e.i(a.base)
	e.i(a.horizon)
	e.bool(a.admitted)
	e.i(a.burst)
	e.bool(a.envelope)
	e.bool(a.restarted)
	e.i(a.slow)
	e.i(a.lost)
	e.n(len(a.pend))
	var at int64
	for _, p := range a.pend {
		e.pending(p, at)
		at = p.at
	}
}

// pending writes p, which follows the pending answer at at.
func (e *encoder) pending(p pendingAnswer, at int64) {
	e.i(p.at - at)
	e.i(p.ra)
	e.bool(p.refused)
}

// decoder reads a state's fields from b. The first error sticks: every
// read after it returns zero, and decodeState returns it.
type decoder struct {
	b    []byte
	err  error
	strs [maxStrings]string // the new strings read so far, the first ns
	ns   int
	b2   bool // the layout is stateFormatB2's
	b3   bool // the layout is stateFormatB3's or older: no policy.anchorAt
	b4   bool // the layout is stateFormatB4's or older: no silent.lost
	b5   bool // the layout is stateFormatB5's or older: no policy.labE, labN, adm, countRefused
	b6   bool // the layout is stateFormatB6's or older: no policy.wCap, wLo, pEnd
	b7   bool // the layout is stateFormatB7's or older: no policy.resetsDoubted, exactDoubted
	b8   bool // the layout is stateFormatB8's or older: no policy.slackDoubted
}

// decodeState reads the state MarshalBinary wrote in data.
func decodeState(data []byte) (keyState, error) {
	var k keyState
	switch {
	case len(data) == 0:
		return k, fmt.Errorf("%w: empty", ErrBadState)
	case data[0] < stateFormatB2 || data[0] > stateFormat:
		return k, fmt.Errorf("%w: unknown format %#02x", ErrBadState, data[0])
	}
	f := data[0]
	d := decoder{b: data[1:], b2: f == stateFormatB2, b3: f <= stateFormatB3, b4: f <= stateFormatB4, b5: f <= stateFormatB5, b6: f <= stateFormatB6, b7: f <= stateFormatB7, b8: f <= stateFormatB8}
	d.keyState(&k)
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the state", len(d.b))
	}
	if d.err != nil {
		return keyState{}, d.err
	}
	return k, nil
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrBadState}, args...)...)
		d.b = nil
	}
}

func (d *decoder) u() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad or truncated varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) i() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad or truncated varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a signed integer that must fit an int.
func (d *decoder) int() int {
	v := d.i()
	if int64(int(v)) != v {
		d.fail("integer %d out of range", v)
		return 0
	}
	return int(v)
}

func (d *decoder) u8() uint8 {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) bool() bool {
	switch v := d.u8(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("boolean %d", v)
		return false
	}
}

func (d *decoder) f() float64 { return math.Float64frombits(bits.ReverseBytes64(d.u())) }

func (d *decoder) fixed64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) time() time.Time {
	t := d.i()
	if t == 0 {
		return time.Time{}
	}
	return time.Unix(0, t).UTC()
}

func (d *decoder) str() string {
	tag := d.u()
	switch {
	case tag == 0:
		return ""
	case tag == 1:
		n := d.u()
		if n > uint64(len(d.b)) {
			d.fail("string of %d bytes, %d left", n, len(d.b))
			return ""
		}
		s := string(d.b[:n])
		d.b = d.b[n:]
		if d.ns < maxStrings {
			d.strs[d.ns] = s
			d.ns++
		}
		return s
	case tag-2 < uint64(d.ns):
		return d.strs[tag-2]
	default:
		d.fail("string reference %d of %d", tag-2, d.ns)
		return ""
	}
}

// count reads a slice's length, each of whose elements takes at least min
// bytes: a length that what is left cannot hold is an error, so that no
// length makes the decoder allocate more than the data warrants.
func (d *decoder) count(min int) int {
	n := d.u()
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)/min) {
		d.fail("%d elements of at least %d bytes, %d bytes left", n, min, len(d.b))
		return 0
	}
	return int(n)
}

// array reads an array's length, which must be want.
func (d *decoder) array(want int) {
	if n := d.u(); d.err == nil && n != uint64(want) {
		d.fail("array of %d, want %d", n, want)
	}
}

func (d *decoder) bounds() bounds {
	lo := d.i()
	return bounds{lo, lo + d.i()}
}

// The least bytes an element of each list takes: its zero value's
// encoding, which writes every field in its shortest form (an element's
// fields that follow the one before it, given the zero one before).
var (
	minLease   = encodedLen(func(e *encoder) { e.lease(&lease{}, 0, 0) })
	minAmount  = encodedLen(func(e *encoder) { e.amount(Amount{}) })
	minBucket  = encodedLen(func(e *encoder) { e.bucket(&bucket{}) })
	minPolicy  = encodedLen(func(e *encoder) { e.policy(&policy{}) })
	minEntry   = encodedLen(func(e *encoder) { e.entry(entry{}, 0) })
	minAnchor  = encodedLen(func(e *encoder) { e.anchor(anchor{}, 0) })
	minQuota   = encodedLen(func(e *encoder) { e.quota(&quotaState{}) })
	minSend    = encodedLen(func(e *encoder) { e.send(quotaSend{}, 0, 0) })
	minRoute   = encodedLen(func(e *encoder) { e.route(route{}) })
	minQuotaIx = encodedLen(func(e *encoder) { e.i(0) })
	minPending = encodedLen(func(e *encoder) { e.pending(pendingAnswer{}, 0) })
)

func encodedLen(f func(*encoder)) int {
	var e encoder
	f(&e)
	return len(e.b)
}

func (d *decoder) keyState(k *keyState) {
	k.seq = d.u()
	k.answered = d.bool()
	if n := d.count(minLease); n > 0 {
		k.leases = make([]lease, n)
		var seq uint64
		var at int64
		for i := range k.leases {
			d.lease(&k.leases[i], seq, at)
			seq, at = k.leases[i].seq, k.leases[i].at
		}
	}
	if n := d.count(minBucket); n > 0 {
		k.buckets = make([]bucket, n)
		for i := range k.buckets {
			b := &k.buckets[i]
			b.name = d.str()
			b.pause = d.i()
			b.why = d.str()
			b.firstAfter = d.i()
		}
	}
	if n := d.count(minPolicy); n > 0 {
		k.policies = make([]policy, n)
		for i := range k.policies {
			d.policy(&k.policies[i])
		}
	}
	if n := d.count(minQuota); n > 0 {
		k.quotas = make([]quotaState, n)
		for i := range k.quotas {
			d.quota(&k.quotas[i])
		}
	}
	if n := d.count(minRoute); n > 0 {
		k.routes = make([]route, n)
		for i := range k.routes {
			k.routes[i].hash = d.fixed64()
			k.routes[i].bucket = d.str()
		}
	}
	d.silent(&k.silent)
	k.clock.lo = d.i()
	k.clock.hi = k.clock.lo + d.i()
	k.clock.known = d.bool()
	k.rtt = d.i()
	k.rttMin = d.i()
	k.rttCur = d.i()
	k.rttPrev = d.i()
	k.rttSeen = d.u()
}

func (d *decoder) lease(l *lease, seq uint64, at int64) {
	l.seq = seq + d.u()
	l.at = at + d.i()
	l.expires = l.at + d.i()
	l.bucket = d.str()
	l.route = d.fixed64()
	if n := d.count(minAmount); n > 0 {
		l.cost = make([]Amount, n)
		for i := range l.cost {
			l.cost[i] = Amount{Unit: ratelimit.Unit(d.str()), N: d.i()}
		}
	}
	l.first = d.bool()
	if n := d.count(minQuotaIx); n > 0 {
		l.quotas = make([]int, n)
		for i := range l.quotas {
			l.quotas[i] = d.int()
		}
	}
}

func (d *decoder) policy(p *policy) {
	p.bucket = d.str()
	p.name = d.str()
	p.unit = ratelimit.Unit(d.str())
	p.said = d.i()
	p.limit = d.i()
	p.limitSaid = d.bool()
	p.seen = d.bool()
	p.obsAt = d.i()
	p.obsRem = d.i()
	p.since = d.i()
	p.early = d.i()
	p.booked = d.i()
	p.last = d.i()
	d.ledger(&p.own)
	d.ledger(&p.logF)
	d.ledger(&p.ctrF)
	p.alive = d.u8()
	d.array(len(p.refuted))
	for c := range p.refuted {
		p.refuted[c] = d.i()
	}
	d.array(len(p.score))
	for c := range p.score {
		p.score[c] = d.f()
	}
	p.period = d.bounds()
	p.logW = d.i()
	p.jump = d.i()
	if !d.b6 {
		p.wCap = d.i()
		p.wLo = d.i()
		p.pEnd = d.bounds()
	}
	p.lastReset = d.bounds()
	p.lastE = d.i()
	if !d.b5 {
		p.labE = d.i()
		p.labN = d.i()
		d.array(len(p.adm))
		for j := range p.adm {
			p.adm[j] = d.bounds()
		}
		p.countRefused = d.i()
	}
	d.array(len(p.win))
	for j := range p.win {
		p.win[j] = d.bounds()
	}
	p.ctr = d.bounds()
	p.guess = d.i()
	if !d.b3 {
		p.anchorAt = d.i()
	}
	p.bLevel = d.f()
	p.bAt = d.i()
	p.rLo = d.f()
	p.rHi = d.f()
	p.rReset = d.f()
	p.rExact = d.f()
	p.rFloor = d.f()
	p.rUpper = d.f()
	if !d.b7 {
		p.resetsDoubted = d.i()
		p.exactDoubted = d.i()
	}
	if !d.b8 {
		p.slackDoubted = d.i()
	}
	p.probe = d.u()
	p.probeTokens = d.f()
	p.trickled = d.i()
	p.lastAdmit = d.i()
	p.regret = d.i()
	p.regretTo = d.i()
	p.rolledAt = d.i()
	p.probeFor = d.u8()
	p.probeParam = d.u8()
	p.resets = d.int()
	p.alignedUntil = d.i()
	p.ownCum = d.i()
	if n := d.count(minAnchor); n > 0 {
		p.anchors = make([]anchor, n)
		var at int64
		for j := range p.anchors {
			at += d.i()
			p.anchors[j] = anchor{at: at, level: d.i()}
		}
	}
}

func (d *decoder) ledger(l *ledger) {
	if n := d.count(minEntry); n > 0 {
		l.e = make([]entry, n)
		var at int64
		for j := range l.e {
			at += d.i()
			l.e[j] = entry{at: at, n: d.i()}
		}
		l.fix(0)
	}
}

func (d *decoder) quota(q *quotaState) {
	if n := d.count(minSend); n > 0 {
		q.sends = make([]quotaSend, n)
		var seq uint64
		var sent int64
		for j := range q.sends {
			seq += d.u()
			sent += d.i()
			q.sends[j] = quotaSend{seq: seq, sent: sent, recv: sent + d.i()}
		}
	}
	q.tokens = d.f()
	q.filled = d.i()
}

// silentB2 reads the candidates of stateFormatB2, which had no sliding
// counters: its buckets followed its fixed windows, in one word.
func (d *decoder) silentB2(a *silent, c *silentCand) {
	const before = 2 * len(silentWindows) // the old buckets' first index
	old := d.u()
	for i := range nSilent - nCounters {
		j := i
		if i >= before {
			j = i + nCounters // past the counters
		}
		if old&(1<<i) != 0 {
			a.alive[j/64] |= 1 << (j % 64)
		}
		c.lo[j], c.hi[j] = d.i(), d.i()
	}
}

func (d *decoder) silent(a *silent) {
	a.on = d.bool()
	a.onAt = d.i()
	d.ledger(&a.own)
	d.ledger(&a.ref)
	var c silentCand
	if d.b2 {
		d.silentB2(a, &c)
	} else {
		for i := range a.alive {
			a.alive[i] = d.u()
		}
		for i := range c.lo {
			c.lo[i] = d.i()
			c.hi[i] = d.i()
		}
	}
	for i := range c.tat {
		c.tat[i] = d.i()
		c.tatAll[i] = d.i()
	}
	if c != (silentCand{}) {
		a.silentCand = &c
	}
	a.probe = d.u()
	a.probeLeft = d.i()
	a.probeRefused = d.bool()
	a.tokens = d.f()
	a.earned = d.i()
	a.base = d.i()
	a.horizon = d.i()
	a.admitted = d.bool()
	a.burst = d.i() // used clamped (see hold)
	a.envelope = d.bool()
	a.restarted = d.bool()
	a.slow = d.i()
	if !d.b4 {
		a.lost = d.i() // a negative sum counts as zero (see disagree)
	}
	if n := d.count(minPending); n > 0 {
		a.pend = make([]pendingAnswer, n)
		var at int64
		for j := range a.pend {
			at += d.i()
			a.pend[j] = pendingAnswer{at: at, ra: d.i(), refused: d.bool()}
		}
	}
}

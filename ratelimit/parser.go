package ratelimit

import (
	"hash/maphash"
	"net/http"
	"sync/atomic"
	"time"
)

// Parser reads rate-limit headers exactly as ParseHeaders does, and
// remembers what responses repeat, so that reading it again costs a
// comparison: the quotas a RateLimit-Policy field announces (a server sends
// the same field on every response, while RateLimit's remaining count
// changes), and the instant a Date header names (the same for every
// response within a second). Its results never differ from ParseHeaders'.
//
// A Parser is safe for concurrent use, and its memory is bounded: it
// remembers a few policy fields and one date. A value is remembered once it
// has been seen twice, so that responses whose fields never repeat cost no
// more than ParseHeaders. The zero Parser is ready to use; it must not be
// copied after first use.
type Parser struct {
	seed   atomic.Pointer[maphash.Seed] // set on first use
	fields [memoSlots]memoSlot
	date   atomic.Pointer[dateMemo]
	dateAt atomic.Uint64 // hash of the last Date parsed and not remembered
}

// memoSlots is how many policy fields a Parser remembers.
const memoSlots = 8

// A memoSlot remembers one policy field: what it announced, and the hash of
// the last field seen here that is not remembered (yet).
type memoSlot struct {
	known atomic.Pointer[announcement]
	seen  atomic.Uint64
}

// An announcement is what one policy field announced: the policies read
// from its items, in order, before they were added to a response's.
type announcement struct {
	named Dialect
	lines []string
	ps    []Policy
}

// dateMemo is a Date field and the instant it names.
type dateMemo struct {
	v  string
	t  time.Time
	ok bool
}

// Bounds on what is remembered: fields longer, or announcing more, are read
// every time.
const (
	maxMemoLen      = 512
	maxMemoPolicies = 8
)

// ParseHeaders is ParseHeaders (the function), remembering what repeats.
func (p *Parser) ParseHeaders(h http.Header, status int, received time.Time) Observation {
	return parseHeaders(h, status, received, p)
}

// ParseDate is ParseDate (the function), remembering the last date.
func (p *Parser) ParseDate(v string) (time.Time, bool) {
	if m := p.date.Load(); m != nil && m.v == v {
		return m.t, m.ok
	}
	t, ok := parseHTTPDate(v)
	if len(v) <= maxMemoLen {
		hv := p.hash(v, 0)
		if p.dateAt.Swap(hv) == hv {
			p.date.Store(&dateMemo{v: v, t: t, ok: ok})
		}
	}
	return t, ok
}

// parseDate is ParseDate on a nil Parser too.
func (p *Parser) parseDate(v string) (time.Time, bool) {
	if p == nil {
		return parseHTTPDate(v)
	}
	return p.ParseDate(v)
}

// hash returns a hash of a field's value (and of a dialect).
func (p *Parser) hash(v string, d Dialect) uint64 {
	seed := p.seed.Load()
	if seed == nil {
		s := maphash.MakeSeed()
		p.seed.CompareAndSwap(nil, &s)
		seed = p.seed.Load()
	}
	return maphash.String(*seed, v) ^ uint64(d)<<56
}

// linesHash returns the hash of a field's lines, false when they are not
// to be remembered.
func (p *Parser) linesHash(lines []string, named Dialect) (uint64, bool) {
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	if n > maxMemoLen || len(lines) > 4 {
		return 0, false
	}
	var h uint64
	for i, l := range lines {
		h = h*31 + p.hash(l, named) + uint64(i)
	}
	return h | 1, true // never 0, the hash of nothing seen
}

// announcedBefore returns what a policy field announced when the Parser
// read it before.
func (p *Parser) announcedBefore(lines []string, named Dialect) ([]Policy, bool) {
	if p == nil {
		return nil, false
	}
	h, ok := p.linesHash(lines, named)
	if !ok {
		return nil, false
	}
	a := p.fields[h%memoSlots].known.Load()
	if a == nil || a.named != named || len(a.lines) != len(lines) {
		return nil, false
	}
	for i := range lines {
		if a.lines[i] != lines[i] {
			return nil, false
		}
	}
	return a.ps, true
}

// announcements records what a policy field announced.
type announcements struct {
	buf  [maxMemoPolicies]Policy
	n    int
	over bool // more than the buffer holds: not remembered
}

func (r *announcements) record(p Policy) {
	if r.n == len(r.buf) {
		r.over = true
		return
	}
	r.buf[r.n] = p
	r.n++
}

// remember keeps what a policy field announced, once the field has been
// seen twice in a row in its slot.
func (p *Parser) remember(lines []string, named Dialect, r *announcements) {
	if r.over {
		return
	}
	h, ok := p.linesHash(lines, named)
	if !ok {
		return
	}
	s := &p.fields[h%memoSlots]
	if s.seen.Swap(h) != h {
		return // the first time: remembered if it comes again
	}
	a := &announcement{named: named, lines: append([]string(nil), lines...)}
	if r.n > 0 {
		a.ps = append([]Policy(nil), r.buf[:r.n]...)
	}
	s.known.Store(a)
}

package pacetest

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/pace"
	"github.com/headway-go/headway/ratelimit"
)

// The suite's states are built through pace's API, as a key's requests
// leave them (pace.State is opaque), and compared by what a store must
// keep: the content, as MarshalBinary encodes it, byte for byte; the
// Version; and Expires, as an instant.

// fullConfig is the Config of FullState's requests: two declared quotas,
// one with a burst.
var fullConfig = &pace.Config{Quotas: []pace.Quota{
	{Limit: 100, Window: time.Minute, Burst: 10},
	{Limit: 5, Window: time.Second},
}}

// FullState returns a State as a busy key's requests leave it, built
// through Reserve, Complete and Cancel around base: what was learnt of a
// server that first sent no rate-limit headers and refused (the rate
// learnt from 429s), then two IETF policies ("burst", 10 a second, and
// "hourly", 5000 an hour) in the key's own bucket with answers whose Date
// teaches the clock's offset, a GitHub "search" resource refused with a
// Retry-After (a pause that ends 2s after base), the routes each was
// counted in, two declared quotas, and three requests in flight (one with
// a cost in tokens). Its Version is 99, which CompareAndSwap must ignore,
// and its Expires base+life and a fraction of a second, in a location
// other than base's. The same base and life give the same State.
func FullState(base time.Time, life time.Duration) pace.State {
	b := builder{now: base.Add(-20 * time.Second).Round(0), cfg: fullConfig}
	// A server that says nothing, then refuses: the silent model.
	for i := range 5 {
		status := http.StatusOK
		if i == 4 {
			status = http.StatusTooManyRequests
		}
		b.answer(b.reserve(pace.Request{Route: "GET /items"}), status, http.Header{}, 40*time.Millisecond)
	}
	// Cancelled: it never left.
	b.s.Cancel(b.reserve(pace.Request{Route: "GET /items", Quotas: []int{0}}), b.cfg)
	// Two policies of the key's own.
	burst, hourly := 10, 5000
	for i := range 30 {
		l := b.reserve(pace.Request{Route: "GET /items/" + strconv.Itoa(i%3), Quotas: []int{0, 1}})
		burst, hourly = burst-1, hourly-1
		if burst < 1 {
			burst = 10
		}
		b.answer(l, http.StatusOK, http.Header{
			"Ratelimit-Policy": {`"burst";q=10;w=1, "hourly";q=5000;w=3600`},
			"Ratelimit":        {fmt.Sprintf(`"burst";r=%d;t=1, "hourly";r=%d;t=%d`, burst, hourly, 1800-i)},
		}, time.Duration(35+i%7)*time.Millisecond)
	}
	// GitHub's search resource, then its 429 with a Retry-After.
	if b.now.Before(base.Add(-time.Second)) {
		b.now = base.Add(-time.Second)
	}
	search := func(remaining int, retryAfter string) http.Header {
		h := http.Header{
			"X-Ratelimit-Limit":     {"30"},
			"X-Ratelimit-Remaining": {strconv.Itoa(remaining)},
			"X-Ratelimit-Used":      {strconv.Itoa(30 - remaining)},
			"X-Ratelimit-Resource":  {"search"},
			"X-Ratelimit-Reset":     {strconv.FormatInt(base.Add(time.Minute).Unix(), 10)},
		}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		return h
	}
	b.answer(b.reserve(pace.Request{Route: "GET /search/issues"}), http.StatusOK, search(1, ""), 50*time.Millisecond)
	b.answer(b.reserve(pace.Request{Route: "GET /search/code"}), http.StatusTooManyRequests, search(0, "3"), 50*time.Millisecond)
	// In flight.
	b.reserve(pace.Request{Route: "GET /items/1", Quotas: []int{0}})
	b.reserve(pace.Request{Route: "POST /items", Quotas: []int{1},
		Cost: []pace.Amount{{Unit: ratelimit.UnitTokens, N: 700}}})
	b.reserve(pace.Request{Route: "GET /items/2"})

	s := b.s
	s.Version = 99
	s.Expires = base.Add(life + 987654321*time.Nanosecond).In(time.FixedZone("east", 5*3600+1800))
	return s
}

// builder drives a State through pace's API on a clock of its own.
type builder struct {
	s   pace.State
	now time.Time
	cfg *pace.Config
}

// reserve returns a lease for req, as soon as the state grants one.
func (b *builder) reserve(req pace.Request) pace.Lease {
	l, ok := b.try(req, 10000)
	if !ok {
		panic(fmt.Sprintf("pacetest: the state granted no lease for %q", req.Route))
	}
	return l
}

// try asks for a lease for req up to n times, each when the state said to
// ask again, and reports whether it got one.
func (b *builder) try(req pace.Request, n int) (pace.Lease, bool) {
	for range n {
		d := b.s.Reserve(b.now, req, b.cfg)
		if d.OK {
			return d.Lease, true
		}
		b.now = d.At
	}
	return pace.Lease{}, false
}

// answer completes l with status and h (and a Date), rtt after now, and
// moves the clock past the answer.
func (b *builder) answer(l pace.Lease, status int, h http.Header, rtt time.Duration) {
	recv := b.now.Add(rtt)
	date := recv.Add(-350 * time.Millisecond).Truncate(time.Second) // the server's clock is a little behind
	h.Set("Date", date.UTC().Format(http.TimeFormat))
	b.s.Complete(recv, l, pace.Answer{Obs: ratelimit.ParseHeaders(h, status, recv), Date: date}, b.cfg)
	b.now = recv.Add(time.Duration(10+len(h)) * time.Millisecond)
}

// counterAt is the instant of the reservations that count.
var counterAt = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// bump reserves a lease in s and cancels it, as a request that never left:
// s has granted one lease more. It returns the lease's number.
func bump(s *pace.State) (uint64, error) {
	d := s.Reserve(counterAt, pace.Request{}, nil)
	if !d.OK {
		return 0, fmt.Errorf("pacetest: a state of the suite's granted no lease: %s (%v)", d.Why, d.Detail)
	}
	s.Cancel(d.Lease, nil)
	return d.Lease.Seq(), nil
}

// counter returns a small state that has granted n leases (all cancelled),
// and expires at exp: the suite's states that must differ from one another
// differ in n.
func counter(n uint64, exp time.Time) pace.State {
	var s pace.State
	for range n {
		if _, err := bump(&s); err != nil {
			panic(err)
		}
	}
	s.Expires = exp
	return s
}

// granted returns how many leases s has granted: the number of the lease a
// further reservation gets, less one. s is not changed.
func granted(t *testing.T, s pace.State) uint64 {
	t.Helper()
	c := s.Clone()
	n, err := bump(&c)
	require.NoError(t, err, "a counting state of the suite must grant a lease")
	return n - 1
}

// content returns what the encoding of s holds: everything but its Version
// and Expires.
func content(t *testing.T, s pace.State) []byte {
	t.Helper()
	b, err := s.MarshalBinary()
	require.NoError(t, err, "MarshalBinary")
	return b
}

// emptyContent is the content of a State with nothing in it.
var emptyContent, _ = pace.State{}.MarshalBinary()

// sameState reports how got differs from want at version ("" if it does
// not): Expires is compared as an instant, the content byte for byte.
func sameState(want pace.State, version uint64, got pace.State) string {
	w, err := want.MarshalBinary()
	if err != nil {
		return err.Error()
	}
	g, err := got.MarshalBinary()
	if err != nil {
		return err.Error()
	}
	switch {
	case got.Version != version:
		return fmt.Sprintf("its Version is %d, want %d", got.Version, version)
	case !got.Expires.Equal(want.Expires):
		return fmt.Sprintf("its Expires is %v, want %v (the same instant, to the nanosecond)",
			got.Expires.UTC().Format(time.RFC3339Nano), want.Expires.UTC().Format(time.RFC3339Nano))
	case !bytes.Equal(w, g):
		i := 0
		for i < min(len(w), len(g)) && w[i] == g[i] {
			i++
		}
		return fmt.Sprintf("its content differs (MarshalBinary: %d bytes, want %d; first difference at byte %d)",
			len(g), len(w), i)
	}
	return ""
}

// isForgotten reports whether s holds nothing but its Version.
func isForgotten(s pace.State) bool {
	b, err := s.MarshalBinary()
	return err == nil && s.Expires.IsZero() && bytes.Equal(b, emptyContent)
}

// scrambleState changes *s through pace's API, in place: its leases
// expire (their slice cleared where it lies), its declared quotas' logs
// are trimmed, and answers change its policies (each an element of a
// slice) and pause a bucket. A store that kept any of the caller's memory
// shows it.
func scrambleState(s *pace.State) {
	// Whatever the state (a store may have returned anything), the
	// changes that it grants are made.
	b := builder{s: *s, now: s.Expires.Add(time.Hour).Round(0), cfg: fullConfig}
	if l, ok := b.try(pace.Request{Route: "GET /items/1", Quotas: []int{0, 1}}, 100); ok {
		b.answer(l, http.StatusOK, http.Header{
			"Ratelimit-Policy": {`"burst";q=10;w=1, "hourly";q=5000;w=3600`},
			"Ratelimit":        {`"burst";r=3;t=1, "hourly";r=17;t=7`},
		}, 77*time.Millisecond)
	}
	if l, ok := b.try(pace.Request{Route: "GET /search/code"}, 100); ok {
		b.answer(l, http.StatusTooManyRequests, http.Header{
			"X-Ratelimit-Limit":     {"30"},
			"X-Ratelimit-Remaining": {"0"},
			"X-Ratelimit-Resource":  {"search"},
			"X-Ratelimit-Reset":     {strconv.FormatInt(b.now.Add(time.Minute).Unix(), 10)},
			"Retry-After":           {"60"},
		}, 91*time.Millisecond)
	}
	v := s.Version
	*s = b.s
	s.Version = v
}

package pace

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/ratelimit"
)

// TestEncodingComplete guards MarshalBinary and UnmarshalBinary against a
// field added to the state and forgotten by the encoding: it fills every
// field of a keyState, and of everything below it, with a value of its own
// (walking the types with reflect, so that a new field is filled too), and
// requires the state to come back whole, naming the first field that did
// not. A second round sets every other boolean false, so that two
// booleans swapped show as well.
func TestEncodingComplete(t *testing.T) {
	for _, alternate := range []bool{false, true} {
		t.Run(fmt.Sprintf("alternate=%v", alternate), func(t *testing.T) {
			want := State{Version: 3, Expires: time.Unix(1, 2)}
			f := filler{alternate: alternate}
			f.fill(t, reflect.ValueOf(&want.k).Elem(), "keyState")
			data, err := want.MarshalBinary()
			require.NoError(t, err)
			got := State{Version: 3, Expires: time.Unix(1, 2)}
			require.NoError(t, got.UnmarshalBinary(data), "the encoding of a state with every field set must decode")
			if d := diffState(&want.k, &got.k); d != "" {
				t.Fatalf("%s: MarshalBinary and UnmarshalBinary in encoding.go must encode every field "+
					"(and a change of layout takes the next stateFormat)", d)
			}
			require.Equal(t, want, got)
		})
	}
}

// TestCloneDeep: a State's Clone shares no memory with it. Every field is
// filled as in TestEncodingComplete, then changed in place (slices'
// elements where they lie): the clone must not change, or the field named
// is shared (and a store that clones, such as MemoryStore, shares it with
// its callers).
func TestCloneDeep(t *testing.T) {
	var s, want State
	(&filler{}).fill(t, reflect.ValueOf(&s.k).Elem(), "keyState")
	(&filler{}).fill(t, reflect.ValueOf(&want.k).Elem(), "keyState")
	c := s.Clone()
	mutate(reflect.ValueOf(&s.k).Elem())
	require.NotEmpty(t, diffState(&want.k, &s.k), "mutate changed nothing")
	if d := diffState(&want.k, &c.k); d != "" {
		t.Fatalf("changing a State changed its Clone: %s: keyState.clone in state.go must copy it", d)
	}
}

// mutate changes every field under v in place, down to the elements of
// slices, through their backing arrays.
func mutate(v reflect.Value) {
	v = settable(v)
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Hour + 1)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			mutate(v.Field(i))
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			mutate(v.Index(i))
		}
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	case reflect.String:
		v.SetString(v.String() + "~")
	}
}

// filler sets every field it is given to a value of its own: numbers count
// up (signed ones alternate in sign, so that zig-zag and the differences
// between instants are exercised), strings name their number, slices have
// two elements, booleans are true (or, alternating, every other one).
type filler struct {
	n         int64
	alternate bool
}

var timeType = reflect.TypeFor[time.Time]()

// settable returns v (addressable) as a value that may be set, though it
// is an unexported field.
func settable(v reflect.Value) reflect.Value {
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

func (f *filler) fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	f.n++
	n := f.n
	sign := int64(1 - 2*(n%2))
	v = settable(v)
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Unix(0, 1_900_000_000_000_000_000+n*1_000_000_007).UTC()))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == derivedType {
			return // not encoded: rebuilt from the leases
		}
		for i := range v.NumField() {
			f.fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
		if l, ok := v.Addr().Interface().(*ledger); ok {
			l.fix(0) // the running totals are derived from the entries
		}
	case reflect.Array:
		for i := range v.Len() {
			f.fill(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range v.Len() {
			f.fill(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.String:
		v.SetString("s" + strconv.FormatInt(n, 10))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(t, v.Elem(), path)
		return
	case reflect.Bool:
		v.SetBool(!f.alternate || n%2 == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(sign * (n*1_000_003 + n) % (1 << (v.Type().Bits() - 2)))
	case reflect.Uint8:
		v.SetUint(uint64(n%255 + 1))
	case reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(uint64(n*1_000_000_000_007) % (1 << (v.Type().Bits() - 1)))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(sign) * (float64(n) + 0.25))
	default:
		t.Fatalf("%s is a %v: the encoding (encoding.go) and this test have no rule for it", path, v.Type())
	}
	if v.IsZero() && v.Kind() != reflect.Bool {
		t.Fatalf("%s: the filler left it zero", path)
	}
}

// diffState returns where two keyStates differ, or "": floats are compared
// by their bits (NaN equals NaN), instants by Equal, a nil slice equals an
// empty one.
// derivedType is keyState.derived's, which the encoding leaves out.
var derivedType = reflect.TypeOf(derived{})

func diffState(want, got *keyState) string {
	return diffValues(reflect.ValueOf(want).Elem(), reflect.ValueOf(got).Elem(), "keyState")
}

func diffValues(w, g reflect.Value, path string) string {
	if w.Type() == derivedType {
		return "" // not encoded: rebuilt from the leases
	}
	if w.Type() == timeType {
		wt, gt := settable(w).Interface().(time.Time), settable(g).Interface().(time.Time)
		if !wt.Equal(gt) {
			return fmt.Sprintf("%s is %v, want %v", path, gt, wt)
		}
		return ""
	}
	switch w.Kind() {
	case reflect.Struct:
		for i := range w.NumField() {
			if d := diffValues(w.Field(i), g.Field(i), path+"."+w.Type().Field(i).Name); d != "" {
				return d
			}
		}
	case reflect.Slice, reflect.Array:
		if w.Len() != g.Len() {
			return fmt.Sprintf("%s has %d elements, want %d", path, g.Len(), w.Len())
		}
		for i := range w.Len() {
			if d := diffValues(w.Index(i), g.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
	case reflect.Pointer:
		if w.IsNil() || g.IsNil() {
			if w.IsNil() != g.IsNil() {
				return fmt.Sprintf("%s: nil and not", path)
			}
			return ""
		}
		return diffValues(w.Elem(), g.Elem(), path)
	case reflect.String:
		if w.String() != g.String() {
			return fmt.Sprintf("%s is %q, want %q", path, g.String(), w.String())
		}
	case reflect.Bool:
		if w.Bool() != g.Bool() {
			return fmt.Sprintf("%s is %v, want %v", path, g.Bool(), w.Bool())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if w.Int() != g.Int() {
			return fmt.Sprintf("%s is %d, want %d", path, g.Int(), w.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if w.Uint() != g.Uint() {
			return fmt.Sprintf("%s is %d, want %d", path, g.Uint(), w.Uint())
		}
	case reflect.Float32, reflect.Float64:
		if math.Float64bits(w.Float()) != math.Float64bits(g.Float()) {
			return fmt.Sprintf("%s is %v, want %v", path, g.Float(), w.Float())
		}
	default:
		return fmt.Sprintf("%s is a %v, which diffValues cannot compare", path, w.Type())
	}
	return ""
}

// encodingSample returns a state as a key's requests leave it, built
// through Reserve and Complete: a server that said nothing at first, then
// refused without headers (the silent model); then n requests answered
// under an IETF policy of 1000 a minute (each leaves an entry in the
// policy's ledger); a GitHub search resource, refused with a Retry-After
// (a pause); a declared quota; and a lease or two in flight.
func encodingSample(tb testing.TB, n int) State {
	tb.Helper()
	cfg := &Config{Quotas: []Quota{{Limit: 500, Window: time.Minute, Burst: 20}}}
	now := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	var s State
	reserve := func(req Request) Lease {
		for range 1000 {
			d := s.Reserve(now, req, cfg)
			if d.OK {
				return d.Lease
			}
			now = d.At
		}
		tb.Fatalf("no lease for %q", req.Route)
		return Lease{}
	}
	answer := func(l Lease, status int, h http.Header) {
		recv := now.Add(30 * time.Millisecond)
		date := recv.Truncate(time.Second)
		h.Set("Date", date.Format(http.TimeFormat))
		s.Complete(recv, l, Answer{Obs: ratelimit.ParseHeaders(h, status, recv), Date: date}, cfg)
		now = recv.Add(70 * time.Millisecond)
	}
	for i := range 4 {
		status := http.StatusOK
		if i == 3 {
			status = http.StatusTooManyRequests
		}
		answer(reserve(Request{Route: "GET /items"}), status, http.Header{})
	}
	windowStart, count := now.Truncate(time.Minute), 0
	for range n {
		l := reserve(Request{Route: "GET /items", Quotas: []int{0}})
		if now.Sub(windowStart) >= time.Minute {
			windowStart, count = now.Truncate(time.Minute), 0
		}
		count++
		left := windowStart.Add(time.Minute).Sub(now)
		answer(l, http.StatusOK, http.Header{
			"Ratelimit-Policy": {`"default";q=1000;w=60`},
			"Ratelimit":        {fmt.Sprintf(`"default";r=%d;t=%d`, 1000-count, int(math.Ceil(left.Seconds())))},
		})
	}
	search := func(status int, remaining int) http.Header {
		h := http.Header{
			"X-Ratelimit-Limit":     {"30"},
			"X-Ratelimit-Remaining": {strconv.Itoa(remaining)},
			"X-Ratelimit-Used":      {strconv.Itoa(30 - remaining)},
			"X-Ratelimit-Resource":  {"search"},
			"X-Ratelimit-Reset":     {strconv.FormatInt(now.Add(time.Minute).Unix(), 10)},
		}
		if status != http.StatusOK {
			h.Set("Retry-After", "3")
		}
		return h
	}
	answer(reserve(Request{Route: "GET /search?q=a"}), http.StatusOK, search(http.StatusOK, 1))
	answer(reserve(Request{Route: "GET /search?q=b"}), http.StatusTooManyRequests, search(http.StatusTooManyRequests, 0))
	reserve(Request{Route: "GET /items", Quotas: []int{0}, Cost: []Amount{{Unit: ratelimit.UnitTokens, N: 700}}})
	s.Reserve(now, Request{Route: "POST /items", Quotas: []int{0}}, cfg) // granted, or not
	return s
}

// TestEncodingRoundTrip: a state as requests leave it comes back equal,
// and decides as the original does.
func TestEncodingRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 120} {
		want := encodingSample(t, n)
		want.Version = 12
		want.Expires = time.Date(2030, 1, 1, 0, 0, 0, 1, time.FixedZone("x", 3600))
		data, err := want.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, byte(stateFormat), data[0])
		got := State{Version: 12, Expires: want.Expires}
		require.NoError(t, got.UnmarshalBinary(data))
		require.Empty(t, diffState(&want.k, &got.k), "n=%d", n)
		again, err := got.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, data, again, "n=%d: encoding is deterministic", n)
		appended, err := want.AppendBinary([]byte("prefix"))
		require.NoError(t, err)
		require.Equal(t, append([]byte("prefix"), data...), appended)

		at := time.Date(2030, 1, 2, 3, 10, 0, 0, time.UTC)
		req := Request{Route: "GET /items", Quotas: []int{0}}
		cfg := &Config{Quotas: []Quota{{Limit: 500, Window: time.Minute, Burst: 20}}}
		w, g := want.Clone(), got.Clone()
		require.Equal(t, w.Reserve(at, req, cfg), g.Reserve(at, req, cfg),
			"n=%d: the decoded state decides as the original", n)
	}
	var zero State
	data, err := zero.MarshalBinary()
	require.NoError(t, err)
	var got State
	require.NoError(t, got.UnmarshalBinary(data))
	require.Equal(t, zero, got)
}

// TestEncodingNoRoutes: routes travel as hashes only, never as text.
func TestEncodingNoRoutes(t *testing.T) {
	s := encodingSample(t, 3)
	s.Reserve(time.Date(2030, 1, 2, 3, 10, 0, 0, time.UTC), Request{Route: "GET /v1/users/secret-token-123"}, nil)
	data, err := s.MarshalBinary()
	require.NoError(t, err)
	for _, route := range []string{"/items", "/search", "secret-token-123", "GET", "POST"} {
		require.NotContains(t, string(data), route)
	}
}

// TestEncodingStrings: a string is written once and referred back to; past
// maxStrings distinct strings, each is written in full.
func TestEncodingStrings(t *testing.T) {
	var s State
	for i := range maxStrings + 8 {
		s.k.buckets = append(s.k.buckets, bucket{name: fmt.Sprintf("bucket-%d", i), why: "Retry-After"})
	}
	data, err := s.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(data), "Retry-After"))
	var got State
	require.NoError(t, got.UnmarshalBinary(data))
	require.Equal(t, s.k.buckets, got.k.buckets)
}

// TestUnmarshalBinaryErrors: bytes that are not a state give an error
// wrapping ErrBadState and a fresh state that keeps its Version and
// Expires.
func TestUnmarshalBinaryErrors(t *testing.T) {
	good, err := encodingSample(t, 5).MarshalBinary()
	require.NoError(t, err)
	huge := func(prefix ...byte) []byte { // a length of 2^60
		return append(append([]byte{stateFormat}, prefix...), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10)
	}
	for name, data := range map[string][]byte{
		"empty":              nil,
		"garbage":            []byte("garbage"),
		"json":               []byte(`{"Seq":3}`),
		"unknown format":     append([]byte{stateFormat + 1}, good[1:]...),
		"format only":        {stateFormat},
		"truncated":          good[:len(good)/2],
		"one byte short":     good[:len(good)-1],
		"trailing bytes":     append(append([]byte{}, good...), 0),
		"leases of 2^60":     huge(0, 0),
		"seq overflows":      {stateFormat, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"boolean 2":          {stateFormat, 0, 2},
		"string of 2^60":     {stateFormat, 0, 0, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10},
		"string reference":   {stateFormat, 0, 0, 0, 1, 5, 0, 0, 0},
		"lease count > left": {stateFormat, 0, 0, 100, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			s := encodingSample(t, 2)
			s.Version, s.Expires = 9, exp
			err := s.UnmarshalBinary(data)
			require.ErrorIs(t, err, ErrBadState)
			require.Equal(t, State{Version: 9, Expires: exp}, s, "a failed decode leaves a fresh state")
		})
	}
}

// FuzzUnmarshalBinary: no bytes make UnmarshalBinary panic, and whatever
// it decodes encodes to bytes that decode to an equal state (and encode to
// the same bytes again).
func FuzzUnmarshalBinary(f *testing.F) {
	real, err := encodingSample(f, 20).MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	zero, _ := State{}.MarshalBinary()
	f.Add(real)
	f.Add(real[:len(real)*2/3])
	f.Add(zero)
	f.Add([]byte{})
	f.Add([]byte("garbage"))
	f.Add([]byte(`{"Seq":1,"Leases":[]}`))
	f.Add([]byte{stateFormat, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10})
	for _, old := range []string{"testdata/silent-b2.state", "testdata/policy-b3.state"} {
		if b, err := os.ReadFile(old); err == nil {
			f.Add(b) // the previous formats, still read
		}
	}
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		s := State{Version: 5, Expires: exp}
		if err := s.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrBadState) {
				t.Fatalf("error %v does not wrap ErrBadState", err)
			}
			if !reflect.DeepEqual(s, State{Version: 5, Expires: exp}) {
				t.Fatalf("a failed decode left %+v", s)
			}
			return
		}
		if s.Version != 5 || !s.Expires.Equal(exp) {
			t.Fatalf("decoding changed Version or Expires: %d %v", s.Version, s.Expires)
		}
		again, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var s2 State
		if err := s2.UnmarshalBinary(again); err != nil {
			t.Fatalf("what decoded does not decode once encoded: %v", err)
		}
		if d := diffState(&s.k, &s2.k); d != "" {
			t.Fatal(d)
		}
		third, _ := s2.MarshalBinary()
		if string(third) != string(again) {
			t.Fatalf("encoding is not stable:\n%x\n%x", again, third)
		}
	})
}

// BenchmarkEncoding: a state with a policy whose ledger holds about a
// hundred entries, encoded and decoded.
func BenchmarkEncoding(b *testing.B) {
	s := encodingSample(b, 120)
	entries := 0
	for i := range s.k.policies {
		entries = max(entries, len(s.k.policies[i].own.e))
	}
	data, err := s.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("MarshalBinary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			data, _ = s.MarshalBinary()
		}
		b.ReportMetric(float64(len(data)), "bytes/state")
		b.ReportMetric(float64(entries), "ledger-entries")
	})
	b.Run("AppendBinary", func(b *testing.B) {
		buf := make([]byte, 0, 2*len(data))
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = s.AppendBinary(buf[:0])
		}
	})
	b.Run("UnmarshalBinary", func(b *testing.B) {
		var got State
		b.ReportAllocs()
		for b.Loop() {
			if err := got.UnmarshalBinary(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestDecodeFormatB2: a state of the format before the silent model had
// sliding counters (testdata/silent-b2.state, written by the pace of 0f450e5
// after 10 s against a silent token bucket, and the candidates it had
// left, in silent-b2.alive) decodes with the same candidates, at the
// same bounds, and no counter among them; encoded again, it is of the
// current format.
func TestDecodeFormatB2(t *testing.T) {
	b, err := os.ReadFile("testdata/silent-b2.state")
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/silent-b2.alive")
	require.NoError(t, err)
	require.Equal(t, byte(stateFormatB2), b[0])
	var st State
	require.NoError(t, st.UnmarshalBinary(b))
	a := &st.k.silent
	require.True(t, a.on)
	left := survivors(a)
	require.Equal(t, strings.Split(strings.TrimSpace(string(want)), "\n"), left)
	again, err := st.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, byte(stateFormat), again[0])
	var st2 State
	require.NoError(t, st2.UnmarshalBinary(again))
	require.Equal(t, a.alive, st2.k.silent.alive)
}

// TestDecodeFormatB4: a state of the format before the silent model kept
// how long its cautious candidate held requests back
// (testdata/silent-b4.state, written by the pace of e59039c after 3 s of
// 4 workers against a silent token bucket of 200/s and a burst of 100, on
// a round trip of 0.2 ms) decodes, with nothing lost; encoded again, it
// is of the current format, one field longer, and decodes to the same
// state.
func TestDecodeFormatB4(t *testing.T) {
	decodeOlder(t, "testdata/silent-b4.state", stateFormatB4, 1, func(st *State) {
		a := &st.k.silent
		require.True(t, a.on)
		require.Contains(t, fmt.Sprint(survivors(a)), "bucket of 200/s")
		require.Zero(t, a.lost)
	})
}

// TestDecodeFormatB5: a state of the format before a policy counted its
// admissions by reset instant and kept its newest ones
// (testdata/policy-b5.state, written by the pace of 21fbab8 after 3 s of
// 16 workers against a GCRA of 50/s without burst, X-RateLimit headers
// with resets as Unix times, on 20 ms round trips: 3 requests, the bucket
// taken for a window of one a second) decodes, with those counts empty;
// encoded again, it is of the current format, longer, and decodes to the
// same state.
func TestDecodeFormatB5(t *testing.T) {
	// Fourteen bytes more, four of format 0xB7's (policy.wCap, wLo, pEnd),
	// two of 0xB8's (policy.resetsDoubted, exactDoubted) and one of 0xB9's
	// (policy.slackDoubted).
	decodeOlder(t, "testdata/policy-b5.state", stateFormatB5, 21, func(st *State) {
		require.Len(t, st.k.policies, 1)
		p := &st.k.policies[0]
		require.EqualValues(t, 1, p.limit)
		require.NotZero(t, p.alive&(1<<cWindow), "a window still explains it")
		require.Zero(t, p.labE)
		require.Zero(t, p.labN)
		require.Zero(t, p.countRefused)
		require.Equal(t, [admKeep]bounds{}, p.adm)
	})
}

// TestDecodeFormatB6: a state of the format before a policy searched for a
// window shorter than a second (testdata/policy-b6.state, written by the
// pace of 6cfece5 after 3 s of 16 workers against a fixed window of 5 per
// 100 ms, X-RateLimit headers with resets as Unix times rounded down, on
// 20 ms round trips: 31 requests, the window taken for one of a second)
// decodes, with no search begun; encoded again, it is of the current
// format, seven bytes longer (policy.wCap, wLo, pEnd, resetsDoubted,
// exactDoubted, slackDoubted), and decodes to the same state.
func TestDecodeFormatB6(t *testing.T) {
	decodeOlder(t, "testdata/policy-b6.state", stateFormatB6, 7, func(st *State) {
		require.Len(t, st.k.policies, 1)
		p := &st.k.policies[0]
		require.EqualValues(t, 5, p.limit)
		require.EqualValues(t, 1e9, p.period.hi, "a window of a second")
		require.Zero(t, p.wCap)
		require.Zero(t, p.wLo)
		require.False(t, p.pEnd.known())
	})
}

// TestDecodeFormatB7: a state of the format before a policy kept which of
// its bucket's rates refusals refuted (testdata/policy-b7.state, written
// by the pace of 1308fbd after 8 s of 16 workers against a fixed window of
// 1 per 100 ms on the clock, X-RateLimit headers with resets rounded down,
// on 20 ms round trips: 53 requests, 14 refused, the bucket alone alive,
// its rate measured exactly at 16-23 a second) decodes, none refuted; encoded
// again, it is of the current format, three bytes longer
// (policy.resetsDoubted, exactDoubted, slackDoubted), and decodes to the
// same state.
func TestDecodeFormatB7(t *testing.T) {
	decodeOlder(t, "testdata/policy-b7.state", stateFormatB7, 3, func(st *State) {
		require.Len(t, st.k.policies, 1)
		p := &st.k.policies[0]
		require.EqualValues(t, 1, p.limit)
		require.Equal(t, uint8(1<<cBucket), p.alive)
		require.Greater(t, p.rLo, 15.0, "measured exactly, too fast")
		require.Zero(t, p.resetsDoubted)
		require.Zero(t, p.exactDoubted)
	})
}

// TestDecodeFormatB8: a state of the format before a policy kept when a
// refusal last doubted its sliding counter's slack (testdata/policy-b8.state,
// written by the pace of 3b8e14f after 8 s of 16 workers against a sliding
// counter of 5 a second, X-RateLimit headers, on 20 ms round trips: 36
// requests, 2 refused, the counter alone alive) decodes, none doubted;
// encoded again, it is of the current format, a byte longer
// (policy.slackDoubted), and decodes to the same state.
func TestDecodeFormatB8(t *testing.T) {
	decodeOlder(t, "testdata/policy-b8.state", stateFormatB8, 1, func(st *State) {
		require.Len(t, st.k.policies, 1)
		p := &st.k.policies[0]
		require.EqualValues(t, 5, p.limit)
		require.Equal(t, uint8(1<<cCounter), p.alive)
		require.Zero(t, p.slackDoubted)
	})
}

// decodeOlder decodes the state of an older format in file, checks it, and
// encodes it again: of the current format, with more fields (each zero, a
// byte), it decodes to the same state.
func decodeOlder(t *testing.T, file string, format byte, more int, check func(*State)) {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, format, b[0])
	var st State
	require.NoError(t, st.UnmarshalBinary(b))
	check(&st)
	again, err := st.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, byte(stateFormat), again[0])
	require.Len(t, again, len(b)+more, "the fields added since, zero")
	var st2 State
	require.NoError(t, st2.UnmarshalBinary(again))
	require.Equal(t, st.k, st2.k)
}

// TestDecodeFormatB3: a state of the format before a policy kept when its
// newest window opened (testdata/policy-b3.state, written by the pace of
// 25961a8 after 3 s against a window from the first request, 50 a second,
// X-RateLimit headers) decodes, with that instant unknown; encoded again,
// it is of the current format and decodes to the same state.
func TestDecodeFormatB3(t *testing.T) {
	// Twenty-three bytes more: policy.anchorAt, labE, labN, adm (its
	// length and five pairs), countRefused, wCap, wLo, pEnd, resetsDoubted,
	// exactDoubted and slackDoubted, and silent.lost.
	decodeOlder(t, "testdata/policy-b3.state", stateFormatB3, 23, func(st *State) {
		require.Len(t, st.k.policies, 1)
		p := &st.k.policies[0]
		require.EqualValues(t, 50, p.limit)
		require.True(t, p.win[cAnchored].known())
		require.Zero(t, p.anchorAt)
	})
}

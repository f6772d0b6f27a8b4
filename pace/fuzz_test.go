package pace

import (
	"fmt"
	"math"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/ratelimit"
)

// fuzzBytes reads a fuzzer's input as a sequence of choices.
type fuzzBytes struct{ b []byte }

func (f *fuzzBytes) more() bool { return len(f.b) > 0 }

func (f *fuzzBytes) byte() byte {
	if len(f.b) == 0 {
		return 0
	}
	c := f.b[0]
	f.b = f.b[1:]
	return c
}

func (f *fuzzBytes) pick(n int) int { return int(f.byte()) % n }

// number returns a header value: small, boundary, huge, negative, or garbage.
func (f *fuzzBytes) number() string {
	switch c := f.byte(); c % 16 {
	case 0:
		return "0"
	case 1:
		return "1"
	case 2:
		return "-1"
	case 3:
		return "99999999999"
	case 4:
		return "99999999999999999999999"
	case 5:
		return "2147483648"
	case 6:
		return "1.5"
	case 7:
		return "x"
	case 8:
		return fmt.Sprint(t0.Unix() + int64(f.byte()))
	case 9:
		return fmt.Sprint(int(f.byte()) * 1000)
	case 10:
		return "-1000000000"
	case 11:
		return "1000000000000000000"
	case 12:
		return "3153600000" // a century, in seconds
	default:
		return fmt.Sprint(int(c))
	}
}

// header returns a header set in one of the dialects, with fuzzed numbers.
func (f *fuzzBytes) header() http.Header {
	switch f.pick(10) {
	case 0:
		return nil
	case 1:
		return hdr("RateLimit-Policy", fmt.Sprintf(`"default";q=%s;w=%s`, f.number(), f.number()),
			"RateLimit", fmt.Sprintf(`"default";r=%s;t=%s`, f.number(), f.number()))
	case 2:
		return hdr("X-RateLimit-Limit", f.number(), "X-RateLimit-Remaining", f.number(), "X-RateLimit-Reset", f.number())
	case 3:
		return hdr("X-RateLimit-Limit", f.number(), "X-RateLimit-Remaining", f.number(), "X-RateLimit-Used", f.number(),
			"X-RateLimit-Reset", f.number(), "X-RateLimit-Resource", []string{"core", "search", "graphql"}[f.pick(3)])
	case 4:
		return hdr("X-RateLimit-Limit", f.number(), "X-RateLimit-Remaining", f.number(),
			"X-RateLimit-Reset-After", f.number(), "X-RateLimit-Bucket", []string{"b1", "b2"}[f.pick(2)])
	case 5:
		return hdr("x-ratelimit-limit-requests", f.number(), "x-ratelimit-remaining-requests", f.number(),
			"x-ratelimit-reset-requests", f.number()+"s", "x-ratelimit-limit-tokens", f.number(),
			"x-ratelimit-remaining-tokens", f.number(), "x-ratelimit-reset-tokens", f.number()+"ms")
	case 6:
		return hdr("Retry-After", f.number())
	case 7:
		return hdr("Retry-After", t0.Add(time.Duration(f.byte())*time.Second).Format(http.TimeFormat),
			"RateLimit-Policy", fmt.Sprintf(`"default";q=%s;w=%s`, f.number(), f.number()),
			"RateLimit", fmt.Sprintf(`"default";r=%s;t=%s`, f.number(), f.number()))
	case 8:
		// Two policies, as stacked limiters write them.
		return hdr("RateLimit-Policy", fmt.Sprintf(`"a";q=%s;w=%s, "b";q=%s;w=%s`, f.number(), f.number(), f.number(), f.number()),
			"RateLimit", fmt.Sprintf(`"a";r=%s;t=%s, "b";r=%s;t=%s`, f.number(), f.number(), f.number(), f.number()))
	default:
		return hdr("Retry-After-Ms", f.number())
	}
}

// step returns how far time moves.
func (f *fuzzBytes) step() time.Duration {
	switch c := f.byte(); c % 8 {
	case 0:
		return 0
	case 1:
		return time.Duration(c) * time.Millisecond
	case 2:
		return time.Duration(c) * 10 * time.Millisecond
	case 3:
		return time.Duration(c) * time.Second
	case 4:
		return time.Minute
	case 5:
		return time.Hour
	case 6:
		return 25 * time.Hour
	default:
		return time.Nanosecond
	}
}

// FuzzReserveComplete drives one key through random sequences of Reserve,
// Complete (with random headers in every dialect, random statuses, with or
// without a Date), Cancel, and the credit's Credit, Spent and Lend, and guards what must always hold: no panic; a
// grant numbered one more than the last and dated now; a wait asking again
// after now and no later than Config.MaxPause after it; no lease in flight
// that was answered or cancelled, none more than granted; and a Clone equal
// to the state that shares nothing with it.
func FuzzReserveComplete(f *testing.F) {
	f.Add([]byte{0, 0, 2, 0, 1, 10, 20, 30, 40, 0, 0, 0, 5, 3, 0, 0})
	f.Add([]byte{0, 0, 2, 0, 0, 6, 3, 200, 5, 3, 0, 0, 0, 0, 4, 0})
	f.Add([]byte{1, 0, 0, 2, 0, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 7, 1, 9, 3, 4, 5, 5, 0})
	f.Add([]byte{2, 0, 1, 0, 2, 0, 5, 9, 9, 9, 9, 9, 9, 0, 1, 0, 3, 1, 2, 0, 0, 1, 6, 5, 4})
	f.Add([]byte{0, 0, 0, 0, 2, 0, 1, 10, 12, 12, 12, 12, 0, 0, 0, 0, 0, 0, 5, 4, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 2, 0, 1, 8, 11, 11, 10, 3, 0, 0, 0, 0, 0, 0, 5, 3, 0, 0, 0, 0})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, 0123456789 times"))
	f.Fuzz(reserveComplete)
}

// reserveComplete is FuzzReserveComplete's body.
func reserveComplete(t *testing.T, data []byte) {
	configs := []*Config{
		nil,
		{LeaseTTL: 5 * time.Second, MaxPause: time.Hour},
		{Quotas: []Quota{{Limit: 3, Window: time.Second}, {Limit: 10, Window: time.Minute, Burst: 2}, {}}},
	}
	routes := []string{"", "GET /a", "GET /search", "POST /b"}
	statuses := []int{200, 200, 429, 503, 0, 403, 500}
	{
		in := &fuzzBytes{data}
		cfg := configs[in.pick(len(configs))]
		maxPause := DefaultMaxPause
		if cfg != nil && cfg.MaxPause > 0 {
			maxPause = cfg.MaxPause
		}
		var st State
		var seq uint64
		now := t0
		var open []Lease // granted, neither answered nor cancelled
		for ops := 0; ops < 300 && in.more(); ops++ {
			switch in.pick(9) {
			case 0, 1:
				req := Request{Route: routes[in.pick(len(routes))]}
				if c := in.byte(); c%3 == 0 {
					req.Quotas = []int{int(c % 4)}
				}
				if c := in.byte(); c%4 == 0 {
					req.Cost = []Amount{{Unit: ratelimit.UnitTokens, N: int64(c) * int64(c) * 100}}
				}
				d := st.Reserve(now, req, cfg)
				checkDecision(t, now, seq, d, maxPause)
				if d.OK {
					seq = d.Lease.Seq()
					open = append(open, d.Lease)
				}
			case 2, 3:
				if len(open) == 0 {
					continue
				}
				i := in.pick(len(open))
				l := open[i]
				open = slices.Delete(open, i, i+1)
				status := statuses[in.pick(len(statuses))]
				var a Answer
				if status != 0 {
					h := in.header()
					if in.byte()%2 == 0 {
						a.Date = now.Add(-time.Duration(in.byte()) * 10 * time.Millisecond).Truncate(time.Second)
						h = withHdr(h, "Date", a.Date.Format(http.TimeFormat))
					}
					a.Obs = ratelimit.ParseHeaders(h, status, now)
				}
				st.Complete(now, l, a, cfg)
			case 4:
				if len(open) == 0 {
					continue
				}
				i := in.pick(len(open))
				st.Cancel(open[i], cfg)
				open = slices.Delete(open, i, i+1)
			case 5:
				now = now.Add(in.step())
			case 7:
				// Requests sent on credit, answered, booked in a batch
				// (their instants as a caller might get them wrong).
				route := routes[in.pick(len(routes))]
				n := st.Credit(now, route)
				require.GreaterOrEqual(t, n, int64(0))
				require.LessOrEqual(t, n, int64(maxCredit))
				spans := make([]Span, in.pick(8))
				for i := range spans {
					spans[i] = Span{Sent: -in.step(), Recv: -in.step()}
				}
				st.Spent(route, now, spans, cfg)
			case 8:
				// One sent on credit, still in flight.
				l := st.Lend(now.Add(-in.step()), routes[in.pick(len(routes))], cfg)
				require.Greater(t, l.Seq(), seq)
				seq = l.Seq()
				open = append(open, l)
			case 6:
				// A clone is equal, and independent: what changes it
				// leaves the state as it was.
				before := st.Clone()
				require.Empty(t, valueDiff(reflect.ValueOf(st), reflect.ValueOf(before), "State"), "a clone differs")
				// The sums kept as leases come and go are theirs.
				if st.k.derived.ok {
					fresh := st.k.clone()
					fresh.derived = derived{}
					fresh.sums()
					for _, f := range fresh.derived.flight {
						got := st.k.flightOf(f.bucket)
						if f.n == 0 {
							require.Nil(t, got, "bucket %q", f.bucket)
							continue
						}
						require.NotNil(t, got, "bucket %q", f.bucket)
						require.Equal(t, f.n, got.n, "bucket %q", f.bucket)
						for _, c := range f.cost {
							require.Equal(t, c.N, costIn(got.cost, c.Unit), "bucket %q unit %s", f.bucket, c.Unit)
						}
					}
					require.LessOrEqual(t, fresh.derived.skew, st.k.derived.skew, "skew is an upper bound")
					if len(st.k.leases) > 0 {
						require.LessOrEqual(t, st.k.derived.minExp, fresh.derived.minExp, "minExp is a lower bound")
					}
				}
				c := st.Clone()
				if d := c.Reserve(now, Request{}, cfg); d.OK {
					c.Complete(now.Add(time.Millisecond), d.Lease, Answer{Obs: ratelimit.ParseHeaders(ietf(5, 1, 0, 1), 429, now)}, cfg)
				}
				require.Empty(t, valueDiff(reflect.ValueOf(before), reflect.ValueOf(st), "State"), "changing a clone changed the state")
			}
			require.LessOrEqual(t, len(st.k.leases), len(open), "leases in flight")
			for _, l := range st.k.leases {
				require.Truef(t, slices.ContainsFunc(open, func(o Lease) bool { return o.Seq() == l.seq }), "lease %d was answered or cancelled", l.seq)
			}
		}
	}
}

// valueDiff returns where a and b differ, "" when they do not: a deep
// comparison that reads unexported fields and takes a nil slice and an
// empty one, or two NaNs, as equal.
func valueDiff(a, b reflect.Value, path string) string {
	if a.Kind() != b.Kind() {
		return path + ": kinds differ"
	}
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if d := valueDiff(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); d != "" {
				return d
			}
		}
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: length %d, %d", path, a.Len(), b.Len())
		}
		for i := range a.Len() {
			if d := valueDiff(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
	case reflect.Bool:
		if a.Bool() != b.Bool() {
			return fmt.Sprintf("%s: %v, %v", path, a.Bool(), b.Bool())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if a.Int() != b.Int() {
			return fmt.Sprintf("%s: %v, %v", path, a.Int(), b.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if a.Uint() != b.Uint() {
			return fmt.Sprintf("%s: %v, %v", path, a.Uint(), b.Uint())
		}
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		if x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
			return fmt.Sprintf("%s: %v, %v", path, x, y)
		}
	case reflect.String:
		if a.String() != b.String() {
			return fmt.Sprintf("%s: %q, %q", path, a.String(), b.String())
		}
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return path + ": nil and not"
			}
			return ""
		}
		return valueDiff(a.Elem(), b.Elem(), path)
	default:
		return path + ": cannot compare " + a.Kind().String()
	}
	return ""
}

package headway

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/internal/testkit/fakeclock"
	"github.com/headway-go/headway/pace"
	"github.com/headway-go/headway/ratelimit"
)

// sharedMem is a MemoryStore that headway takes for a shared store (it
// reserves ahead for it).
type sharedMem struct{ m *pace.MemoryStore }

func (s sharedMem) Load(ctx context.Context, key string) (pace.State, error) {
	return s.m.Load(ctx, key)
}
func (s sharedMem) CompareAndSwap(ctx context.Context, key string, v uint64, next pace.State) (bool, error) {
	return s.m.CompareAndSwap(ctx, key, v, next)
}

// TestLeftWaiterGivesItsLeaseBack: a lease reserved ahead for a request
// that then leaves before its turn goes back to the store as it leaves,
// though the line stays busy. It stayed in the pool before, its declared
// quota's slot taken and never answered: WithQuota(2 per minute) let one
// request a minute through with nothing in flight, until a request of the
// orphan's route came and took the stale lease, minutes later. Each step is
// what hold does, in an order its goroutines can take.
func TestLeftWaiterGivesItsLeaseBack(t *testing.T) {
	clk := fakeclock.New(start, false)
	st := sharedMem{pace.NewMemoryStore(clk.Now)}
	p := newPacer(nil, newConfig([]Option{WithStore(st), WithQuota("/", 2, time.Minute)}))
	ctx := context.Background()
	kw := p.keyWaiters("api")
	aging := time.Minute
	enter := func(path string) (ticket, pace.Request) {
		r, _ := http.NewRequest("GET", "http://api"+path, nil)
		pr := p.describe(r)
		tk, _ := kw.enter("GET", path, &pr, nil, ticket{since: clk.Now(), deadline: clk.Now().Add(time.Hour)})
		return tk, pr
	}
	var sent []time.Time
	answer := func(l pace.Lease) {
		sent = append(sent, clk.Now())
		pace.Apply(ctx, st, "api", func(s *pace.State) error {
			s.Complete(clk.Now(), l, pace.Answer{Obs: ratelimit.Observation{Status: 200}}, &p.cfg)
			return nil
		})
	}
	// reserve is hold's loop for the request whose turn it is.
	reserve := func(r pace.Request) {
		for {
			d, _ := p.reserve(ctx, p.keyWaiters("api"), "api", clk.Now(), r)
			if d.OK {
				answer(d.Lease)
				return
			}
			t.Logf("%v wait %v: %v %s (in flight %d)", clk.Now().Format("15:04:05.000"), d.At.Sub(clk.Now()), d.Why, d.Detail, func() int { s, _ := st.Load(ctx, "api"); return s.InFlight() }())
			clk.Advance(max(d.At.Sub(clk.Now()), time.Millisecond))
		}
	}
	w, rw := enter("/w") // the key's first answer
	reserve(rw)
	kw.leave(w, clk, aging)
	clk.Advance(time.Minute)

	x1, rx1 := enter("/x")
	x2, _ := enter("/x")
	y1, ry1 := enter("/y")
	// x1's turn: it reserves for x2 too, in the same update.
	n := kw.ahead(x1, &rx1, nil, false)
	d, extra, err := p.reserveAhead(ctx, "api", clk.Now(), rx1, n)
	if err != nil || !d.OK || len(extra) != 1 {
		t.Fatalf("reserveAhead: %v %+v %d", err, d, len(extra))
	}
	kw.pool(x1, rx1.Route, extra, clk.Now())
	answer(d.Lease)
	p.cancelLeases("api", kw.leave(x2, clk, aging)) // x2's context ends before its turn
	s, err := st.Load(ctx, "api")
	require.NoError(t, err)
	require.Zero(t, s.InFlight(), "x2's lease was given back as it left")
	y2, ry2 := enter("/y")   // the line stays busy
	kw.leave(x1, clk, aging) // y1's turn
	_, ok, _ := kw.takePooled(y1, &ry1, clk.Now(), time.Second)
	require.False(t, ok, "y took x's lease")
	reserve(ry1)             // x1 and y1 went in this minute: 2 of 2
	kw.leave(y1, clk, aging) // y2's turn
	reserve(ry2)
	kw.leave(y2, clk, aging)
	require.Equal(t, []time.Duration{0, time.Minute, time.Minute, 2 * time.Minute}, func() (ds []time.Duration) {
		for _, at := range sent {
			ds = append(ds, at.Sub(sent[0]))
		}
		return ds
	}(), "2 per minute, the quota's slots spent only by requests sent")
}

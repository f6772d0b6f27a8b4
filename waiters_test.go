package headway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/internal/testkit/fakeclock"
	"github.com/headway-go/headway/pace"
)

// TestLineOrder: a key's line serves the highest priority first, each
// priority in the order it came; a request that left before its turn is
// skipped; one that has waited the aging bound goes before any that waited
// less, whatever their priorities.
func TestLineOrder(t *testing.T) {
	clk := fakeclock.New(start, false)
	const aging = 10 * time.Second
	kw := &keyWaiters{}
	enter := func(prio int) ticket {
		r := pace.Request{}
		tk, ok := kw.enter("GET", "/", &r, nil, ticket{prio: prio, since: clk.Now()})
		require.True(t, ok)
		return tk
	}
	turn := func(tk ticket) bool {
		select {
		case <-tk.wait():
			return true
		default:
			return false
		}
	}
	holder := enter(0)
	require.Nil(t, holder.w, "an empty line's turn is had at once")
	a, b, c, d := enter(-10), enter(10), enter(0), enter(10)
	gone := enter(10)
	kw.leave(gone, clk, aging) // left before its turn
	order := []ticket{b, d, c, a}
	prev := holder
	for i, tk := range order {
		require.False(t, turn(tk), "%d: not yet", i)
		kw.leave(prev, clk, aging)
		require.True(t, turn(tk), "%d: its turn", i)
		for _, rest := range order[i+1:] {
			require.False(t, turn(rest))
		}
		prev = tk
	}
	kw.leave(prev, clk, aging)
	require.False(t, kw.main.busy)
	require.Zero(t, kw.waiting)

	// Aging: a batch request that has waited 10 s goes before interactive
	// requests that came later.
	holder = enter(0)
	batch := enter(-10)
	clk.Advance(aging)
	hi := enter(10)
	kw.leave(holder, clk, aging)
	require.True(t, turn(batch), "aged: its turn before the higher priority")
	require.False(t, turn(hi))
	kw.leave(batch, clk, aging)
	require.True(t, turn(hi))
	kw.leave(hi, clk, aging)
	require.Zero(t, kw.waiting)
}

// TestLineYield: the request whose turn it is gives it up to a higher
// priority that comes while it waits, and gets it back next; it keeps it
// against equal or lower priorities, and once it has waited the aging
// bound.
func TestLineYield(t *testing.T) {
	clk := fakeclock.New(start, false)
	const aging = 10 * time.Second
	kw := &keyWaiters{}
	enter := func(prio int) ticket {
		r := pace.Request{}
		tk, _ := kw.enter("GET", "/", &r, nil, ticket{prio: prio, since: clk.Now()})
		return tk
	}
	v := kw.version()
	low := enter(0)
	same := enter(0)
	_, yielded := kw.yield(low, clk, clk.Now(), aging)
	require.False(t, yielded, "an equal priority waits")
	require.Equal(t, v, kw.version(), "and does not wake the holder")
	hi := enter(5)
	require.NotEqual(t, v, kw.version(), "a higher priority wakes the holder")
	low2, yielded := kw.yield(low, clk, clk.Now(), aging)
	require.True(t, yielded)
	<-hi.wait() // hi has the turn
	kw.leave(hi, clk, aging)
	<-low2.wait() // back to low, before same
	select {
	case <-same.wait():
		t.Fatal("same came after low")
	default:
	}
	clk.Advance(aging)
	enter(9)
	_, yielded = kw.yield(low2, clk, clk.Now(), aging)
	require.False(t, yielded, "aged: it keeps its turn")
}

// TestRing: the ring keeps order across wrap-around and growth, at both
// ends.
func TestRing(t *testing.T) {
	var r ring[int]
	var want []int
	for i := range 100 {
		if i%3 == 0 {
			r.pushFront(i)
			want = append([]int{i}, want...)
		} else {
			r.push(i)
			want = append(want, i)
		}
		if i%4 == 0 {
			require.Equal(t, want[0], r.popFront())
			want = want[1:]
		}
	}
	require.Equal(t, len(want), r.len())
	for _, w := range want {
		require.Equal(t, w, r.front())
		require.Equal(t, w, r.popFront())
	}
	require.Zero(t, r.len())
}

// leasesAt returns n leases granted at now, as reserving ahead takes them.
func leasesAt(t *testing.T, n int, now time.Time) []pace.Lease {
	t.Helper()
	var cfg pace.Config
	ls := make([]pace.Lease, n)
	for i := range ls {
		var st pace.State // a key's first request goes alone
		d := st.Reserve(now, pace.Request{}, &cfg)
		require.True(t, d.OK)
		ls[i] = d.Lease
	}
	return ls
}

// TestPoolGivenBack: leases reserved ahead go to requests of their route
// only, and those left when the line empties are handed back, to be
// cancelled.
func TestPoolGivenBack(t *testing.T) {
	clk := fakeclock.New(start, false)
	kw := &keyWaiters{}
	r := pace.Request{}
	holder, _ := kw.enter("GET", "/a", &r, nil, ticket{since: clk.Now()})
	kw.pool(holder, "GET /a", leasesAt(t, 2, clk.Now()), clk.Now())
	other := pace.Request{Route: "GET /b"}
	_, ok, _ := kw.takePooled(holder, &other, clk.Now(), time.Second)
	require.False(t, ok, "not for another route")
	costly := pace.Request{Route: "GET /a", Cost: []pace.Amount{{Unit: "tokens", N: 5}}}
	_, ok, _ = kw.takePooled(holder, &costly, clk.Now(), time.Second)
	require.False(t, ok, "not for a request with a cost")
	same := pace.Request{Route: "GET /a"}
	_, ok, _ = kw.takePooled(holder, &same, clk.Now(), time.Second)
	require.True(t, ok)
	require.Len(t, kw.leave(holder, clk, time.Minute), 1, "the one left is handed back")
	require.Empty(t, kw.main.pool)
}

// TestPoolKeepsNoOrphans: a lease reserved ahead for a request that leaves
// before its turn is handed back as it leaves, though the line stays busy;
// one that waited in the pool longer than its maximum age is handed back by the request that finds it
// rather than taken; and a waiter with a lease in the pool for it is not
// refused by the line's pace.
func TestPoolKeepsNoOrphans(t *testing.T) {
	clk := fakeclock.New(start, false)
	kw := &keyWaiters{}
	enter := func(path string, dl time.Duration) (ticket, pace.Request) {
		r := pace.Request{}
		tk, _ := kw.enter("GET", path, &r, nil, ticket{since: clk.Now(), deadline: clk.Now().Add(dl)})
		return tk, r
	}
	x1, _ := enter("/x", time.Hour)
	x2, rx2 := enter("/x", time.Hour)
	y, _ := enter("/y", time.Hour)
	kw.pool(x1, "GET /x", leasesAt(t, 1, clk.Now()), clk.Now())
	require.Len(t, kw.leave(x2, clk, time.Minute), 1, "x2 left: the lease reserved for it goes back")
	require.Empty(t, kw.main.pool)

	// A lease for x3 that nobody takes within its maximum age.
	x3, rx3 := enter("/x", 5*time.Second)
	kw.pool(x1, "GET /x", leasesAt(t, 1, clk.Now()), clk.Now())
	// y's quota is spent for 20 s: x3, with a lease waiting for it, is
	// not refused (it would go at its turn).
	kw.project(x1.q, pace.Decision{At: clk.Now().Add(20 * time.Second), Definite: true,
		Pace: pace.Pace{Limit: 100, Window: time.Minute}}, clk.Now())
	require.False(t, x3.w.refused, "refused with a lease for it in the pool")
	clk.Advance(time.Second + time.Millisecond)
	_, ok, stale := kw.takePooled(x3, &rx3, clk.Now(), time.Second)
	require.False(t, ok, "a stale lease is not taken")
	require.Len(t, stale, 1, "it is handed back")
	require.Empty(t, kw.main.pool)
	_ = rx2
	for _, tk := range []ticket{x1, y, x3} {
		kw.leave(tk, clk, time.Minute)
	}
	require.Zero(t, kw.waiting)
}

// TestRefusedLeavesNoLine: a waiter refused by its line's pace that leaves
// after the line emptied does not bring the line back.
func TestRefusedLeavesNoLine(t *testing.T) {
	clk := fakeclock.New(start, false)
	kw := &keyWaiters{}
	enter := func(dl time.Duration) ticket {
		r := pace.Request{Quotas: []int{0}}
		tk, _ := kw.enter("GET", "/a", &r, nil, ticket{since: clk.Now(), deadline: clk.Now().Add(dl)})
		return tk
	}
	holder := enter(time.Hour)
	waiter := enter(time.Second)
	kw.project(holder.q, pace.Decision{At: clk.Now().Add(time.Minute), Definite: true,
		Pace: pace.Pace{Limit: 1, Window: time.Minute}}, clk.Now())
	require.True(t, waiter.w.refused)
	kw.leave(holder, clk, time.Minute)
	kw.leave(waiter, clk, time.Minute)
	require.Empty(t, kw.lines)
}

// TestAheadCountsItsRoute: the leases reserved ahead are for the requests
// of the holder's route that wait, at most aheadMax-1.
func TestAheadCountsItsRoute(t *testing.T) {
	clk := fakeclock.New(start, false)
	kw := &keyWaiters{}
	enter := func(path string) ticket {
		r := pace.Request{}
		tk, _ := kw.enter("GET", path, &r, nil, ticket{since: clk.Now()})
		return tk
	}
	holder := enter("/a")
	enter("/a")
	enter("/b")
	enter("/a")
	r := pace.Request{Route: "GET /a"}
	require.Equal(t, 2, kw.ahead(holder, &r, nil, false))
	for range 20 {
		enter("/a")
	}
	require.Equal(t, aheadMax-1, kw.ahead(holder, &r, nil, false))
	require.Zero(t, kw.ahead(holder, &r, []int{0}, false), "not under a cap")
	require.Zero(t, kw.ahead(holder, &r, nil, true), "not under a limiter")
}

package headway

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/headway-go/headway/internal/testkit/fakeclock"
	"github.com/headway-go/headway/pace"
)

type rvClient struct {
	t      ticket
	holder bool
	left   bool
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestLineInvariants drives keyWaiters at random (enter, leave, yield,
// project) and checks, after each step, that its counts (waiting, each
// level's live, each line's n) are those of the waiters, and that a busy
// line has one holder.
func TestLineInvariants(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rnd := rand.New(rand.NewPCG(seed, 7))
		clk := fakeclock.New(start, false)
		kw := &keyWaiters{}
		aging := 50 * time.Millisecond
		var cs []*rvClient
		paths := []string{"/a", "/b"}
		for step := 0; step < 400; step++ {
			clk.Advance(time.Duration(rnd.IntN(5)) * time.Millisecond)
			now := clk.Now()
			switch op := rnd.IntN(10); {
			case op < 4:
				r := pace.Request{}
				if rnd.IntN(2) == 0 {
					r.Quotas = []int{0}
				}
				tk := ticket{prio: rnd.IntN(3) - 1, since: now}
				if rnd.IntN(2) == 0 {
					tk.deadline = now.Add(time.Duration(rnd.IntN(400)) * time.Millisecond)
				}
				tk, ok := kw.enter("GET", paths[rnd.IntN(2)], &r, nil, tk)
				if !ok {
					t.Fatal("dead")
				}
				cs = append(cs, &rvClient{t: tk, holder: tk.w == nil})
			case op < 6:
				// a waiter's context ends
				for _, c := range cs {
					if !c.left && !c.holder && rnd.IntN(3) == 0 {
						kw.leave(c.t, clk, aging)
						c.left = true
						break
					}
				}
			default:
				for _, c := range cs {
					if c.left || !c.holder {
						continue
					}
					switch rnd.IntN(3) {
					case 0:
						kw.leave(c.t, clk, aging)
						c.left = true
					case 1:
						nt, y := kw.yield(c.t, clk, now, aging)
						c.t = nt
						if y {
							c.holder = false
						}
					case 2:
						d := pace.Decision{At: now.Add(time.Duration(rnd.IntN(300)) * time.Millisecond), Definite: rnd.IntN(2) == 0,
							Pace: pace.Pace{Limit: int64(1 + rnd.IntN(3)), Window: time.Duration(10+rnd.IntN(100)) * time.Millisecond}}
						kw.project(c.t.q, d, now)
					}
					break
				}
			}
			// Waiters notice their channels.
			for _, c := range cs {
				if c.left || c.holder || c.t.w == nil {
					continue
				}
				if closed(c.t.w.ch) {
					if c.t.w.refused == c.t.w.granted {
						t.Fatalf("seed %d: refused=%v granted=%v", seed, c.t.w.refused, c.t.w.granted)
					}
					if c.t.w.refused {
						kw.leave(c.t, clk, aging)
						c.left = true
					} else {
						c.holder = true
					}
				}
			}
			// Invariants.
			live := 0
			holders := map[string]int{}
			for _, c := range cs {
				if !c.left {
					live++
					if c.holder {
						holders[c.t.q]++
					}
				}
			}
			if kw.waiting != live {
				t.Fatalf("seed %d step %d: waiting %d, want %d", seed, step, kw.waiting, live)
			}
			lines := map[string]*waitLine{"": &kw.main}
			for q, wl := range kw.lines {
				lines[q] = wl
			}
			for q, wl := range lines {
				n := 0
				for _, lv := range wl.levels {
					l := 0
					for j := range lv.q.len() {
						if !lv.q.at(j).gone {
							l++
						}
					}
					if l != lv.live {
						t.Fatalf("seed %d step %d: level %d live %d, counted %d", seed, step, lv.prio, lv.live, l)
					}
					n += l
				}
				if n != wl.n {
					t.Fatalf("seed %d step %d: line %q n %d, counted %d", seed, step, q, wl.n, n)
				}
				if wl.busy != (holders[q] == 1) || holders[q] > 1 {
					t.Fatalf("seed %d step %d: line %q busy %v with %d holders (n %d)", seed, step, q, wl.busy, holders[q], wl.n)
				}
			}
		}
	}
}

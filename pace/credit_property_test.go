package pace

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// creditAnswer is a 200 (or a 429) with either IETF headers (one bucket) or
// GitHub's (a named resource).
func creditAnswer(rng *rand.Rand, status int, route string, at time.Time, limit, left int) Answer {
	var h http.Header
	switch route {
	case "GET /gh", "GET /gh2":
		res := "core"
		if route == "GET /gh2" && rng.IntN(2) == 0 {
			res = "search"
		}
		h = http.Header{
			"X-Ratelimit-Limit":     {strconv.Itoa(limit)},
			"X-Ratelimit-Remaining": {strconv.Itoa(left)},
			"X-Ratelimit-Used":      {strconv.Itoa(limit - left)},
			"X-Ratelimit-Resource":  {res},
			"X-Ratelimit-Reset":     {strconv.FormatInt(at.Add(time.Duration(1+rng.IntN(60))*time.Second).Unix(), 10)},
		}
	default:
		h = http.Header{
			"Ratelimit-Policy": {`"default";q=` + strconv.Itoa(limit) + `;w=60`},
			"Ratelimit":        {`"default";r=` + strconv.Itoa(left) + `;t=` + strconv.Itoa(1+rng.IntN(60))},
		}
	}
	if status == http.StatusTooManyRequests && rng.IntN(2) == 0 {
		h.Set("Retry-After", "1")
	}
	return Answer{Obs: ratelimit.ParseHeaders(h, status, at)}
}

// TestCreditWithinReserve: whenever Credit(now, route) = n > 0, n
// consecutive Reserve calls at now for that route (on a clone) are all
// admitted: credit never lends what the model would not grant (a property
// over random sequences of Reserve, Complete, Spent, Lend and Cancel, from
// a second review of credit).
func TestCreditWithinReserve(t *testing.T) {
	routes := []string{"GET /items", "GET /gh", "GET /gh2"}
	fails, positives := 0, 0
	defer func() { t.Logf("%d positive credits checked", positives) }()
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 7))
		t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		latest := t0
		stale := seed%2 == 1
		var cfg Config
		var s State
		type fl struct {
			l     Lease
			route string
		}
		var leases []fl
		limit := []int{10, 20, 60, 100, 1000}[rng.IntN(5)]
		left := limit - 1
		for step := range 300 {
			latest = latest.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
			now := latest
			if stale && rng.IntN(4) == 0 {
				// Read before the lock: another update went first.
				now = now.Add(-time.Duration(rng.IntN(50)) * time.Millisecond)
			}
			route := routes[rng.IntN(len(routes))]
			switch op := rng.IntN(10); {
			case op < 3:
				d := s.Reserve(now, Request{Route: route}, &cfg)
				if d.OK {
					leases = append(leases, fl{d.Lease, route})
				}
			case op < 6 && len(leases) > 0:
				i := rng.IntN(len(leases))
				l := leases[i]
				leases = append(leases[:i], leases[i+1:]...)
				status := http.StatusOK
				if left <= 0 || rng.IntN(20) == 0 {
					status = http.StatusTooManyRequests
				}
				left = max(left-rng.IntN(3), 0)
				if rng.IntN(10) == 0 {
					left = limit - 1 // a reset
				}
				s.Complete(now, l.l, creditAnswer(rng, status, l.route, now, limit, left), &cfg)
			case op < 8:
				n := s.Credit(now, route)
				k := min(n, int64(1+rng.IntN(5)))
				spans := make([]Span, k)
				for i := range spans {
					spans[i] = Span{Sent: -time.Duration(20+rng.IntN(50)) * time.Millisecond}
				}
				if k > 0 {
					s.Spent(route, now, spans, &cfg)
					left = max(left-int(k), 0)
				}
			case op < 9:
				if s.Credit(now, route) > 0 {
					leases = append(leases, fl{s.Lend(now, route, &cfg), route})
				}
			default:
				if len(leases) > 0 {
					i := rng.IntN(len(leases))
					s.Cancel(leases[i].l, &cfg)
					leases = append(leases[:i], leases[i+1:]...)
				}
			}
			for _, r := range routes {
				n := s.Credit(now, r)
				if n <= 0 {
					continue
				}
				positives++
				c := s.Clone()
				for i := range n {
					if d := c.Reserve(now, Request{Route: r}, &cfg); !d.OK {
						if fails < 5 {
							t.Errorf("seed %d step %d: Credit(%s)=%d but Reserve #%d refused: %v %s (at +%v)", seed, step, r, n, i+1, d.Why, d.Detail, d.At.Sub(now))
						}
						fails++
						break
					}
				}
			}
		}
	}
	if fails > 0 {
		t.Errorf("%d violations", fails)
	}
}

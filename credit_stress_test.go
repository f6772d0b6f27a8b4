package headway

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// flakyAmpleTransport answers with ample quota (IETF, or GitHub's resources by
// path), now and then a 500 without headers or a transport error.
type flakyAmpleTransport struct{ n atomic.Int64 }

func (z *flakyAmpleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	i := z.n.Add(1)
	if i%3 == 0 {
		runtime.Gosched() // answers out of order
	}
	if i%97 == 0 {
		return nil, errors.New("zz: connection reset")
	}
	status := http.StatusOK
	h := http.Header{}
	switch {
	case i%53 == 0:
		status = http.StatusInternalServerError
	case req.URL.Host == "gh.test":
		res := "core"
		if len(req.URL.Path) > 2 && req.URL.Path[1] == 's' {
			res = "search"
		}
		h = http.Header{
			"X-Ratelimit-Limit":     {"100000"},
			"X-Ratelimit-Remaining": {"99000"},
			"X-Ratelimit-Used":      {"1000"},
			"X-Ratelimit-Resource":  {res},
			"X-Ratelimit-Reset":     {fmt.Sprint(time.Now().Add(time.Hour).Unix())},
		}
	default:
		h = http.Header{
			"Ratelimit-Policy": {`"default";q=100000;w=60`},
			"Ratelimit":        {`"default";r=99000;t=30`},
		}
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: req}, nil
}

// TestCreditStress: many requests on credit across keys and
// routes (more than maxCreditRoutes), with 500s, transport errors,
// limiter refusals (cancel), and sweeps running all along: nothing
// deadlocks, and once all is answered no lease is left lent or in flight
// (from a second review of credit.go; it passed).
func TestCreditStress(t *testing.T) {
	lim := rate.NewLimiter(rate.Every(50*time.Microsecond), 20)
	rt := NewTransport(&flakyAmpleTransport{}, WithClock(loAutoClock()), WithMaxAttempts(1), WithLimiter(lim), WithMaxWait(200*time.Microsecond)).(*retryTransport)
	p := rt.next.(*pacer)
	hosts := []string{"a.test", "b.test", "gh.test", "c.test"}
	paths := []string{"/items", "/s/q", "/users", "/x"}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range 1500 {
				path := paths[r.IntN(len(paths))]
				if r.IntN(8) == 0 {
					path = fmt.Sprintf("/id/%d", r.IntN(1000))
				}
				req, _ := http.NewRequest(http.MethodGet, "http://"+hosts[r.IntN(len(hosts))]+path, nil)
				if resp, err := rt.RoundTrip(req); err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	var sweeps sync.WaitGroup
	sweeps.Go(func() {
		for ctx.Err() == nil {
			// As two sweeps with the keys idle between them would.
			p.waiters.Range(func(_, v any) bool { v.(*keyWaiters).used.Store(false); return true })
			p.sweepWaitersNow()
			runtime.Gosched()
		}
	})
	wg.Wait()
	stop()
	sweeps.Wait()
	require.Eventually(t, func() bool { return !p.sweeper.running.Load() }, 5*time.Second, time.Millisecond)
	// (About 33,000 of the 48,000 requests go on credit; the sweeps make
	// the keys' waiters anew, so SentOnCredit cannot count them here.)
	for _, h := range hosts {
		n, lent := InFlight(rt, h)
		require.Zero(t, lent, "%s: leases lent to requests on credit, all answered", h)
		require.Zero(t, n, "%s: in flight, all answered", h)
	}
}

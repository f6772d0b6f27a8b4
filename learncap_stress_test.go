package headway_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/testkit/sim"
	"github.com/headway-go/headway/pace"
)

type flakyStore struct {
	m    *pace.MemoryStore
	fail atomic.Bool
}

func (s *flakyStore) Load(ctx context.Context, key string) (pace.State, error) {
	time.Sleep(time.Millisecond)
	if s.fail.Load() && rand.IntN(4) == 0 {
		return pace.State{}, errors.New("store down")
	}
	return s.m.Load(ctx, key)
}
func (s *flakyStore) CompareAndSwap(ctx context.Context, key string, v uint64, next pace.State) (bool, error) {
	return s.m.CompareAndSwap(ctx, key, v, next)
}

// TestLearntCapAccounting drives every path of holdSlow, complete and
// cancel on a silent key whose server takes 4 at once (quotas, a limiter,
// a cap of the caller's, a failing shared store, timeouts,
// cancellations, 503s and 429s), and checks that the window's counts
// return to zero: a key with requests counted in flight is never swept.
func TestLearntCapAccounting(t *testing.T) {
	for _, shared := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			var now atomic.Int64
			api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := now.Add(1)
				defer now.Add(-1)
				if n > 4 {
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				if r.URL.Path == "/fail" {
					w.WriteHeader(503)
					return
				}
				time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
			})
			opts := []headway.Option{
				headway.WithMaxWait(2 * time.Second), headway.WithMaxAttempts(3),
				headway.WithQuota("POST api.test/q", 5, time.Second),
				headway.WithLimiter(rate.NewLimiter(20, 1), "PUT api.test/"),
				headway.WithMaxInFlight(2, "DELETE api.test/"),
			}
			fs := &flakyStore{m: pace.NewMemoryStore(time.Now)}
			if shared {
				opts = append(opts, headway.WithStore(fs))
				fs.fail.Store(true)
			}
			rt := headway.NewTransport(sim.Transport{Handler: api, RTT: 2 * time.Millisecond}, opts...)
			c := &http.Client{Transport: rt}
			var wg sync.WaitGroup
			methods := []string{"GET", "GET", "POST", "PUT", "DELETE"}
			paths := []string{"/a", "/q", "/fail"}
			for w := range 24 {
				wg.Go(func() {
					for i := range 30 {
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(300))*time.Millisecond)
						if (w+i)%3 == 0 {
							cancel()
							ctx, cancel = context.WithCancel(context.Background())
						}
						req, _ := http.NewRequestWithContext(ctx, methods[rand.IntN(len(methods))], "http://api.test"+paths[rand.IntN(len(paths))], nil)
						if resp, err := c.Do(req); err == nil {
							resp.Body.Close()
						}
						cancel()
					}
				})
			}
			wg.Wait()
			time.Sleep(10 * time.Second)
			synctest.Wait()
			flying, inFlight, lc, noWindow := headway.WindowState(rt, "api.test")
			t.Logf("shared %v: flying %d, window inFlight %d, lc %v, noWindow %v", shared, flying, inFlight, lc, noWindow)
			if flying > 0 || inFlight != 0 {
				t.Errorf("leak: flying %d, inFlight %d", flying, inFlight)
			}
		})
	}
}

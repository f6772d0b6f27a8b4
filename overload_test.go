package headway_test

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/testkit/sim"
)

// TestOverloadThrottle: 16 workers each ask for a GET every 20 ms (800 a
// second) of a backend that answers 80% of attempts with a 503 for 8 s,
// then heals. While it fails, attempts sent are at most twice those it
// accepts plus the trickle (10% of the requests asked for) and the retry
// budget's retries; the requests held back fail at once with ErrOverloaded.
// Once it heals, the share sent is back above 90% within a second.
func TestOverloadThrottle(t *testing.T) {
	type tally struct{ asked, sent, accepted, held int64 }
	run := func(t *testing.T, opts ...headway.Option) (fail, healed tally, recovery time.Duration) {
		const failFor, total, slot = 8 * time.Second, 11 * time.Second, 100 * time.Millisecond
		start := time.Now()
		var n atomic.Int64
		var mu sync.Mutex
		slots := make([]tally, total/slot+1)
		at := func() *tally { return &slots[time.Since(start)/slot] }
		api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			s := at()
			s.sent++
			if time.Since(start) < failFor && n.Add(1)%5 != 0 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			s.accepted++
		})
		client := &http.Client{Transport: headway.NewTransport(sim.Transport{Handler: api, RTT: 10 * time.Millisecond}, opts...)}
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for time.Since(start) < total-time.Second {
					next := time.Now().Add(20 * time.Millisecond)
					mu.Lock()
					at().asked++
					mu.Unlock()
					resp, err := client.Get("http://api.test/work")
					if err == nil {
						resp.Body.Close()
					} else if errors.Is(err, headway.ErrOverloaded) {
						var re *headway.RetryError
						require.ErrorAs(t, err, &re)
						require.Equal(t, headway.ReasonOverloaded, re.Reason)
						mu.Lock()
						at().held++
						mu.Unlock()
					}
					time.Sleep(time.Until(next))
				}
			})
		}
		wg.Wait()
		recovery = -1
		for i, s := range slots[:len(slots)-int(time.Second/slot)] {
			d := time.Duration(i) * slot
			if d >= 2*time.Second && d < failFor { // past the first two seconds of the outage
				fail.asked, fail.sent, fail.accepted, fail.held = fail.asked+s.asked, fail.sent+s.sent, fail.accepted+s.accepted, fail.held+s.held
			}
			if d >= failFor {
				healed.asked, healed.sent = healed.asked+s.asked, healed.sent+s.sent
				if recovery < 0 && s.held == 0 && s.sent*10 >= s.asked*9 {
					recovery = d - failFor + slot
				}
			}
		}
		return fail, healed, recovery
	}
	synctest.Test(t, func(t *testing.T) {
		fail, healed, recovery := run(t)
		t.Logf("failing: %+v; healed: %+v; recovered within %v", fail, healed, recovery)
		require.Greater(t, fail.held, int64(0))
		trickle := fail.asked / 10
		retries := fail.sent/10 + 10 // the default retry budget's
		require.LessOrEqual(t, fail.sent, 2*fail.accepted+trickle+retries, "sent at most 2x accepted, plus the trickle")
		require.GreaterOrEqual(t, recovery, time.Duration(0), "recovered")
		require.LessOrEqual(t, recovery, time.Second, "recovered within a second")
	})
	synctest.Test(t, func(t *testing.T) {
		fail, _, _ := run(t, headway.WithOverloadThrottle(0))
		t.Logf("without the throttle, failing: %+v", fail)
		require.Zero(t, fail.held)
		require.Greater(t, fail.sent, fail.asked, "every request asked for is sent, and some retried")
	})
}

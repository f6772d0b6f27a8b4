package headway_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/testkit/sim"
	rlt "github.com/headway-go/headway/ratelimittest"
)

// TestUnservableFailsAtOnce: 10,000 goroutines send one GET each, with a
// 60 s deadline, into one key a fixed window lets 50 a second through (it
// says so in its headers, its reset in whole seconds). About 3,000 can be
// served in time: those fail at once with a typed *RateLimitError that the
// line's pace cannot fit before their deadline, and every other one
// succeeds. 6,900 fail within 40 ms; 49 more at 60 ms, when a probe's
// refusal puts the next start at the first window's cautious end; the last
// window's worth (50) at 1.06 s, once that end has come: until then the
// window's boundary is known only to the second, and a boundary a little
// earlier (or a sliding counter) would let those 50 through in time. Before,
// the 6,950 unservable ones all failed between 59.5 and 60 s, each holding
// its goroutine and request until then; and before the line checked itself
// again when a definite start moved half a window later, 100 failed at
// 1.06 s.
func TestUnservableFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := rlt.NewHandler(nil, rlt.WithQuota(rlt.Quota{Limit: 50, Window: time.Second}))
		require.NoError(t, err)
		client := &http.Client{Transport: headway.NewTransport(sim.Transport{Handler: h, RTT: 20 * time.Millisecond}, headway.WithMaxWait(2*time.Minute))}
		const n = 10000
		type outcome struct {
			took time.Duration
			err  error
		}
		out := make([]outcome, n)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range n {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/items", nil)
				resp, err := client.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				out[i] = outcome{time.Since(start), err}
			})
		}
		wg.Wait()
		served, late, afterFirst := 0, 0, 0
		var slowest time.Duration
		for _, o := range out {
			if o.err == nil {
				served++
				continue
			}
			var rle *headway.RateLimitError
			require.True(t, errors.As(o.err, &rle), "typed: %v", o.err)
			require.Equal(t, headway.ReasonDeadline, rle.Reason, "%v", o.err)
			require.Zero(t, rle.StatusCode, "not sent")
			if o.took > 1200*time.Millisecond {
				late++
				slowest = max(slowest, o.took)
			}
			if o.took > 100*time.Millisecond {
				afterFirst++
			}
		}
		t.Logf("%d served, %d refused, %d of them after 100 ms, %d after more than 1.2 s (the slowest after %v)", served, n-served, afterFirst, late, slowest)
		require.GreaterOrEqual(t, served, 2950, "what 60 s at 50 a second can serve")
		require.Zero(t, late, "every unservable request fails within a window and a few round trips")
		require.LessOrEqual(t, afterFirst, 51, "only the last window's worth waits for the first window's end")
	})
}

package headway_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/testkit/sim"
	rlt "github.com/headway-go/headway/ratelimittest"
)

// TestPriorityJumpsTheLine: 200 batch requests wait in line on a key paced
// at 50 a second (a token bucket that says so in its headers); an
// interactive request that comes then is sent within one interval of the
// key's pace (20 ms), where without a priority it would wait for the 200
// (about 3 s), as it does at the batch's priority. The batch requests
// still all succeed, none refused.
func TestPriorityJumpsTheLine(t *testing.T) {
	for _, prio := range []int{headway.PriorityInteractive, headway.PriorityBatch} {
		synctest.Test(t, func(t *testing.T) {
			h, err := rlt.NewHandler(nil, rlt.WithQuota(rlt.Quota{Algorithm: rlt.TokenBucket, Limit: 50, Window: time.Second}))
			require.NoError(t, err)
			var mu sync.Mutex
			var interactiveAt time.Time
			var refused atomic.Int64
			api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/interactive" {
					mu.Lock()
					interactiveAt = time.Now()
					mu.Unlock()
				}
				rec := &statusRecorder{ResponseWriter: w}
				h.ServeHTTP(rec, r)
				if rec.status == http.StatusTooManyRequests {
					refused.Add(1)
				}
			})
			client := &http.Client{Transport: headway.NewTransport(sim.Transport{Handler: api, RTT: 10 * time.Millisecond},
				headway.WithMaxWait(time.Minute))}
			get := func(ctx context.Context, path string) error {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test"+path, nil)
				resp, err := client.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				return err
			}
			require.NoError(t, get(context.Background(), "/warm")) // the key's first answer: its pace is known
			var wg sync.WaitGroup
			var failed atomic.Int64
			batch := headway.ContextWithPriority(context.Background(), headway.PriorityBatch)
			for range 200 {
				wg.Go(func() {
					if get(batch, "/batch") != nil {
						failed.Add(1)
					}
				})
			}
			time.Sleep(100 * time.Millisecond) // the batch is in line
			sent := time.Now()
			require.NoError(t, get(headway.ContextWithPriority(context.Background(), prio), "/interactive"))
			wg.Wait()
			require.Zero(t, failed.Load())
			require.Zero(t, refused.Load(), "no request refused")
			waited := interactiveAt.Sub(sent) - 5*time.Millisecond // less the way to the server
			if prio == headway.PriorityInteractive {
				require.LessOrEqual(t, waited, 20*time.Millisecond, "the interactive request goes at the key's next opening")
			} else {
				require.Greater(t, waited, 2*time.Second, "at the batch's priority it waits behind the batch")
			}
		})
	}
}

// statusRecorder records the status a handler writes.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

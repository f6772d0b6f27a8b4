package pace

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/ratelimittest"
)

// silentServer is a ratelimittest server that says nothing of its limit:
// no rate-limit headers, no Retry-After.
func silentServer(p ratelimittest.Quota) []ratelimittest.Option {
	return []ratelimittest.Option{
		ratelimittest.WithQuota(p),
		ratelimittest.WithDialect(ratelimittest.None),
		ratelimittest.WithRetryAfter(ratelimittest.RetryAfterNone),
	}
}

// TestSilentIdentifies runs 16 workers for 10 s against servers that say
// nothing but admitted or refused, each of which one of the silent model's
// candidates describes: the first burst costs what was in flight, the
// search a few refusals more, and from the third second on the pace is
// the server's. Issue 17's hidden "leaky bucket that sends no headers and
// no Retry-After" (4.8% refused and 1.74x at a03ed81) is the leaky bucket
// of one at a time; nginx's limit_req with burst=10 nodelay is the bucket
// of 11.
func TestSilentIdentifies(t *testing.T) {
	for _, tt := range []struct {
		name    string
		p       ratelimittest.Quota
		rate    float64 // per second, sustained
		refused int
		want    string // the candidate that paces, among those left
	}{
		{"sliding log of 20 a second", ratelimittest.Quota{Algorithm: ratelimittest.SlidingLog, Limit: 20, Window: time.Second}, 20, 16 + 6, "sliding log of 1s"},
		{"fixed window of 50 a second", ratelimittest.Quota{Algorithm: ratelimittest.FixedWindow, Limit: 50, Window: time.Second}, 50, 16 + 10, "fixed window of 1s"},
		{"leaky bucket, 50/s one at a time", ratelimittest.Quota{Algorithm: ratelimittest.LeakyBucket, Limit: 50, Window: time.Second, Burst: 1}, 50, 16 + 6, "bucket of 50/s"},
		{"token bucket, 50/s, burst 11", ratelimittest.Quota{Algorithm: ratelimittest.TokenBucket, Limit: 50, Window: time.Second, Burst: 11}, 50, 16 + 6, "bucket of 50/s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := emulate(t, emu{opts: silentServer(tt.p), workers: 16, latency: 20 * time.Millisecond, span: 10 * time.Second, start: t0.Add(ms(370))})
			a := &e.st.k.silent
			var left []string
			for i := range nSilent {
				if a.alive&(1<<i) != 0 {
					left = append(left, fmt.Sprintf("%s [%d, %d]", silentNames[i], a.lo[i], a.hi[i]))
				}
			}
			t.Logf("%d sends, %d refused (%d probes); per second %v; envelope %v, left %v", len(e.sends), len(e.refused), e.probes, perSecond(e, 10), a.envelope, left)
			require.LessOrEqual(t, len(e.refused), tt.refused, "refused")
			require.False(t, a.envelope, "no candidate explained the server")
			require.Contains(t, fmt.Sprint(left), tt.want)
			n := float64(e.sentIn(sec(3), sec(10))) / 7
			require.GreaterOrEqualf(t, n, 0.9*tt.rate, "%.1f/s from 3s to 10s", n)
			require.LessOrEqualf(t, n, 1.1*tt.rate, "%.1f/s from 3s to 10s", n)
		})
	}
}

// TestSilentCounter runs a server that no one candidate describes exactly
// (a sliding window counter): whichever explains it best (or the envelope
// of what each window proved, if none does) paces, at most as fast as
// the server, and nothing stalls.
func TestSilentCounter(t *testing.T) {
	e := emulate(t, emu{
		opts:    silentServer(ratelimittest.Quota{Algorithm: ratelimittest.SlidingCounter, Limit: 50, Window: time.Second}),
		workers: 16, latency: 20 * time.Millisecond, span: 10 * time.Second, start: t0.Add(ms(370)),
	})
	t.Logf("%d sends, %d refused (%d probes); per second %v; envelope %v", len(e.sends), len(e.refused), e.probes, perSecond(e, 10), e.st.k.silent.envelope)
	n := float64(e.sentIn(sec(3), sec(10))) / 7
	require.GreaterOrEqualf(t, n, 25.0, "%.1f/s from 3s to 10s", n)
	require.LessOrEqualf(t, n, 52.0, "%.1f/s from 3s to 10s", n)
	require.LessOrEqual(t, len(e.refused), 16+30, "refused")
}

// TestSilentNothingBeforeARefusal: a server that refuses nothing is never
// held back, and the model costs it nothing but the ledger of arrivals.
func TestSilentNothingBeforeARefusal(t *testing.T) {
	e := emulate(t, emu{
		opts:    silentServer(ratelimittest.Quota{Algorithm: ratelimittest.FixedWindow, Limit: 1_000_000, Window: time.Second}),
		workers: 4, latency: 20 * time.Millisecond, span: 2 * time.Second,
	})
	require.Empty(t, e.refused)
	delete(e.whys, WhyFirstAnswer) // the key's first request goes alone, as for any server
	require.Empty(t, e.whys, "held back")
	require.False(t, e.st.k.silent.on)
}

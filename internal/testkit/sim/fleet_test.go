package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	rlt "github.com/headway-go/headway/ratelimittest"
)

// TestSharedStoreFleet: three processes of eight workers share one 50/s
// quota (a fixed window, a token bucket, a GCRA) through one store, as a fleet does through Redis. A waiter must see
// what another process's responses changed in the store (a new window, an
// answer it was waiting for), not only what its own process did: before it
// did, a waiter slept to its own idea of the reset and about half of the
// runs took 1.22x the ideal.
func TestSharedStoreFleet(t *testing.T) {
	for _, rtt := range []time.Duration{time.Millisecond, 20 * time.Millisecond} {
		for _, c := range []struct {
			alg rlt.Algorithm
			d   rlt.Dialect
		}{{rlt.FixedWindow, rlt.IETF}, {rlt.FixedWindow, rlt.XRateLimit}, {rlt.TokenBucket, rlt.XRateLimit}, {rlt.GCRA, rlt.IETF}} {
			for run := range 4 {
				s := Scenario{
					Name:   fmt.Sprintf("fleet/%s/%s/rtt=%v/%d", c.alg, c.d, rtt, run),
					Policy: rlt.Quota{Algorithm: c.alg, Limit: 50, Window: time.Second}, Dialect: c.d,
					Processes: 3, Workers: 8, SharedStore: true, RTT: rtt,
					Phase: time.Duration(run) * 137 * time.Millisecond,
				}
				r := runIn(t, s)
				t.Logf("%s: %s", s.Name, r)
				require.Zero(t, r.Failed, s.Name)
				require.LessOrEqual(t, r.ThrottledShare(), 0.01, s.Name)
				require.LessOrEqual(t, r.Slowdown(), 1.10, s.Name)
			}
		}
	}
}

package sim

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway"
	rlt "github.com/headway-go/headway/ratelimittest"
)

// runStart is where a run starts in a synctest bubble: midnight, 2000-01-01
// UTC, plus the default Phase.
var runStart = time.Date(2000, 1, 1, 0, 0, 0, 370_000_000, time.UTC)

// The oracle combines the workers' round trips with the server's limit, and
// ends half a round trip after the last admission.
func TestIdeal(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		s    Scenario
		want time.Duration
		why  string
	}{
		{"the workers bind",
			Scenario{Policy: rlt.Quota{Limit: 100000, Window: time.Second}, Requests: 10, Workers: 2, RTT: 20 * ms},
			100 * ms, "five round trips each: the last admission at 10+4x20 ms, its answer back 10 ms later"},
		{"the server binds",
			Scenario{Policy: rlt.Quota{Limit: 3, Window: time.Second}, Requests: 10, Workers: 2, RTT: 20 * ms},
			2640 * ms, "3 per window, windows ending 630 ms, 1.63 s and 2.63 s into the run: the tenth at 2.63 s"},
		{"both bind",
			Scenario{Policy: rlt.Quota{Algorithm: rlt.GCRA, Limit: 40, Window: time.Second, Burst: 1}, Requests: 10, Workers: 1, RTT: 30 * ms},
			15*ms + 9*30*ms + 15*ms, "one worker, 30 ms round trips on a 25 ms emission interval: the worker's round trip paces it"},
		{"a burst then the rate, from several workers",
			Scenario{Policy: rlt.Quota{Algorithm: rlt.TokenBucket, Limit: 10, Window: time.Second, Burst: 4}, Requests: 8, Workers: 3, RTT: 20 * ms},
			10*ms + 400*ms + 10*ms, "four at once (three at 10 ms, one at 30 ms), then one per 100 ms from 110 ms: the eighth at 410 ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.s.defaults()
			require.Equal(t, tc.want, oracle(tc.s, runStart), tc.why)
		})
	}
}

// The oracle is never refused, so a server that charges refusals gives it
// the same ideal; a foreign client's spending makes it longer.
func TestIdealAgainstChargesAndForeignClients(t *testing.T) {
	for _, alg := range rlt.Algorithms() {
		s := Scenario{Policy: rlt.Quota{Algorithm: alg, Limit: 50, Window: time.Second}, Requests: 300, RTT: 20 * time.Millisecond}
		s.defaults()
		plain := oracle(s, runStart)
		charged := s
		charged.Options = []rlt.Option{rlt.WithChargeRefused()}
		require.Equal(t, plain, oracle(charged, runStart), alg)
		shared := charged
		shared.Foreign = 0.3
		withForeign := oracle(shared, runStart)
		// 30% of the quota gone: about 1/0.7 of the time the quota binds.
		require.Greater(t, withForeign, plain+plain/10, alg)
		require.Less(t, withForeign, plain*2, alg)
	}
}

// Jitter spreads the round trips uniformly within +/-Jitter of RTT.
func TestJitter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rtt := 20 * time.Millisecond
	var sum time.Duration
	lo, hi := time.Hour, time.Duration(0)
	const n = 10000
	for range n {
		d := jitter(rng, rtt, 0.5)
		sum += d
		lo, hi = min(lo, d), max(hi, d)
	}
	require.GreaterOrEqual(t, lo, 10*time.Millisecond)
	require.LessOrEqual(t, hi, 30*time.Millisecond)
	require.Less(t, lo, 10100*time.Microsecond, "the whole range is drawn")
	require.Greater(t, hi, 29900*time.Microsecond)
	require.InDelta(t, float64(rtt), float64(sum/n), float64(200*time.Microsecond))
	require.Equal(t, rtt, jitter(rng, rtt, 0))
}

// Lag delays each request on its way out by an exponential draw of mean
// Lag: never negative, a tenth of them more than 2.3 Lag; none without it.
func TestLag(t *testing.T) {
	require.Nil(t, (&Scenario{}).lagged())
	s := Scenario{Lag: 10 * time.Millisecond, Seed: 7}
	next := s.lagged()
	var sum time.Duration
	over := 0
	const n = 10000
	for range n {
		d := next()
		require.GreaterOrEqual(t, d, time.Duration(0))
		sum += d
		if d > 23*time.Millisecond {
			over++
		}
	}
	require.InDelta(t, float64(s.Lag), float64(sum/n), float64(500*time.Microsecond))
	require.InDelta(t, n/10, over, n/50)

	// On its way out only: the handler sees the request Lag later, and
	// the answer takes the usual half round trip back.
	synctest.Test(t, func(t *testing.T) {
		var seen time.Time
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = time.Now() })
		rt := Transport{Handler: h, RTT: 20 * time.Millisecond, NextLag: func() time.Duration { return 30 * time.Millisecond }}
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, "http://api.sim/", nil)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 40*time.Millisecond, seen.Sub(start))
		require.Equal(t, 50*time.Millisecond, time.Since(start))
	})
}

// The foreign client sends its share of the limit all run long, whatever
// the answers, and is counted apart from headway's requests.
func TestForeignClient(t *testing.T) {
	s := Scenario{Policy: rlt.Quota{Limit: 1000, Window: time.Second}, Dialect: rlt.IETF,
		Requests: 200, Workers: 1, RTT: 20 * time.Millisecond, Jitter: 0.5, Foreign: 0.3, Bare: true}
	r := runIn(t, s)
	require.Equal(t, 200, r.Attempts, "headway's attempts only")
	require.Zero(t, r.Throttled)
	require.Zero(t, r.ForeignThrottled)
	// 30% of 1000 per second; those sent in the last half round trip (at
	// most 15 ms) do not reach the server before the run ends.
	want := 300 * r.Wall.Seconds()
	require.InDelta(t, want, float64(r.ForeignAttempts), 2+300*0.015)

	// On a quota it exceeds with headway's client, the foreign client is
	// refused, and headway's refusals are counted without its. (The oracle
	// sees it too, but wins every race for a returning unit here: see
	// TestIdealAgainstChargesAndForeignClients for where it costs.)
	s = Scenario{Policy: rlt.Quota{Algorithm: rlt.SlidingLog, Limit: 10, Window: time.Second}, Dialect: rlt.IETF,
		Requests: 30, RTT: 20 * time.Millisecond, Foreign: 0.5, Options2: []headway.Option{headway.WithMaxAttempts(10)}}
	r = runIn(t, s)
	require.Positive(t, r.ForeignThrottled)
	require.Equal(t, 30, r.Succeeded, "%v", r.Errors)
	require.Equal(t, 30+r.Throttled, r.Attempts, "every attempt of headway's is a success or a refusal")
	require.InDelta(t, 5*r.Wall.Seconds(), float64(r.ForeignAttempts), 2+5*0.015)
	alone := s
	alone.Foreign = 0
	alone.defaults()
	require.GreaterOrEqual(t, r.Ideal, oracle(alone, runStart), "the oracle shares the quota with the foreign client too")
}

package headway

import (
	"context"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// drain withdraws from key until refused (at most limit times) and returns
// how many withdrawals were allowed.
func loDrainBudget(b RetryBudget, key string, limit int) int {
	n := 0
	for n < limit && b.Withdraw(key) {
		n++
	}
	return n
}

func TestRetryBudgetReserve(t *testing.T) {
	b := NewRetryBudget(DefaultBudgetRatio, DefaultBudgetReserve)
	require.Equal(t, DefaultBudgetReserve, loDrainBudget(b, "api", 1000), "a fresh key holds the reserve")
	require.False(t, b.Withdraw("api"))

	b = NewRetryBudget(0, 3)
	require.Equal(t, 3, loDrainBudget(b, "api", 1000))
	for range 100 {
		b.Deposit("api") // ratio 0 earns nothing
	}
	require.False(t, b.Withdraw("api"))
}

func TestRetryBudgetRatio(t *testing.T) {
	b := NewRetryBudget(0.5, 0) // holds at most 1 token
	require.False(t, b.Withdraw("api"), "no reserve")
	b.Deposit("api")
	require.False(t, b.Withdraw("api"), "half a token is not a retry")
	b.Deposit("api")
	require.True(t, b.Withdraw("api"))
	require.False(t, b.Withdraw("api"))

	// Each request earns ratio of a retry: 0.25 x 4 = 1.
	b = NewRetryBudget(0.25, 2)
	require.Equal(t, 2, loDrainBudget(b, "api", 1000))
	for round := range 5 {
		for range 3 {
			b.Deposit("api")
			require.False(t, b.Withdraw("api"), "round %d", round)
		}
		b.Deposit("api")
		require.True(t, b.Withdraw("api"), "round %d: 4 requests earn one retry", round)
	}
}

// TestRetryBudgetTenthRatioEarnsOneRetryPerTenRequests: with the default
// ratio, 0.1, every request deposits a tenth of a token, so ten requests earn
// one retry. Summing 0.1 ten times in float64 gives 0.9999999999999999, which
// is below 1.
func TestRetryBudgetTenthRatioEarnsOneRetryPerTenRequests(t *testing.T) {
	b := NewRetryBudget(DefaultBudgetRatio, 0)
	for range 10 {
		b.Deposit("api")
	}
	require.True(t, b.Withdraw("api"), "10 requests at ratio 0.1 must earn 1 retry")

	// In the long run: 1000 requests after the reserve is spent earn 100
	// retries.
	b = NewRetryBudget(DefaultBudgetRatio, DefaultBudgetReserve)
	loDrainBudget(b, "api", 1000)
	retries := 0
	for range 1000 {
		b.Deposit("api")
		if b.Withdraw("api") {
			retries++
		}
	}
	require.Equal(t, 100, retries)
}

func TestRetryBudgetCap(t *testing.T) {
	b := NewRetryBudget(1, 3)
	for range 100 {
		b.Deposit("api")
	}
	require.Equal(t, 3, loDrainBudget(b, "api", 1000), "a key holds at most the reserve")

	// With no reserve, the cap is one token, whatever the ratio.
	b = NewRetryBudget(5, 0)
	require.False(t, b.Withdraw("api"))
	for range 10 {
		b.Deposit("api")
	}
	require.Equal(t, 1, loDrainBudget(b, "api", 1000))

	// An infinite ratio fills the bucket, no more.
	b = NewRetryBudget(math.Inf(1), 2)
	loDrainBudget(b, "api", 1000)
	b.Deposit("api")
	require.Equal(t, 2, loDrainBudget(b, "api", 1000))
}

func TestRetryBudgetPerKeyIsolation(t *testing.T) {
	b := NewRetryBudget(0.5, 2)
	require.Equal(t, 2, loDrainBudget(b, "a", 1000))
	require.False(t, b.Withdraw("a"))
	require.Equal(t, 2, loDrainBudget(b, "b", 1000), "draining a leaves b whole")
	for range 4 {
		b.Deposit("a")
	}
	require.False(t, b.Withdraw("b"), "deposits to a do not reach b")
	require.Equal(t, 2, loDrainBudget(b, "a", 1000))
	require.Equal(t, 2, loDrainBudget(b, "", 1000), "the empty key is a key like any other")
}

// TestRetryBudgetOddArguments: negative arguments count as 0, and so must a
// NaN ratio (as from 0/0 in a configuration computation): it must not turn
// the budget into an unlimited one.
func TestRetryBudgetOddArguments(t *testing.T) {
	t.Run("negative", func(t *testing.T) {
		b := NewRetryBudget(-1, -5)
		require.False(t, b.Withdraw("api"), "negative reserve counts as 0")
		for range 100 {
			b.Deposit("api")
		}
		require.False(t, b.Withdraw("api"), "negative ratio counts as 0")

		b = NewRetryBudget(-0.5, 2)
		for range 100 {
			b.Deposit("api")
		}
		require.Equal(t, 2, loDrainBudget(b, "api", 1000), "a negative ratio never drains the reserve")
	})
	t.Run("NaN ratio", func(t *testing.T) {
		b := NewRetryBudget(math.NaN(), 2)
		b.Deposit("api")
		require.Equal(t, 2, loDrainBudget(b, "api", 1000), "a NaN ratio must count as 0, not as unlimited")
	})
}

func TestRetryBudgetConcurrent(t *testing.T) {
	// One new key hit by 50 goroutines at once: one bucket, one reserve.
	b := NewRetryBudget(0, 100)
	var allowed atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range 10 {
				if b.Withdraw("new") {
					allowed.Add(1)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	require.EqualValues(t, 100, allowed.Load())

	// Deposits and withdrawals interleaved over a few keys: never more
	// retries than reserve + ratio x requests per key.
	b = NewRetryBudget(0.5, 10)
	perKey := make([]atomic.Int32, 3)
	for g := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := g % len(perKey)
			for range 20 {
				b.Deposit(strconv.Itoa(k))
				if b.Withdraw(strconv.Itoa(k)) {
					perKey[k].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for k := range perKey {
		// 10 goroutines x 20 requests per key.
		require.LessOrEqual(t, perKey[k].Load(), int32(10+0.5*200), "key %d", k)
		require.GreaterOrEqual(t, perKey[k].Load(), int32(0.5*200), "key %d: at least every second request", k)
	}
}

// TestRetryBudgetRefusalOnTransportErrors: once the budget is spent, a
// transport error is returned at once, wrapping both ErrRetryBudgetExhausted
// and the cause.
func TestRetryBudgetRefusalOnTransportErrors(t *testing.T) {
	loNoLeaks(t)
	addr := loClosedAddr(t)
	clk := loAutoClock()
	rt, _ := loTransport(t, clk, WithRetryBudget(NewRetryBudget(0, 2)))

	req, st := loRequest(t, context.Background(), http.MethodGet, "http://"+addr+"/", nil)
	_, err := rt.RoundTrip(req)
	require.ErrorIs(t, err, ErrRetryBudgetExhausted)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.Equal(t, 3, st.Attempts, "the reserve of 2 pays for 2 retries")

	req, st = loRequest(t, context.Background(), http.MethodGet, "http://"+addr+"/", nil)
	_, err = rt.RoundTrip(req)
	require.ErrorIs(t, err, ErrRetryBudgetExhausted)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.Equal(t, 1, st.Attempts)
	require.Len(t, clk.Sleeps(), 2)
}

// loOutageResult is what loRunOutage measured.
type loOutageResult struct {
	requests, attempts int
	perRequest         []int // attempts of each request, in the order requests started
}

// loRunOutage sends callers x each GETs from as many goroutines to a server
// that answers 503 to everything, and counts the attempts at the server.
func loRunOutage(t *testing.T, callers, each int, opts ...Option) loOutageResult {
	t.Helper()
	srv := loServe(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "down")
	})
	base := loBase(t)
	base.MaxIdleConnsPerHost = callers
	// The overload throttle would hold first attempts back in this outage
	// (TestOverloadThrottle), and the window of a key that names no quota
	// (learncap.go) would hold the callers in line, which an auto clock
	// cannot wait for (it jumps to their max wait): these runs measure the
	// budget alone.
	rt := NewTransport(base, append([]Option{WithClock(loAutoClock()), WithOverloadThrottle(0), WithoutPacing()}, opts...)...)

	var seq atomic.Int32
	type done struct{ seq, attempts int }
	results := make(chan done, callers*each)
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				st := new(Stats)
				req, err := http.NewRequestWithContext(ContextWithStats(context.Background(), st), http.MethodGet, srv.URL+"/", nil)
				if err != nil {
					t.Error(err)
					return
				}
				n := int(seq.Add(1))
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				if resp.StatusCode != http.StatusServiceUnavailable {
					t.Errorf("status %d", resp.StatusCode)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				results <- done{n, st.Attempts}
			}
		}()
	}
	wg.Wait()
	close(results)
	var all []done
	for d := range results {
		all = append(all, d)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].seq < all[j].seq })
	r := loOutageResult{requests: len(all), attempts: int(srv.hits.Load())}
	sum := 0
	for _, d := range all {
		r.perRequest = append(r.perRequest, d.attempts)
		sum += d.attempts
	}
	require.Equal(t, callers*each, r.requests)
	require.Equal(t, r.attempts, sum, "attempts seen by the server and by the callers")
	return r
}

// TestRetryBudgetBoundsOutageAmplification is the measurement: 50 callers x
// 20 GETs against a total 503 outage. The default budget must keep the load
// at most 1.2 attempts per request, overall and once the reserve is spent.
func TestRetryBudgetBoundsOutageAmplification(t *testing.T) {
	loNoLeaks(t)
	const callers, each, warmup = 50, 20, 100
	r := loRunOutage(t, callers, each)

	overall := float64(r.attempts) / float64(r.requests)
	rest := 0
	for _, a := range r.perRequest[warmup:] {
		rest += a
	}
	steady := float64(rest) / float64(r.requests-warmup)
	t.Logf("default budget, total 503 outage: %d requests, %d attempts: %.3f attempts/request overall, %.3f after the first %d requests",
		r.requests, r.attempts, overall, steady, warmup)
	require.LessOrEqual(t, overall, 1.2)
	require.LessOrEqual(t, steady, 1.2)
	// The documented bound: at most reserve + ratio x N retries.
	require.LessOrEqual(t, r.attempts-r.requests, DefaultBudgetReserve+int(DefaultBudgetRatio*float64(r.requests)))
}

// TestRetryBudgetDisabledMultipliesOutage: the same measurement without a
// budget gives DefaultMaxAttempts attempts per request, which the bounds
// above would reject.
func TestRetryBudgetDisabledMultipliesOutage(t *testing.T) {
	loNoLeaks(t)
	r := loRunOutage(t, 50, 20, WithRetryBudget(nil))
	t.Logf("no budget, total 503 outage: %d requests, %d attempts: %.3f attempts/request",
		r.requests, r.attempts, float64(r.attempts)/float64(r.requests))
	require.Equal(t, DefaultMaxAttempts*r.requests, r.attempts)
	for i, a := range r.perRequest {
		require.Equal(t, DefaultMaxAttempts, a, "request %d", i)
	}
}

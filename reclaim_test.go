package headway

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/internal/testkit/fakeclock"
	"github.com/headway-go/headway/pace"
)

// refusingTransport answers every request 429 with Retry-After: 1.
type refusingTransport struct{}

func (refusingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusTooManyRequests, Status: "429 Too Many Requests",
		Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody, Request: req}, nil
}

// reclaimHosts sends one request to each of n hosts through rt.
func reclaimHosts(t testing.TB, rt http.RoundTripper, from, n int) {
	for i := from; i < from+n; i++ {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://h%d.test/", i), nil)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
	}
}

// TestIdleKeysAreReclaimed: 20,000 distinct hosts that answered 429 leave
// per-key state behind (a pause, a retry budget, waiters); once it has
// expired, new keys sweep it away, so the memory a long-lived client holds
// is bounded by the keys it uses, not by every key it ever used.
func TestIdleKeysAreReclaimed(t *testing.T) {
	clk := fakeclock.New(loStart, true)
	rt := NewTransport(refusingTransport{}, WithClock(clk), WithMaxAttempts(1)).(*retryTransport)
	p := rt.next.(*pacer)
	store := p.store.(*pace.MemoryStore)
	budget := rt.c.budget.(*tokenBudget)
	count := func(m interface{ Range(func(k, v any) bool) }) int {
		n := 0
		m.Range(func(any, any) bool { n++; return true })
		return n
	}

	reclaimHosts(t, rt, 0, 20000)
	require.GreaterOrEqual(t, store.Len(), 20000-1024, "each host's pause is kept while it matters")

	clk.Advance(pace.DefaultIdleTTL + time.Minute) // every pause has ended, and the keys are idle
	reclaimHosts(t, rt, 20000, 3000)
	// The sweeps run beside the requests that made them due.
	require.Eventually(t, func() bool { return store.Len() < 5000 }, 5*time.Second, time.Millisecond,
		"expired pacing state is swept as new keys arrive")
	require.Eventually(t, func() bool { return count(&p.waiters) < 5000 }, 5*time.Second, time.Millisecond,
		"idle waiters are swept")
	require.Eventually(t, func() bool { return count(&budget.keys) < 5000 }, 5*time.Second, time.Millisecond,
		"idle retry budgets are swept")

	// A key still in use is kept.
	reclaimHosts(t, rt, 0, 1)
	_, ok := p.waiters.Load("h0.test")
	require.True(t, ok)
}

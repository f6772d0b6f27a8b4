package main

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/examples/sdk/internal/sdkrun"
)

const (
	rtt   = 20 * time.Millisecond
	calls = 100
)

// run runs calls Customers.Create from 8 goroutines through s in virtual
// time.
func run(t *testing.T, s setup) sdkrun.Result {
	t.Helper()
	var res sdkrun.Result
	synctest.Test(t, func(t *testing.T) {
		api := newAPI(nil)
		res = createCustomers(s, sdkrun.Memory{Handler: stripeDialect(api), RTT: rtt}, "http://api.stripe.test", api, calls, 8, rtt)
	})
	t.Log("\n" + sdkrun.Header + "\n" + res.String())
	return res
}

// TestREADME is the README's way: with the documented limit declared,
// every call succeeds and none is refused.
func TestREADME(t *testing.T) {
	res := run(t, setups[2])
	require.Equal(t, calls, res.Succeeded)
	require.Zero(t, res.Refused, "no 429s")
	require.LessOrEqual(t, res.Slowdown(), 1.1)
}

// TestLimitLearnt: without the declaration headway learns the limit from
// the 429s (Stripe sends nothing else), and retries them: every call
// succeeds, some attempts are refused.
func TestLimitLearnt(t *testing.T) {
	res := run(t, setups[1])
	require.Equal(t, calls, res.Succeeded)
	require.Positive(t, res.Refused)
}

// TestStripeGoAlone is the baseline: stripe-go does not retry a rate-limit
// 429, and calls fail.
func TestStripeGoAlone(t *testing.T) {
	res := run(t, setups[0])
	require.Positive(t, res.Failed)
}

// TestShouldRetry: headway takes Stripe-Should-Retry as the server's word.
// A 409 saying "true" is retried (the POST carries stripe-go's
// Idempotency-Key), a 500 saying "false" is not, although headway retries
// a keyed POST's 500 otherwise. stripe-go alone retries neither: it reads
// the header only on responses it does not take for errors.
func TestShouldRetry(t *testing.T) {
	const n = 10
	for _, tc := range []struct {
		s                setup
		wantOK, wantSent int
	}{
		{setups[2], n / 2, n + n/2},
		{setups[0], 0, n},
	} {
		var ok, sent int
		synctest.Test(t, func(t *testing.T) { ok, sent = verdictCalls(tc.s.transport, tc.s.retries, n, rtt) })
		t.Logf("%-44s %2d of %d succeeded, %2d attempts", tc.s.name, ok, n, sent)
		require.Equal(t, tc.wantOK, ok, tc.s.name)
		require.Equal(t, tc.wantSent, sent, tc.s.name)
	}
}

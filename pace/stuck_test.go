package pace

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/ratelimit"
)

// TestStuckBucketProbes: a key whose only candidate left is a bucket that
// no answer has measured the rate of, spent, with nothing in flight (a
// state a fleet reached through a shared store, captured from Redis in
// testdata/stuck-bucket.state), said "wait for an answer" for ever: three
// processes polled it for 60 s without a request going. Now a request goes
// to learn, and after a refusal another goes when the probe budget's
// trickle allows, within seconds.
func TestStuckBucketProbes(t *testing.T) {
	b, err := os.ReadFile("testdata/stuck-bucket.state")
	require.NoError(t, err)
	var st State
	require.NoError(t, st.UnmarshalBinary(b))
	now := time.Unix(0, 1795713359510116338) // when it was captured
	req := Request{Route: "GET /items"}

	d := st.Reserve(now, req, nil)
	require.True(t, d.OK, "a request goes to learn: %+v", d)
	d2 := st.Reserve(now, req, nil)
	require.False(t, d2.OK, "one at a time")

	// Refused: the next goes once the trickle has earned a probe.
	at := now.Add(20 * time.Millisecond)
	st.Complete(at, d.Lease, Answer{Obs: ratelimit.Observation{Status: 429}}, nil)
	for range 1000 {
		d = st.Reserve(at, req, nil)
		if d.OK {
			break
		}
		require.True(t, d.At.After(at), "asks again later: %+v", d)
		at = d.At
	}
	require.True(t, d.OK)
	require.Less(t, at.Sub(now), 20*time.Second, "the next request goes within seconds")
}

// TestPausedReservesKeepProbeBudget: requests held back by a pause do not
// spend the probe budget of a policy they never tested. A fleet's three
// processes polled a paused key for a second and left it no probe, so the
// key waited 7 s for the budget's trickle once the pause ended.
func TestPausedReservesKeepProbeBudget(t *testing.T) {
	var st State
	now := t0
	req := Request{Route: "GET /items"}
	d := st.Reserve(now, req, nil)
	require.True(t, d.OK)
	at := now.Add(5 * time.Millisecond)
	h := withHdr(ietf(50, 1, 0, 1), "Retry-After", "1")
	st.Complete(at, d.Lease, Answer{Obs: ratelimit.ParseHeaders(h, 429, at)}, nil)
	require.NotEmpty(t, st.k.policies)
	before := st.k.policies[0].probeTokens
	for i := range 90 {
		d := st.Reserve(at.Add(time.Duration(i)*10*time.Millisecond), req, nil)
		require.False(t, d.OK, "paused")
	}
	require.Equal(t, before, st.k.policies[0].probeTokens, "no probe went")
}

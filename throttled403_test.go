package headway

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestForbiddenThatIsARateLimit: a 403 that says it is a rate limit, as
// GitHub's primary (x-ratelimit-remaining 0) and secondary (Retry-After)
// limits answer, is retried like a 429, for any method, after the wait it
// names; a 403 that says neither is a refusal of access and comes back at
// once.
func TestForbiddenThatIsARateLimit(t *testing.T) {
	reset := func(d time.Duration) string { return strconv.FormatInt(start.Add(d).Unix(), 10) }
	tests := []struct {
		name      string
		method    string
		hdr       []string
		wantCalls int
		wantWait  time.Duration // at least
	}{
		{"secondary limit: Retry-After", "POST", []string{"Retry-After", "60"}, 2, 60 * time.Second},
		// The retry layer waits at least its floor; holding the retry
		// until the reset is the pacing layer's part (pace before
		// b83f1e0 held it the 30 s, pace at 5dc7455 does not).
		{"primary limit: remaining 0", "GET", []string{"Date", start.Format(http.TimeFormat), "X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", reset(30 * time.Second), "X-RateLimit-Resource", "core"}, 2, DefaultBaseDelay},
		{"access refused", "GET", []string{"X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4999"}, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, []reply{{status: 403, hdr: tc.hdr, body: `{"message":"limited"}`}, ok200()})
			resp, err, st := h.do(t, tc.method, "")
			require.NoError(t, err)
			require.Equal(t, tc.wantCalls, h.script.calls())
			if tc.wantCalls == 1 {
				require.Equal(t, 403, resp.StatusCode)
				require.Zero(t, st.Throttled)
				return
			}
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, 1, st.Throttled)
			require.GreaterOrEqual(t, st.Waited, tc.wantWait)
			require.LessOrEqual(t, st.Waited, max(tc.wantWait+2*time.Second, 31*time.Second))
		})
	}
}

// TestForbiddenRateLimitGivesUpTyped: when headway gives up on a 403 rate
// limit it returns a *RateLimitError with the 403's status.
func TestForbiddenRateLimitGivesUpTyped(t *testing.T) {
	h := newHarness(t, []reply{{status: 403, hdr: []string{"Retry-After", "999999"}}})
	_, err, _ := h.do(t, "GET", "")
	var rle *RateLimitError
	require.ErrorAs(t, err, &rle)
	require.Equal(t, 403, rle.StatusCode)
	require.Equal(t, ReasonWaitTooLong, rle.Reason)
}

package pace

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/ratelimit"
)

// TestOvertakenAnswersAreNoOthersSpending replays what throttled (GCRA,
// 50/s, a burst of 6, "X-RateLimit-Limit: 6" and whole-second resets and
// Retry-After) answered a headway client on loopback: a first burst that
// ended in a 429 and a second's pause, then six requests at once, whose
// answers came back out of the order the server counted them ("1 left"
// first). A window, a log or a bucket explains "1 left" by the three
// requests sent just before it, still in flight; a sliding counter, by its
// previous window. The answers were weighed as others' spending against
// every candidate but the counter, which was left alone in the running:
// the key went at six requests a second (the counter's pace) for 4.5 s
// where the bucket allows 50 (10.9 s for 300 requests in one run of ten,
// against 5.9 s). Requests in flight sent just before an answer's own are
// the client's, not others'.
func TestOvertakenAnswersAreNoOthersSpending(t *testing.T) {
	var st State
	cfg := &Config{}
	start := t0.Add(ms(528))
	at := func(us int) time.Time { return start.Add(time.Duration(us) * time.Microsecond) }
	answer := func(l Lease, recv time.Time, status, left int) {
		t.Helper()
		h := http.Header{}
		h.Set("Date", recv.UTC().Format(http.TimeFormat))
		h.Set("X-RateLimit-Limit", "6")
		h.Set("X-RateLimit-Remaining", strconv.Itoa(left))
		h.Set("X-RateLimit-Reset", "1")
		if status == http.StatusTooManyRequests {
			h.Set("Retry-After", "1")
		}
		date, ok := ratelimit.ParseDate(h.Get("Date"))
		require.True(t, ok)
		st.Complete(recv, l, Answer{Obs: ratelimit.ParseHeaders(h, status, recv), Date: date}, cfg)
	}
	reserve := func(now time.Time) Lease {
		t.Helper()
		d := st.Reserve(now, Request{}, cfg)
		require.True(t, d.OK, "at %v: %s %s", now.Sub(start), d.Why, d.Detail)
		return d.Lease
	}
	// A burst of six, then a seventh that the server refuses.
	first := reserve(at(0))
	answer(first, at(200), http.StatusOK, 5)
	var ls []Lease
	for i := range 5 {
		ls = append(ls, reserve(at(250+20*i)))
	}
	for i, l := range ls {
		answer(l, at(400+50*i), http.StatusOK, 4-i)
	}
	d := st.Reserve(at(700), Request{}, cfg)
	if d.OK {
		answer(d.Lease, at(800), http.StatusTooManyRequests, 0)
	}
	// After the pause: one request alone, then five at once.
	back := start.Add(time.Second + ms(1))
	shift := func(us int) time.Time { return back.Add(time.Duration(us) * time.Microsecond) }
	var l0 Lease
	for now := back; ; now = now.Add(ms(1)) {
		require.Less(t, now.Sub(back), 2*time.Second, "the pause never ended")
		if d := st.Reserve(now, Request{}, cfg); d.OK {
			l0, back = d.Lease, now
			break
		}
	}
	answer(l0, shift(200), http.StatusOK, 5)
	sent := []int{400, 410, 500, 700, 800}
	ls = ls[:0]
	for _, us := range sent {
		ls = append(ls, reserve(shift(us)))
	}
	// The server counted them in the order sent (4, 3, 2, 1, 0 left); the
	// fourth's answer came back first.
	answer(ls[3], shift(1000), http.StatusOK, 1)
	answer(ls[2], shift(1050), http.StatusOK, 2)
	answer(ls[1], shift(1060), http.StatusOK, 3)
	answer(ls[0], shift(1070), http.StatusOK, 4)
	answer(ls[4], shift(1100), http.StatusOK, 0)
	p := &st.k.policies[0]
	require.NotZero(t, p.plausible()&(1<<cBucket), "the bucket explains the answers: alive %05b, plausible %05b, scores %v", p.alive, p.plausible(), p.score)
	// What the bucket allows goes within a few of its refill intervals
	// (the counter's pace: a second).
	now := shift(1200)
	d = st.Reserve(now, Request{}, cfg)
	require.False(t, d.OK)
	require.Less(t, d.At.Sub(now), 300*time.Millisecond, "%s %s", d.Why, d.Detail)
}

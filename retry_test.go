package headway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/internal/testkit/fakeclock"
	"github.com/headway-go/headway/pace"
)

const apiURL = "https://api.test/v1/items"

// start is a fixed instant far from today, so that only Date-relative
// arithmetic gives the right waits.
var start = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

// reply is one canned response: status, headers (name, value pairs) and body.
type reply struct {
	status int
	hdr    []string
	body   string
	err    error
}

// script serves replies in order (repeating the last) and records requests.
type script struct {
	mu      sync.Mutex
	replies []reply
	seen    []seenRequest
}

type seenRequest struct {
	method string
	header http.Header
	body   string
}

func (s *script) respond(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	s.seen = append(s.seen, seenRequest{req.Method, req.Header.Clone(), string(body)})
	r := s.replies[min(len(s.seen)-1, len(s.replies)-1)]
	if r.err != nil {
		return nil, r.err
	}
	resp := httpmock.NewStringResponse(r.status, r.body)
	resp.Status = fmt.Sprintf("%d %s", r.status, http.StatusText(r.status))
	for i := 0; i+1 < len(r.hdr); i += 2 {
		resp.Header.Add(r.hdr[i], r.hdr[i+1])
	}
	resp.Request = req
	return resp, nil
}

func (s *script) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// harness is a headway transport over an httpmock transport, on fake time
// with a fixed random fraction.
type harness struct {
	clk    *fakeclock.Clock
	script *script
	client *http.Client
}

func newHarness(t *testing.T, replies []reply, opts ...Option) *harness {
	t.Helper()
	h := &harness{clk: fakeclock.New(start, true), script: &script{replies: replies}}
	mt := httpmock.NewMockTransport()
	mt.RegisterNoResponder(h.script.respond)
	opts = append([]Option{WithClock(h.clk), WithRandSource(&fracSource{fracs: []float64{0}})}, opts...)
	h.client = &http.Client{Transport: NewTransport(mt, opts...)}
	return h
}

func (h *harness) do(t *testing.T, method, body string, hdr ...string) (*http.Response, error, Stats) {
	t.Helper()
	return h.doCtx(t, context.Background(), method, body, hdr...)
}

func (h *harness) doCtx(t *testing.T, ctx context.Context, method, body string, hdr ...string) (*http.Response, error, Stats) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, apiURL, rd)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	var st Stats
	req = req.WithContext(ContextWithStats(req.Context(), &st))
	resp, err := h.client.Do(req)
	if resp != nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err, st
}

func ok200() reply { return reply{status: 200, body: "ok"} }

func TestRetryAfterIsHonouredInEveryForm(t *testing.T) {
	date := start.Add(-time.Hour) // the server's clock is an hour behind ours
	httpDate := func(d time.Duration) string { return date.Add(d).Format(http.TimeFormat) }
	tests := []struct {
		name string
		hdr  []string
		want time.Duration
	}{
		{"delay-seconds", []string{"Retry-After", "2"}, 2 * time.Second},
		{"fractional", []string{"Retry-After", "2.5"}, 2500 * time.Millisecond},
		{"fractional .0", []string{"Retry-After", "3.0"}, 3 * time.Second},
		{"IMF-fixdate vs Date", []string{"Date", httpDate(0), "Retry-After", httpDate(3 * time.Second)}, 3 * time.Second},
		{"UTC zone", []string{"Date", httpDate(0), "Retry-After", date.Add(4 * time.Second).Format("Mon, 02 Jan 2006 15:04:05 UTC")}, 4 * time.Second},
		{"RFC 850", []string{"Date", httpDate(0), "Retry-After", date.Add(5 * time.Second).Format("Monday, 02-Jan-06 15:04:05 GMT")}, 5 * time.Second},
		{"asctime", []string{"Date", httpDate(0), "Retry-After", date.Add(6 * time.Second).Format(time.ANSIC)}, 6 * time.Second},
		{"retry-after-ms", []string{"Retry-After-Ms", "150", "Retry-After", "1"}, 150 * time.Millisecond},
		{"x-ms-retry-after-ms", []string{"X-Ms-Retry-After-Ms", "1250"}, 1250 * time.Millisecond},
		// No licence to storm: a past, zero or garbage Retry-After on a 429
		// falls back to backoff, never below the base delay.
		{"past date", []string{"Date", httpDate(0), "Retry-After", httpDate(-time.Minute)}, DefaultBaseDelay},
		{"zero", []string{"Retry-After", "0"}, DefaultBaseDelay},
		{"negative", []string{"Retry-After", "-5"}, DefaultBaseDelay},
		{"garbage", []string{"Retry-After", "soon"}, DefaultBaseDelay},
		{"absent", nil, DefaultBaseDelay},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, []reply{{status: 429, hdr: tc.hdr}, ok200()})
			resp, err, st := h.do(t, "GET", "")
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, []time.Duration{tc.want}, h.clk.Sleeps())
			require.Equal(t, Stats{Attempts: 2, Retries: 1, Throttled: 1, Waited: tc.want}, st)
		})
	}
}

func TestRetryAfterSpreadIsPositiveAndSmall(t *testing.T) {
	h := newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", "2"}}, ok200()},
		WithRandSource(&fracSource{fracs: []float64{0.5}}))
	_, err, _ := h.do(t, "GET", "")
	require.NoError(t, err)
	// spread = frac * min(Retry-After/10, 1s) = 0.5 * 200ms; the backoff
	// (0.5 * 500ms) is shorter than the Retry-After.
	require.Equal(t, []time.Duration{2100 * time.Millisecond}, h.clk.Sleeps())
}

func TestRetryAfterReplacesALongerBackoff(t *testing.T) {
	// The backoff would say 0.5 * 1s; the server says 10ms, and knows best.
	h := newHarness(t, []reply{{status: 503, hdr: []string{"Retry-After-Ms", "10"}}, {status: 503}, ok200()},
		WithRandSource(&fracSource{fracs: []float64{0.5}}), WithBackoffDelays(time.Second, time.Minute))
	_, err, _ := h.do(t, "GET", "")
	require.NoError(t, err)
	// 10ms + 0.5 * 1ms of spread; then, with no Retry-After, backoff for
	// retry 2: 0.5 * 2s.
	require.Equal(t, []time.Duration{10500 * time.Microsecond, time.Second}, h.clk.Sleeps())
}

func TestHugeRetryAfterFailsFastWithTypedError(t *testing.T) {
	for _, v := range []string{"99999999999", "999999999999999999999999", "Fri, 31 Dec 9999 23:59:59 GMT"} {
		h := newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", v, "X-Request-Id", "abc"}, body: "slow   down\nplease"}})
		resp, err, st := h.do(t, "GET", "")
		require.Nil(t, resp)
		require.ErrorIs(t, err, ErrRateLimitExceeded)
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle)
		require.Equal(t, ReasonWaitTooLong, rle.Reason)
		require.Equal(t, 429, rle.StatusCode)
		require.Equal(t, 1, rle.Attempts)
		require.Equal(t, DefaultMaxWait, rle.Bound)
		require.True(t, rle.HasRetryAfter)
		require.Greater(t, rle.RetryAfter, 24*time.Hour)
		require.Equal(t, "abc", rle.Header.Get("X-Request-Id"))
		require.Equal(t, "slow   down\nplease", string(rle.Body))
		require.Empty(t, h.clk.Sleeps(), "gave up without sleeping")
		require.Equal(t, 1, h.script.calls())
		require.Equal(t, 1, st.Attempts)
		require.Contains(t, rle.Error(), "headway: rate limited: 429 Too Many Requests after 1 attempt")
		require.Contains(t, rle.Error(), "gave up: wait longer than max wait (1m0s)")
		require.Contains(t, rle.Error(), `body: "slow down please"`)
	}
}

func TestMaxWaitOption(t *testing.T) {
	h := newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", "11"}}}, WithMaxWait(10*time.Second))
	_, err, _ := h.do(t, "GET", "")
	var rle *RateLimitError
	require.ErrorAs(t, err, &rle)
	require.Equal(t, ReasonWaitTooLong, rle.Reason)
	require.Equal(t, 10*time.Second, rle.Bound)

	h = newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", "10"}}, ok200()}, WithMaxWait(10*time.Second))
	resp, err, _ := h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, []time.Duration{10 * time.Second}, h.clk.Sleeps())
}

// TestRateLimitErrorPolicies: the give-up carries the quotas of the last
// response and names the one that ran out.
func TestRateLimitErrorPolicies(t *testing.T) {
	h := newHarness(t, []reply{{status: 429, hdr: []string{
		"RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`,
		"RateLimit", `"burst";r=0;t=3600, "daily";r=900;t=40000`,
		"Retry-After", "3600",
	}}})
	_, err, _ := h.do(t, "GET", "")
	var rle *RateLimitError
	require.ErrorAs(t, err, &rle)
	require.Len(t, rle.Policies, 2)
	require.True(t, rle.Policies[0].Exhausted())
	require.False(t, rle.Policies[1].Exhausted())
	require.Contains(t, rle.Error(), `; quota exhausted: "burst" 0 of 100 requests left per 1m0s, resets in 1h0m0s; gave up`)

	// No quota ran out: none is named.
	h = newHarness(t, []reply{{status: 429, hdr: []string{"RateLimit", `"burst";r=3;t=3600`, "Retry-After", "3600"}}})
	_, err, _ = h.do(t, "GET", "")
	require.ErrorAs(t, err, &rle)
	require.Len(t, rle.Policies, 1)
	require.NotContains(t, rle.Error(), "quota exhausted")
}

func TestWaitPastDeadlineFailsFast(t *testing.T) {
	clk := fakeclock.New(time.Now(), true) // deadlines are on the real clock
	h := newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", "30"}}}, WithClock(clk))
	h.clk = clk
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err, _ := h.doCtx(t, ctx, "GET", "")
	var rle *RateLimitError
	require.ErrorAs(t, err, &rle)
	require.Equal(t, ReasonDeadline, rle.Reason)
	require.InDelta(t, 10, rle.Bound.Seconds(), 1)
	require.Contains(t, rle.Error(), "deadline too close")
	require.Empty(t, clk.Sleeps())

	// A 5xx whose wait cannot fit is returned as it came.
	h = newHarness(t, []reply{{status: 503, hdr: []string{"Retry-After", "30"}, body: "down"}}, WithClock(clk))
	resp, err, _ := h.doCtx(t, ctx, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 503, resp.StatusCode)
	require.Equal(t, 1, h.script.calls())
}

func TestGiveUpAfterMaxAttempts(t *testing.T) {
	h := newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", "1"}}})
	_, err, st := h.do(t, "GET", "")
	var rle *RateLimitError
	require.ErrorAs(t, err, &rle)
	require.Equal(t, ReasonAttemptsExhausted, rle.Reason)
	require.Equal(t, DefaultMaxAttempts, rle.Attempts)
	require.Equal(t, DefaultMaxAttempts, h.script.calls())
	require.Equal(t, 3*time.Second, rle.Waited)
	require.Equal(t, Stats{Attempts: 4, Retries: 3, Throttled: 4, Waited: 3 * time.Second}, st)
	require.Equal(t, "headway: rate limited: 429 Too Many Requests after 4 attempts (waited 3s), server asked to wait 1s; gave up: attempts exhausted", rle.Error())

	// A 5xx after the last attempt is returned as-is, body intact.
	h = newHarness(t, []reply{{status: 502, body: "bad gateway"}}, WithMaxAttempts(2))
	resp, err, _ := h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 502, resp.StatusCode)
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, "bad gateway", string(b))
	require.Equal(t, 2, h.script.calls())
}

func TestWhichStatusesAreRetried(t *testing.T) {
	for _, code := range []int{408, 429, 500, 502, 503, 504} {
		h := newHarness(t, []reply{{status: code}, ok200()})
		resp, err, _ := h.do(t, "GET", "")
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode, "status %d", code)
		require.Equal(t, 2, h.script.calls(), "status %d retried once", code)
	}
	for _, code := range []int{200, 201, 204, 301, 400, 401, 403, 404, 409, 422, 501, 505} {
		h := newHarness(t, []reply{{status: code}, ok200()})
		resp, err, _ := h.do(t, "GET", "")
		require.NoError(t, err)
		require.Equal(t, code, resp.StatusCode)
		require.Equal(t, 1, h.script.calls(), "status %d not retried", code)
	}
	h := newHarness(t, []reply{{status: 503}, {status: 418}, ok200()}, WithRetryStatuses(418))
	resp, err, _ := h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 503, resp.StatusCode, "503 no longer retried")
}

func TestNothingHappensTwiceByOurHand(t *testing.T) {
	t.Run("POST on 503 without key: sent once", func(t *testing.T) {
		h := newHarness(t, []reply{{status: 503}, ok200()})
		resp, err, _ := h.do(t, "POST", `{"amount":100}`)
		require.NoError(t, err)
		require.Equal(t, 503, resp.StatusCode)
		require.Equal(t, 1, h.script.calls())
	})
	t.Run("PATCH on 500 without key: sent once", func(t *testing.T) {
		h := newHarness(t, []reply{{status: 500}, ok200()})
		resp, err, _ := h.do(t, "PATCH", `x`)
		require.NoError(t, err)
		require.Equal(t, 500, resp.StatusCode)
		require.Equal(t, 1, h.script.calls())
	})
	t.Run("POST on 503 with key: same body and key", func(t *testing.T) {
		h := newHarness(t, []reply{{status: 503}, {status: 503}, ok200()})
		resp, err, _ := h.do(t, "POST", `{"amount":100}`, "Idempotency-Key", "k-1", "X-Trace", "t")
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, 3, h.script.calls())
		for _, s := range h.script.seen {
			require.Equal(t, `{"amount":100}`, s.body)
			require.Equal(t, "k-1", s.header.Get("Idempotency-Key"))
			require.Equal(t, "t", s.header.Get("X-Trace"))
		}
	})
	t.Run("POST on 429: retried, it was not processed", func(t *testing.T) {
		h := newHarness(t, []reply{{status: 429}, ok200()})
		resp, err, _ := h.do(t, "POST", `{"amount":100}`)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, 2, h.script.calls())
		require.Equal(t, h.script.seen[0].body, h.script.seen[1].body)
	})
	t.Run("PUT and DELETE are idempotent", func(t *testing.T) {
		for _, m := range []string{"PUT", "DELETE", "HEAD", "OPTIONS"} {
			h := newHarness(t, []reply{{status: 503}, ok200()})
			resp, err, _ := h.do(t, m, "")
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode, m)
		}
	})
	t.Run("WithIdempotencyKeys makes POST retryable", func(t *testing.T) {
		h := newHarness(t, []reply{{status: 503}, ok200(), {status: 503}, ok200()}, WithIdempotencyKeys())
		_, err, _ := h.do(t, "POST", "a")
		require.NoError(t, err)
		_, err, _ = h.do(t, "POST", "b")
		require.NoError(t, err)
		require.Equal(t, 4, h.script.calls())
		k := func(i int) string { return h.script.seen[i].header.Get("Idempotency-Key") }
		require.Regexp(t, "^[0-9a-f]{32}$", k(0))
		require.Equal(t, k(0), k(1))
		require.Equal(t, k(2), k(3))
		require.NotEqual(t, k(0), k(2))
	})
	t.Run("WithIdempotencyKeys keeps the caller's key", func(t *testing.T) {
		h := newHarness(t, []reply{{status: 503}, ok200()}, WithIdempotencyKeys())
		_, err, _ := h.do(t, "POST", "a", "Idempotency-Key", "mine")
		require.NoError(t, err)
		require.Equal(t, "mine", h.script.seen[1].header.Get("Idempotency-Key"))
	})
	t.Run("WithRetryAllMethods", func(t *testing.T) {
		h := newHarness(t, []reply{{status: 503}, ok200()}, WithRetryAllMethods())
		resp, err, _ := h.do(t, "POST", "a")
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
	})
	t.Run("transport error on POST after write: not retried", func(t *testing.T) {
		// httpmock does not write requests, so only errors that mean "not
		// written" may be retried for POST; a reset is ambiguous here and the
		// loopback tests cover the written case. ECONNREFUSED is safe.
		h := newHarness(t, []reply{{err: syscall.ECONNREFUSED}, ok200()})
		resp, err, _ := h.do(t, "POST", "a")
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, 2, h.script.calls())
	})
}

func TestServerOverridesWin(t *testing.T) {
	for _, name := range []string{"X-Should-Retry", "Stripe-Should-Retry"} {
		h := newHarness(t, []reply{{status: 503, hdr: []string{name, "false"}}, ok200()})
		resp, err, _ := h.do(t, "GET", "")
		require.NoError(t, err)
		require.Equal(t, 503, resp.StatusCode, name)
		require.Equal(t, 1, h.script.calls())

		// Stripe asks for retries of 409 lock conflicts, even of POSTs.
		h = newHarness(t, []reply{{status: 409, hdr: []string{name, "true"}}, ok200()})
		resp, err, _ = h.do(t, "POST", "x")
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode, name)
		require.Equal(t, 2, h.script.calls())

		h = newHarness(t, []reply{{status: 429, hdr: []string{name, "false", "Retry-After", "1"}}, ok200()})
		_, err, _ = h.do(t, "GET", "")
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle)
		require.Equal(t, ReasonServerDeclined, rle.Reason)
		require.Equal(t, 1, h.script.calls())
	}
	// "true" on a success means nothing.
	h := newHarness(t, []reply{{status: 200, hdr: []string{"X-Should-Retry", "true"}}, {status: 201}})
	resp, err, _ := h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
}

func TestTransportErrors(t *testing.T) {
	h := newHarness(t, []reply{{err: syscall.ECONNRESET}, {err: io.ErrUnexpectedEOF}, ok200()})
	resp, err, st := h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, 3, st.Attempts)

	// Not retried: errors no retry can cure.
	h = newHarness(t, []reply{{err: errors.New("unsupported protocol scheme")}, ok200()})
	_, err, _ = h.do(t, "GET", "")
	require.ErrorContains(t, err, "unsupported protocol scheme")
	require.Equal(t, 1, h.script.calls())

	// Exhausted: the last error is wrapped, still matchable.
	h = newHarness(t, []reply{{err: syscall.ECONNREFUSED}}, WithMaxAttempts(3))
	_, err, _ = h.do(t, "GET", "")
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.ErrorContains(t, err, "giving up after 3 attempt(s) (attempts exhausted)")
	require.Equal(t, 3, h.script.calls())
}

func TestRetryBudgetRefusalWrapsBoth(t *testing.T) {
	h := newHarness(t, []reply{{err: syscall.ECONNREFUSED}}, WithRetryBudget(NewRetryBudget(0, 1)))
	_, err, _ := h.do(t, "GET", "")
	require.ErrorIs(t, err, ErrRetryBudgetExhausted)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.Equal(t, 2, h.script.calls(), "the reserve of one retry was spent")

	// 429s are not charged to the budget.
	h = newHarness(t, []reply{{status: 429}, {status: 429}, ok200()}, WithRetryBudget(NewRetryBudget(0, 0)))
	resp, err, _ := h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	// A 5xx the budget refuses is returned as it came.
	h = newHarness(t, []reply{{status: 503, body: "down"}, ok200()}, WithRetryBudget(NewRetryBudget(0, 0)))
	resp, err, _ = h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 503, resp.StatusCode)
	require.Equal(t, 1, h.script.calls())
}

// TestCancelDuringWaitEndsPromptly: a cancel while headway waits to retry
// ends the request at once, and the typed error keeps what was learnt (the
// attempts, the last status, a 429's details) while wrapping ctx.Err(). Its
// message does not repeat the URL, which http.Client's *url.Error names.
func TestCancelDuringWaitEndsPromptly(t *testing.T) {
	for _, status := range []int{503, 429} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			clk := fakeclock.New(start, false) // sleeps block until the test moves time
			h := newHarness(t, []reply{{status: status, hdr: []string{"Retry-After", "20"}, body: "busy"}, ok200()}, WithClock(clk))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err, _ := h.doCtx(t, ctx, "GET", "")
				done <- err
			}()
			require.NoError(t, clk.WaitForPending(context.Background(), 1))
			cancel()
			err := <-done
			require.ErrorIs(t, err, context.Canceled)
			require.Equal(t, 1, strings.Count(err.Error(), apiURL), "the URL once: %v", err)
			require.Equal(t, 1, h.script.calls())
			if status == 429 {
				var rle *RateLimitError
				require.ErrorAs(t, err, &rle)
				require.ErrorIs(t, err, ErrRateLimitExceeded)
				require.Equal(t, ReasonCanceled, rle.Reason)
				require.Equal(t, 1, rle.Attempts)
				require.Equal(t, 429, rle.StatusCode)
				require.Equal(t, 20*time.Second, rle.RetryAfter)
				require.Equal(t, "busy", string(rle.Body))
				return
			}
			var re *RetryError
			require.ErrorAs(t, err, &re)
			require.Equal(t, ReasonCanceled, re.Reason)
			require.Equal(t, 1, re.Attempts)
			require.Equal(t, 503, re.StatusCode)
		})
	}
}

func TestOnRetryAndStats(t *testing.T) {
	var events []RetryEvent
	h := newHarness(t, []reply{{status: 503, hdr: []string{"Retry-After", "1"}}, {err: syscall.ECONNRESET}, ok200()},
		WithOnRetry(func(e RetryEvent) { events = append(events, e) }))
	_, err, st := h.do(t, "GET", "")
	require.NoError(t, err)
	require.Len(t, events, 2)
	require.Equal(t, 1, events[0].Attempt)
	require.Equal(t, 503, events[0].StatusCode)
	require.True(t, events[0].HasRetryAfter)
	require.Equal(t, time.Second, events[0].Wait)
	require.Equal(t, 2, events[1].Attempt)
	require.ErrorIs(t, events[1].Err, syscall.ECONNRESET)
	require.Equal(t, Stats{Attempts: 3, Retries: 2, Waited: time.Second + events[1].Wait}, st)
}

func TestCallersRequestAndClientUntouched(t *testing.T) {
	h := newHarness(t, []reply{{status: 503}, ok200()}, WithIdempotencyKeys())
	req, err := http.NewRequest("POST", apiURL, strings.NewReader("body"))
	require.NoError(t, err)
	req.Header.Set("X-A", "1")
	body := req.Body
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.Header{"X-A": {"1"}}, req.Header)
	require.True(t, body == req.Body, "the caller's Body field is unchanged")

	orig := &http.Client{Timeout: time.Second}
	w := Wrap(orig)
	require.Nil(t, orig.Transport)
	require.NotNil(t, w.Transport)
	require.Equal(t, time.Second, w.Timeout)
	require.NotNil(t, Wrap(nil).Transport)
	require.NotNil(t, New().Transport)
}

func TestPacingSharesAPauseAcrossRequests(t *testing.T) {
	// The first request is told to wait 10s and gives up (one attempt only);
	// the next request to the same host waits out the same pause before it
	// is sent, instead of earning its own 429.
	h := newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", "10"}}, ok200()}, WithMaxAttempts(1))
	_, err, _ := h.do(t, "GET", "")
	require.ErrorIs(t, err, ErrRateLimitExceeded)
	resp, err, st := h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, []time.Duration{10 * time.Second}, h.clk.Sleeps())
	require.Equal(t, 10*time.Second, st.Waited)

	// The retry layer's wait and the pause are not added up.
	h = newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", "10"}}, ok200()})
	_, err, st = h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, []time.Duration{10 * time.Second}, h.clk.Sleeps())
	require.Equal(t, 10*time.Second, st.Waited)

	// A pause longer than max wait is recorded all the same: the request
	// that got it fails fast with the server's answer, and later ones fail
	// at once without asking again, saying how long they would wait.
	h = newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", "600"}}, ok200()})
	_, err, _ = h.do(t, "GET", "")
	require.ErrorIs(t, err, ErrRateLimitExceeded)
	_, err, _ = h.do(t, "GET", "")
	var held *RateLimitError
	require.ErrorAs(t, err, &held)
	require.Zero(t, held.StatusCode)
	require.Equal(t, ReasonWaitTooLong, held.Reason)
	require.Equal(t, 10*time.Minute, held.Wait)
	require.Contains(t, held.Error(), "not sent: it would have waited 10m0s (paused by the server: Retry-After)")
	require.Equal(t, 1, h.script.calls())
	require.Empty(t, h.clk.Sleeps())
	h.clk.Advance(10 * time.Minute)
	resp, err, _ = h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)

	// A pause that cannot fit before a request's deadline refuses it at once.
	clk := fakeclock.New(time.Now(), true)
	h = newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", "30"}}, ok200()}, WithMaxAttempts(1), WithClock(clk))
	h.clk = clk
	_, err, _ = h.do(t, "GET", "")
	require.ErrorIs(t, err, ErrRateLimitExceeded)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err, st = h.doCtx(t, ctx, "GET", "")
	var rle *RateLimitError
	require.ErrorAs(t, err, &rle)
	require.Equal(t, 0, rle.StatusCode)
	require.Equal(t, ReasonDeadline, rle.Reason)
	require.Contains(t, rle.Error(), "not sent: it would have waited 30s (paused by the server: Retry-After)")
	require.Equal(t, 0, rle.Attempts)
	require.Equal(t, 0, st.Attempts)
	require.Equal(t, 1, h.script.calls(), "the second request was never sent")
	require.Empty(t, clk.Sleeps())

	// Without pacing the second request goes out at once.
	h = newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", "10"}}, ok200()}, WithMaxAttempts(1), WithoutPacing())
	_, err, _ = h.do(t, "GET", "")
	require.Error(t, err)
	resp, err, _ = h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Empty(t, h.clk.Sleeps())
}

func TestWithoutRetries(t *testing.T) {
	h := newHarness(t, []reply{{status: 429}, ok200()}, WithoutRetries())
	resp, err, _ := h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 429, resp.StatusCode)
	require.Equal(t, 1, h.script.calls())
}

// TestHugeRetryAfterPausesTheKeyBounded: an absurd Retry-After is clamped,
// fails the request that got it at once, and pauses the key for at most
// pace.DefaultMaxPause (a day), so that a misread value cannot block a host
// for years: later requests fail at once without asking the server again.
func TestHugeRetryAfterPausesTheKeyBounded(t *testing.T) {
	h := newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", "99999999999"}}, ok200()}, WithMaxWait(time.Second))
	for i := 0; i < 3; i++ {
		_, err, _ := h.do(t, "GET", "")
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle)
		require.Equal(t, ReasonWaitTooLong, rle.Reason)
		if i == 0 {
			require.Equal(t, 429, rle.StatusCode, "the first has the server's own answer")
		} else {
			require.Zero(t, rle.StatusCode, "the rest are not sent")
			require.Equal(t, pace.DefaultMaxPause, rle.Wait)
		}
	}
	require.Empty(t, h.clk.Sleeps(), "no request slept")
	require.Equal(t, 1, h.script.calls())
	h.clk.Advance(pace.DefaultMaxPause)
	resp, err, _ := h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
}

func TestStatsWithoutRetries(t *testing.T) {
	h := newHarness(t, []reply{{status: 429}}, WithoutRetries())
	_, err, st := h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, Stats{Attempts: 1, Throttled: 1}, st)
	h = newHarness(t, []reply{ok200()}, WithoutRetries(), WithoutPacing())
	_, err, st = h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, Stats{Attempts: 1}, st)
}

// closeCounter is a RoundTripper that counts CloseIdleConnections calls.
type closeCounter struct {
	http.RoundTripper
	n int
}

func (c *closeCounter) CloseIdleConnections() { c.n++ }

func TestCloseIdleConnectionsReachesTheBase(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithoutRetries()}, {WithoutPacing()}, {WithoutRetries(), WithoutPacing()}} {
		base := &closeCounter{RoundTripper: httpmock.NewMockTransport()}
		c := &http.Client{Transport: NewTransport(base, opts...)}
		c.CloseIdleConnections()
		require.Equal(t, 1, base.n)
	}
}

func TestLoggerReportsDecisions(t *testing.T) {
	var buf strings.Builder
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := newHarness(t, []reply{{status: 503, hdr: []string{"Retry-After", "1"}}, {status: 429, hdr: []string{"Retry-After", "3600"}}},
		WithLogger(logger))
	_, err, _ := h.do(t, "GET", "")
	require.ErrorIs(t, err, ErrRateLimitExceeded)
	out := buf.String()
	require.Contains(t, out, `level=DEBUG msg="headway: retrying" method=GET url=https://api.test/v1/items attempt=1 wait=1s status=503 retry_after=1s`)
	require.Contains(t, out, `level=INFO msg="headway: giving up" method=GET url=https://api.test/v1/items status=429 attempts=2 reason="wait longer than max wait"`)

	// A nil logger is silent, and costs nothing.
	h = newHarness(t, []reply{{status: 503}, ok200()}, WithLogger(nil))
	_, err, _ = h.do(t, "GET", "")
	require.NoError(t, err)
}

func TestPastOrZeroRetryAfterOn503IsNoLicenceToStorm(t *testing.T) {
	for _, v := range []string{"0", "Sun, 06 Nov 1994 08:49:37 GMT"} {
		h := newHarness(t, []reply{{status: 503, hdr: []string{"Retry-After", v}}, {status: 503, hdr: []string{"Retry-After", v}}, ok200()})
		_, err, _ := h.do(t, "GET", "")
		require.NoError(t, err)
		// The fixed random fraction 0 would make full jitter wait nothing.
		require.Equal(t, []time.Duration{DefaultBaseDelay, DefaultBaseDelay}, h.clk.Sleeps(), v)
	}
}

func TestPacingPauseIsNotPartOfTheAttemptTimeout(t *testing.T) {
	// The second request waits out a 10s pause, then gets its own 300ms
	// attempt timeout: the pause must not count against it (on the fake
	// clock, the pause's sleep moves time 10s at once).
	h := newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", "10"}}, ok200()},
		WithAttemptTimeout(300*time.Millisecond), WithMaxAttempts(1))
	_, err, _ := h.do(t, "POST", "x")
	require.ErrorIs(t, err, ErrRateLimitExceeded)
	resp, err, st := h.do(t, "POST", "x")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, 1, st.Attempts, "held, then sent once")
	require.Equal(t, 2, h.script.calls())
	require.Equal(t, "x", h.script.seen[1].body)
}

// oddTransport returns what it is told to, however wrong.
type oddTransport struct {
	resp *http.Response
	err  error
}

func (o oddTransport) RoundTrip(*http.Request) (*http.Response, error) { return o.resp, o.err }

// closeTracker is a body that records being closed.
type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error { c.closed = true; return nil }

func TestMisbehavingBaseTransport(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithoutPacing()}, {WithoutRetries()}} {
		req, _ := http.NewRequest("GET", apiURL, nil)
		rt := NewTransport(oddTransport{}, append(opts, WithMaxAttempts(1))...)
		resp, err := rt.RoundTrip(req)
		require.Nil(t, resp)
		require.ErrorContains(t, err, "neither a response nor an error")

		body := &closeTracker{Reader: strings.NewReader("x")}
		rt = NewTransport(oddTransport{resp: &http.Response{StatusCode: 200, Body: body}, err: syscall.ECONNRESET},
			append(opts, WithMaxAttempts(1))...)
		resp, err = rt.RoundTrip(req)
		require.Nil(t, resp, "a response or an error, never both")
		require.ErrorIs(t, err, syscall.ECONNRESET)
		require.True(t, body.closed, "the stray response's body was closed")
	}
	// No URL: an error, for every layer alone too.
	for _, opts := range [][]Option{nil, {WithoutPacing()}, {WithoutRetries()}} {
		body := &closeTracker{Reader: strings.NewReader("x")}
		_, err := NewTransport(oddTransport{}, opts...).RoundTrip(&http.Request{Method: "POST", Body: body, Header: http.Header{}})
		require.ErrorContains(t, err, "request has no URL")
		require.True(t, body.closed)
	}
}

func TestGiveUpErrorsKeepTimeouts(t *testing.T) {
	timeout := &net.DNSError{Err: "i/o timeout", Name: "api.test", IsTimeout: true}
	h := newHarness(t, []reply{{err: timeout}}, WithMaxAttempts(2))
	_, err, _ := h.do(t, "GET", "")
	var re *RetryError
	require.ErrorAs(t, err, &re)
	require.Equal(t, 2, re.Attempts)
	require.Equal(t, ReasonAttemptsExhausted, re.Reason)
	require.ErrorIs(t, err, timeout)
	var ue *url.Error
	require.ErrorAs(t, err, &ue)
	require.True(t, ue.Timeout(), "http.Client's url.Error still reports a timeout")

	h = newHarness(t, []reply{{err: timeout}}, WithRetryBudget(NewRetryBudget(0, 0)))
	_, err, _ = h.do(t, "GET", "")
	require.ErrorIs(t, err, ErrRetryBudgetExhausted)
	require.ErrorAs(t, err, &ue)
	require.True(t, ue.Timeout())
}

// TestHookSeesAnswersWithoutPacing: without pacing, a response under 400
// is not parsed for the retry decision (it never earns a retry), but the
// attempt hook still gets what it said.
func TestHookSeesAnswersWithoutPacing(t *testing.T) {
	var attempts []AttemptEvent
	h := newHarness(t, []reply{{status: 200, body: "ok", hdr: []string{"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "9"}}},
		WithoutPacing(), WithOnAttempt(func(e AttemptEvent) { attempts = append(attempts, e) }))
	resp, err, _ := h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Len(t, attempts, 1)
	require.Len(t, attempts[0].Observation.Policies, 1)
	require.EqualValues(t, 9, attempts[0].Observation.Policies[0].Remaining)
}

// TestHooks: WithOnAttempt reports every attempt with what its response
// said, WithOnDone each request's end once, and hooks given several times
// all run.
func TestHooks(t *testing.T) {
	var attempts []AttemptEvent
	var done []DoneEvent
	var first, second int
	h := newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", "1", "X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0"}}, ok200()},
		WithOnAttempt(func(e AttemptEvent) { attempts = append(attempts, e) }),
		WithOnDone(func(e DoneEvent) { done = append(done, e) }),
		WithOnRetry(func(RetryEvent) { first++ }), WithOnRetry(func(RetryEvent) { second++ }))
	resp, err, _ := h.do(t, "GET", "")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Len(t, attempts, 2)
	require.Equal(t, 429, attempts[0].StatusCode)
	require.Equal(t, 1, attempts[0].Attempt)
	require.Equal(t, "api.test", attempts[0].Key)
	require.Len(t, attempts[0].Observation.Policies, 1)
	require.EqualValues(t, 10, attempts[0].Observation.Policies[0].Limit)
	require.Equal(t, 200, attempts[1].StatusCode)
	require.Len(t, done, 1)
	require.Equal(t, DoneEvent{Request: done[0].Request, Key: "api.test", StatusCode: 200, Attempts: 2, Throttled: 1, Waited: time.Second}, done[0])
	require.Equal(t, 1, first)
	require.Equal(t, 1, second)

	// A request that fails reports its error.
	done = nil
	h = newHarness(t, []reply{{err: syscall.ECONNREFUSED}}, WithMaxAttempts(2), WithOnDone(func(e DoneEvent) { done = append(done, e) }))
	_, err, _ = h.do(t, "GET", "")
	require.Error(t, err)
	require.Len(t, done, 1)
	require.ErrorIs(t, done[0].Err, syscall.ECONNREFUSED)
	require.Equal(t, 2, done[0].Attempts)
}

// TestHookHearsOfAPanic: WithOnDone hears of a request whose transport
// panics (as an error), and the panic goes on to the caller. Since the hook
// ran after the retry loop rather than in a defer, it missed such a
// request: an OpenTelemetry request counter (otelheadway) skipped it.
func TestHookHearsOfAPanic(t *testing.T) {
	var done []DoneEvent
	rt := NewTransport(loRTFunc(func(*http.Request) (*http.Response, error) { panic("boom") }),
		WithOnDone(func(e DoneEvent) { done = append(done, e) }))
	req, err := http.NewRequest(http.MethodGet, apiURL, nil)
	require.NoError(t, err)
	require.PanicsWithValue(t, "boom", func() { rt.RoundTrip(req) })
	require.Len(t, done, 1)
	require.ErrorContains(t, done[0].Err, "panic in the transport below: boom")
	require.Zero(t, done[0].StatusCode)
}

// TestCanceledWhileHeldIsTyped: a request whose context ends while the
// pacing layer holds it back, in a pause or in its key's line behind an
// earlier request, fails with a *RateLimitError (ReasonCanceled, StatusCode
// 0) that wraps the context's error, as the README says, not a plain error.
func TestCanceledWhileHeldIsTyped(t *testing.T) {
	clk := fakeclock.New(start, false)
	h := newHarness(t, []reply{{status: 429, hdr: []string{"Retry-After", "10"}}, ok200(), ok200()}, WithMaxAttempts(1), WithClock(clk))
	h.clk = clk
	_, err, _ := h.do(t, "GET", "")
	require.ErrorIs(t, err, ErrRateLimitExceeded)

	// Two requests wait out the pause: the first in the pause, the second
	// in line behind it.
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel1()
	errs := make(chan error, 2)
	go func() { _, err, _ := h.doCtx(t, ctx1, "GET", ""); errs <- err }()
	require.NoError(t, clk.WaitForPending(context.Background(), 1))
	go func() { _, err, _ := h.doCtx(t, ctx2, "GET", ""); errs <- err }()
	p := h.client.Transport.(*retryTransport).next.(*pacer)
	require.Eventually(t, func() bool { // the second is in the key's line
		v, ok := p.waiters.Load("api.test")
		if !ok {
			return false
		}
		kw := v.(*keyWaiters)
		kw.mu.Lock()
		defer kw.mu.Unlock()
		return kw.main.n == 1
	}, 5*time.Second, time.Millisecond)

	cancel2()
	err = <-errs
	var rle *RateLimitError
	require.ErrorAs(t, err, &rle, "in line: %v", err)
	require.Equal(t, ReasonCanceled, rle.Reason)
	require.Zero(t, rle.StatusCode)
	require.ErrorIs(t, err, context.Canceled)
	require.Contains(t, rle.Why, "waiting for the earlier requests")

	clk.Advance(4 * time.Second)
	cancel1()
	err = <-errs
	require.ErrorAs(t, err, &rle, "in the pause: %v", err)
	require.Equal(t, ReasonCanceled, rle.Reason)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 6*time.Second, rle.Wait, "what was left of the pause")
	require.Contains(t, rle.Error(), "not sent: it would have waited 6s (paused by the server: Retry-After) (waited 4s); gave up: context done while waiting (context canceled)")
	require.Equal(t, 1, h.script.calls(), "nothing was sent")
}

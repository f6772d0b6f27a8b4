package ratelimittest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/headway-go/headway/internal/testkit/fakeclock"
	rlt "github.com/headway-go/headway/ratelimittest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start is 250ms into a second, so window ends and roundings show.
var start = time.Date(2026, 11, 26, 12, 0, 0, 250_000_000, time.UTC)

// call sends one request through h and returns the recorded response.
func call(h http.Handler, hdr ...string) *http.Response {
	req := httptest.NewRequest(http.MethodGet, "http://api.test/v1/items", nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func newHandler(t *testing.T, opts ...rlt.Option) (*rlt.Handler, *rlt.ManualClock) {
	t.Helper()
	clock := rlt.NewManualClock(start)
	h, err := rlt.NewHandler(nil, append([]rlt.Option{rlt.WithClock(clock)}, opts...)...)
	require.NoError(t, err)
	return h, clock
}

func statuses(h http.Handler, n int, hdr ...string) []int {
	var out []int
	for range n {
		out = append(out, call(h, hdr...).StatusCode)
	}
	return out
}

func repeat(code, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = code
	}
	return out
}

// Concurrent requests at one instant: every algorithm admits exactly its
// quota, no more, whatever the interleaving.
func TestConcurrentRequestsAdmitExactlyTheQuota(t *testing.T) {
	for _, alg := range rlt.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			h, _ := newHandler(t, rlt.WithQuota(rlt.Quota{Algorithm: alg, Limit: 37, Window: time.Minute}))
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					for range 25 {
						res := call(h)
						_, _ = io.Copy(io.Discard, res.Body)
					}
				})
			}
			wg.Wait()
			st := h.Stats()
			require.Equal(t, int64(37), st.Served)
			require.Equal(t, int64(16*25-37), st.Rejected)
			require.Len(t, h.Admissions(), 37)
		})
	}
}

// Stacked policies: a request passes only if all admit it, and a refusal
// charges none of them.
func TestStackedPoliciesAdmitOnlyWhenAllAdmit(t *testing.T) {
	h, clock := newHandler(t,
		rlt.WithQuota(rlt.Quota{Name: "burst", Limit: 3, Window: time.Second}),
		rlt.WithQuota(rlt.Quota{Name: "daily", Limit: 5, Window: 24 * time.Hour}),
		rlt.WithDialect(rlt.IETF))
	require.Equal(t, []int{200, 200, 200, 429}, statuses(h, 4))
	clock.Advance(time.Second)
	require.Equal(t, []int{200, 200, 429, 429}, statuses(h, 4))
	// The daily quota refused the last two; the burst policy was not
	// charged for them.
	res := call(h)
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	require.Equal(t, `"burst";q=3;w=1, "daily";q=5;w=86400`, res.Header.Get("RateLimit-Policy"))
	require.Equal(t, `"burst";r=1;t=1, "daily";r=0;t=43199`, res.Header.Get("RateLimit"))
	require.Equal(t, "43199", res.Header.Get("Retry-After"), "until the day ends at midnight UTC")
}

func TestPartitions(t *testing.T) {
	policy := rlt.WithQuota(rlt.Quota{Limit: 2, Window: time.Second})
	t.Run("by header", func(t *testing.T) {
		h, _ := newHandler(t, policy, rlt.WithPartition(rlt.ByHeader("X-Api-Key")))
		require.Equal(t, []int{200, 200, 429}, statuses(h, 3, "X-Api-Key", "alice"))
		require.Equal(t, []int{200, 200, 429}, statuses(h, 3, "X-Api-Key", "bob"))
		require.Equal(t, []int{200, 200, 429}, statuses(h, 3), "no key: the quota of the empty key")
		st := h.Stats()
		require.Equal(t, rlt.KeyStats{Served: 2, Rejected: 1}, st.Keys["alice"])
		require.Equal(t, rlt.KeyStats{Served: 2, Rejected: 1}, st.Keys[""])
		require.Len(t, st.Keys, 3)
	})
	t.Run("by client address", func(t *testing.T) {
		h, _ := newHandler(t, policy, rlt.WithPartition(rlt.ByClientAddr()))
		send := func(addr string) int {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.RemoteAddr = addr
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec.Code
		}
		require.Equal(t, 200, send("10.0.0.1:1000"))
		require.Equal(t, 200, send("10.0.0.1:1001"), "another port, the same client")
		require.Equal(t, 429, send("10.0.0.1:1002"))
		require.Equal(t, 200, send("[::1]:80"))
	})
	t.Run("shared", func(t *testing.T) {
		h, _ := newHandler(t, policy)
		require.Equal(t, 200, call(h, "X-Api-Key", "a").StatusCode)
		require.Equal(t, 200, call(h, "X-Api-Key", "b").StatusCode)
		require.Equal(t, 429, call(h, "X-Api-Key", "c").StatusCode, "every key spends the one quota")
	})
}

// The exact headers of each dialect, on a fixed window of 5 per second
// entered 250ms into a second: three admitted, then the quota spent.
func TestDialectHeaders(t *testing.T) {
	epoch := start.Unix() // 12:00:00
	reset := strconv.FormatInt(epoch+1, 10)
	cases := []struct {
		d        rlt.Dialect
		ok, last map[string]string // after the first request; on the refusal
	}{
		{rlt.IETF,
			map[string]string{"RateLimit-Policy": `"api";q=5;w=1`, "RateLimit": `"api";r=4;t=1`},
			map[string]string{"RateLimit-Policy": `"api";q=5;w=1`, "RateLimit": `"api";r=0;t=1`}},
		{rlt.IETFDraft07,
			map[string]string{"RateLimit-Policy": `5;w=1`, "RateLimit": `limit=5, remaining=4, reset=1`},
			map[string]string{"RateLimit-Policy": `5;w=1`, "RateLimit": `limit=5, remaining=0, reset=1`}},
		{rlt.IETFDraft04,
			map[string]string{"RateLimit-Policy": `5;w=1`, "RateLimit-Limit": "5", "RateLimit-Remaining": "4", "RateLimit-Reset": "1"},
			map[string]string{"RateLimit-Limit": "5", "RateLimit-Remaining": "0", "RateLimit-Reset": "1"}},
		{rlt.XRateLimit,
			map[string]string{"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "4", "X-RateLimit-Reset": reset},
			map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}},
		{rlt.GitHub,
			map[string]string{"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "4", "X-RateLimit-Used": "1", "X-RateLimit-Reset": reset, "X-RateLimit-Resource": "api"},
			map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Used": "5"}},
		{rlt.OpenAI,
			map[string]string{"X-Ratelimit-Limit-Requests": "5", "X-Ratelimit-Remaining-Requests": "4", "X-Ratelimit-Reset-Requests": "750ms",
				"X-Ratelimit-Limit-Tokens": "1000", "X-Ratelimit-Remaining-Tokens": "900", "X-Ratelimit-Reset-Tokens": "750ms"},
			map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "750ms", "X-Ratelimit-Remaining-Tokens": "500"}},
		{rlt.Anthropic,
			map[string]string{"Anthropic-Ratelimit-Requests-Limit": "5", "Anthropic-Ratelimit-Requests-Remaining": "4",
				"Anthropic-Ratelimit-Requests-Reset": "2026-11-26T12:00:01Z", "Anthropic-Ratelimit-Tokens-Limit": "1000"},
			map[string]string{"Anthropic-Ratelimit-Requests-Remaining": "0", "Anthropic-Ratelimit-Tokens-Remaining": "500"}},
		{rlt.Discord,
			map[string]string{"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "4", "X-RateLimit-Reset": reset, "X-RateLimit-Reset-After": "0.75",
				"X-RateLimit-Bucket": "", "X-RateLimit-Scope": ""},
			map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "0.75", "X-RateLimit-Scope": "shared"}},
		{rlt.Shopify,
			map[string]string{"X-Shopify-Shop-Api-Call-Limit": "1/5"},
			map[string]string{"X-Shopify-Shop-Api-Call-Limit": "5/5"}},
	}
	for _, c := range cases {
		t.Run(string(c.d), func(t *testing.T) {
			h, _ := newHandler(t, rlt.WithDialect(c.d),
				rlt.WithQuota(rlt.Quota{Name: "api", Limit: 5, Window: time.Second}),
				rlt.WithQuota(rlt.Quota{Name: "tpm", Limit: 1000, Window: time.Second, Unit: rlt.UnitTokens, Cost: rlt.CostFromHeader("X-Tokens", 100)}))
			res := call(h)
			require.Equal(t, 200, res.StatusCode)
			require.Equal(t, "Thu, 26 Nov 2026 12:00:00 GMT", res.Header.Get("Date"))
			for k, v := range c.ok {
				if k == "X-RateLimit-Bucket" {
					require.Regexp(t, `^[0-9a-f]{16}$`, res.Header.Get(k))
					continue
				}
				require.Equal(t, v, res.Header.Get(k), k)
			}
			require.Equal(t, []int{200, 200, 200, 200}, statuses(h, 4))
			res = call(h)
			require.Equal(t, 429, res.StatusCode)
			require.Equal(t, "1", res.Header.Get("Retry-After"))
			for k, v := range c.last {
				require.Equal(t, v, res.Header.Get(k), k)
			}
			if c.d == rlt.Discord {
				var body struct {
					Message        string  `json:"message"`
					RetryAfterForm float64 `json:"retry_after"`
					Global         *bool   `json:"global"`
				}
				require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
				require.Equal(t, 0.75, body.RetryAfterForm)
				require.NotNil(t, body.Global)
				require.False(t, *body.Global)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		h, _ := newHandler(t, rlt.WithDialect(rlt.None), rlt.WithQuota(rlt.Quota{Limit: 1, Window: time.Second}))
		for k := range call(h).Header {
			require.Contains(t, []string{"Date", "Content-Type"}, k)
		}
		res := call(h)
		require.Equal(t, 429, res.StatusCode)
		require.Equal(t, "1", res.Header.Get("Retry-After"))
	})
	t.Run("several at once", func(t *testing.T) {
		h, _ := newHandler(t, rlt.WithDialect(rlt.IETFDraft04, rlt.XRateLimit, rlt.OpenAI, rlt.Anthropic, rlt.Shopify))
		res := call(h)
		require.Equal(t, "9", res.Header.Get("RateLimit-Remaining"))
		require.Equal(t, "9", res.Header.Get("X-RateLimit-Remaining"))
		require.Equal(t, "9", res.Header.Get("X-Ratelimit-Remaining-Requests"))
		require.Equal(t, "9", res.Header.Get("Anthropic-Ratelimit-Requests-Remaining"))
		require.Equal(t, "1/10", res.Header.Get("X-Shopify-Shop-Api-Call-Limit"))
	})
	t.Run("partition key", func(t *testing.T) {
		h, _ := newHandler(t, rlt.WithPartition(rlt.ByHeader("X-Api-Key")))
		a, b := call(h, "X-Api-Key", "alice").Header.Get("RateLimit"), call(h, "X-Api-Key", "bob").Header.Get("RateLimit")
		require.Regexp(t, `^"10-per-1s";r=9;t=1;pk=:[A-Za-z0-9+/]{11}=:$`, a)
		require.NotEqual(t, a, b)
		require.NotContains(t, a, "alice", "the key may be a secret")
	})
}

// Retry-After rounds up in both forms, so waiting as told is enough.
func TestRetryAfterForms(t *testing.T) {
	policy := rlt.WithQuota(rlt.Quota{Algorithm: rlt.TokenBucket, Limit: 2, Window: 3 * time.Second, Burst: 1})
	for _, c := range []struct {
		form rlt.RetryAfterForm
		skew time.Duration
		want string
	}{
		{rlt.RetryAfterSeconds, 0, "2"}, // 1.5s, rounded up
		{rlt.RetryAfterDate, 0, "Thu, 26 Nov 2026 12:00:02 GMT"},
		{rlt.RetryAfterDate, -time.Hour, "Thu, 26 Nov 2026 11:00:02 GMT"},
		{rlt.RetryAfterSeconds, time.Hour, "2"},
		{rlt.RetryAfterNone, 0, ""},
	} {
		t.Run(string(c.form)+c.skew.String(), func(t *testing.T) {
			h, _ := newHandler(t, policy, rlt.WithRetryAfter(c.form), rlt.WithDateSkew(c.skew))
			require.Equal(t, 200, call(h).StatusCode)
			res := call(h)
			require.Equal(t, 429, res.StatusCode)
			require.Equal(t, c.want, res.Header.Get("Retry-After"))
			_, has := res.Header["Retry-After"]
			require.Equal(t, c.want != "", has)
			require.Equal(t, start.Add(c.skew).Format(http.TimeFormat), res.Header.Get("Date"))
		})
	}
	t.Run("a cost that can never fit", func(t *testing.T) {
		h, _ := newHandler(t, rlt.WithQuota(rlt.Quota{Limit: 5, Window: time.Second, Cost: rlt.CostFromHeader("X-Cost", 1)}))
		res := call(h, "X-Cost", "6")
		require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, "no wait would help: not a 429")
		require.Empty(t, res.Header.Get("Retry-After"))
		res = call(h, "X-Cost", "9223372036854775807")
		require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
		require.Equal(t, 200, call(h, "X-Cost", "5").StatusCode)
	})
	t.Run("status", func(t *testing.T) {
		h, _ := newHandler(t, rlt.WithQuota(rlt.Quota{Limit: 1, Window: time.Second}), rlt.WithRejectStatus(403))
		require.Equal(t, []int{200, 403}, statuses(h, 2))
	})
}

func TestFaults(t *testing.T) {
	t.Run("server errors", func(t *testing.T) {
		h, _ := newHandler(t, rlt.WithQuota(rlt.Quota{Limit: 100, Window: time.Second}),
			rlt.WithServerErrors(rlt.ServerErrors{Every: 5, Burst: 2}))
		require.Equal(t, []int{200, 200, 200, 503, 503, 200, 200, 200, 503, 503}, statuses(h, 10))
		st := h.Stats()
		require.Equal(t, int64(10), st.Served, "a failed request still spent quota")
		require.Equal(t, int64(4), st.Failed)
	})
	t.Run("dropped connections", func(t *testing.T) {
		srv := rlt.NewServer(nil, rlt.WithQuota(rlt.Quota{Limit: 100, Window: time.Second}), rlt.WithDroppedConnections(3))
		defer srv.Close()
		// A new connection per request: net/http silently retries an
		// idempotent request whose reused connection closes unanswered.
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		var errs int
		for range 6 {
			res, err := client.Get(srv.URL)
			if err != nil {
				errs++
				continue
			}
			_, _ = io.Copy(io.Discard, res.Body)
			require.NoError(t, res.Body.Close())
			require.Equal(t, 200, res.StatusCode)
		}
		require.Equal(t, 2, errs)
		require.Equal(t, int64(2), srv.Stats().Dropped)
		client.CloseIdleConnections()
	})
	t.Run("latency", func(t *testing.T) {
		clock := fakeclock.New(start, true) // Sleep advances time at once
		h, err := rlt.NewHandler(nil, rlt.WithClock(clock), rlt.WithLatency(300*time.Millisecond),
			rlt.WithQuota(rlt.Quota{Limit: 1, Window: time.Second}))
		require.NoError(t, err)
		require.Equal(t, []int{200, 429, 200}, statuses(h, 3), "at 0.55s, 0.85s, then 1.15s: a new window")
		require.Equal(t, []time.Duration{300 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}, clock.Sleeps())
		adm := h.Admissions()
		require.Equal(t, start.Add(300*time.Millisecond), adm[0].Time)
	})
	t.Run("latency ends with the client", func(t *testing.T) {
		h, err := rlt.NewHandler(nil, rlt.WithLatency(time.Hour))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
		h.ServeHTTP(httptest.NewRecorder(), req)
		require.Zero(t, h.Stats().Served+h.Stats().Rejected)
	})
	t.Run("misleading headers", func(t *testing.T) {
		h, clock := newHandler(t, rlt.WithMisleadingHeaders(), rlt.WithDialect(rlt.IETF),
			rlt.WithQuota(rlt.Quota{Name: "burst", Limit: 2, Window: time.Second}),
			rlt.WithQuota(rlt.Quota{Name: "hourly", Limit: 100, Window: time.Hour}))
		res := call(h)
		require.Equal(t, `"hourly";r=99;t=3600`, res.Header.Get("RateLimit"), "only the looser policy")
		require.Equal(t, `"hourly";q=100;w=3600`, res.Header.Get("RateLimit-Policy"))
		require.Equal(t, 200, call(h).StatusCode)
		res = call(h)
		require.Equal(t, 429, res.StatusCode)
		require.Equal(t, `"burst";r=0;t=1`, res.Header.Get("RateLimit"), "the refusing policy shows only on its refusal")
		clock.Advance(time.Second)
		require.Equal(t, `"hourly";r=97;t=3599`, call(h).Header.Get("RateLimit"))
	})
	t.Run("missing headers", func(t *testing.T) {
		h, _ := newHandler(t, rlt.WithMissingHeaders(2), rlt.WithQuota(rlt.Quota{Limit: 2, Window: time.Second}))
		var has []bool
		for range 4 {
			res := call(h)
			has = append(has, res.Header.Get("RateLimit") != "")
			if res.StatusCode == 429 {
				require.NotEmpty(t, res.Header.Get("Retry-After"), "Retry-After stays")
			}
		}
		require.Equal(t, []bool{true, false, true, false}, has)
	})
	t.Run("skewed date", func(t *testing.T) {
		h, _ := newHandler(t, rlt.WithDateSkew(-90*time.Second), rlt.WithDialect(rlt.XRateLimit, rlt.IETF))
		res := call(h)
		require.Equal(t, start.Add(-90*time.Second).Format(http.TimeFormat), res.Header.Get("Date"))
		require.Equal(t, strconv.FormatInt(start.Unix()-90+1, 10), res.Header.Get("X-RateLimit-Reset"), "absolute times move with the Date")
		require.Equal(t, `"10-per-1s";r=9;t=1`, res.Header.Get("RateLimit"), "delays do not")
	})
}

func TestAdmissionLog(t *testing.T) {
	h, clock := newHandler(t, rlt.WithAdmissionLog(3), rlt.WithQuota(rlt.Quota{Limit: 100, Window: time.Second}),
		rlt.WithPartition(rlt.ByHeader("K")))
	for i := range 5 {
		call(h, "K", strconv.Itoa(i))
		clock.Advance(time.Millisecond)
	}
	require.Equal(t, []rlt.Admission{
		{Time: start.Add(2 * time.Millisecond), Key: "2"},
		{Time: start.Add(3 * time.Millisecond), Key: "3"},
		{Time: start.Add(4 * time.Millisecond), Key: "4"},
	}, h.Admissions())

	h, _ = newHandler(t, rlt.WithAdmissionLog(0))
	call(h)
	require.Empty(t, h.Admissions())
	require.Equal(t, int64(1), h.Stats().Served)
}

func TestInvalidOptions(t *testing.T) {
	for name, opt := range map[string]rlt.Option{
		"zero limit":       rlt.WithQuota(rlt.Quota{Limit: 0, Window: time.Second}),
		"short window":     rlt.WithQuota(rlt.Quota{Limit: 1, Window: time.Microsecond}),
		"negative burst":   rlt.WithQuota(rlt.Quota{Limit: 1, Window: time.Second, Burst: -1}),
		"unknown algo":     rlt.WithQuota(rlt.Quota{Algorithm: "leaky", Limit: 1, Window: time.Second}),
		"unknown unit":     rlt.WithQuota(rlt.Quota{Unit: "bytes", Limit: 1, Window: time.Second}),
		"huge numbers":     rlt.WithQuota(rlt.Quota{Algorithm: rlt.TokenBucket, Limit: 7, Window: 1000 * time.Hour, Burst: 1 << 40}),
		"huge log":         rlt.WithQuota(rlt.Quota{Algorithm: rlt.SlidingLog, Limit: 1 << 30, Window: time.Second}),
		"anchored bucket":  rlt.WithQuota(rlt.Quota{Algorithm: rlt.TokenBucket, Limit: 1, Window: time.Second, Anchor: rlt.AnchorFirstRequest}),
		"unknown anchor":   rlt.WithQuota(rlt.Quota{Limit: 1, Window: time.Second, Anchor: "midnight"}),
		"dialect":          rlt.WithDialect("ietf-draft-99"),
		"clashing drafts":  rlt.WithDialect(rlt.IETF, rlt.IETFDraft04),
		"clashing x-":      rlt.WithDialect(rlt.OpenAI, rlt.GitHub, rlt.Discord),
		"retry-after":      rlt.WithRetryAfter("soon"),
		"status":           rlt.WithRejectStatus(200),
		"errors":           rlt.WithServerErrors(rlt.ServerErrors{Every: 2, Burst: 3}),
		"error status":     rlt.WithServerErrors(rlt.ServerErrors{Every: 2, Burst: 1, Status: 429}),
		"drops":            rlt.WithDroppedConnections(0),
		"latency":          rlt.WithLatency(-time.Second),
		"missing":          rlt.WithMissingHeaders(0),
		"log":              rlt.WithAdmissionLog(-1),
		"nil clock":        rlt.WithClock(nil),
		"nil partitioning": rlt.WithPartition(nil),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := rlt.NewHandler(nil, opt)
			require.Error(t, err)
			require.Contains(t, err.Error(), "ratelimittest:")
			require.Panics(t, func() { rlt.NewServer(nil, opt) })
		})
	}
}

func TestParseNames(t *testing.T) {
	for _, a := range rlt.Algorithms() {
		got, err := rlt.ParseAlgorithm(" " + string(a) + " ")
		require.NoError(t, err)
		require.Equal(t, a, got)
	}
	got, err := rlt.ParseAlgorithm("Token_Bucket")
	require.NoError(t, err)
	require.Equal(t, rlt.TokenBucket, got)
	_, err = rlt.ParseAlgorithm("leaky")
	require.ErrorContains(t, err, "fixed-window, sliding-log")

	for _, d := range rlt.Dialects() {
		got, err := rlt.ParseDialect(string(d))
		require.NoError(t, err)
		require.Equal(t, d, got)
	}
	d, err := rlt.ParseDialect("draft7")
	require.NoError(t, err)
	require.Equal(t, rlt.IETFDraft07, d)
	_, err = rlt.ParseDialect("ietf-draft5")
	require.Error(t, err)

	ra, err := rlt.ParseRetryAfterForm("http-date")
	require.NoError(t, err)
	require.Equal(t, rlt.RetryAfterDate, ra)
	_, err = rlt.ParseRetryAfterForm("later")
	require.Error(t, err)
}

func TestString(t *testing.T) {
	h, _ := newHandler(t,
		rlt.WithQuota(rlt.Quota{Algorithm: rlt.GCRA, Limit: 10, Window: time.Second, Burst: 3}),
		rlt.WithQuota(rlt.Quota{Limit: 1000, Window: 24 * time.Hour}),
		rlt.WithPartition(rlt.ByClientAddr()), rlt.WithDialect(), rlt.WithLatency(time.Millisecond))
	require.Equal(t, "gcra 10 requests per 1s (burst 3) and fixed-window 1000 requests per 24h0m0s, per key; "+
		"headers none; rejections 429 with Retry-After seconds; faults: latency 1ms", h.String())
	require.Equal(t, "token-bucket 5 requests per 1s (burst 5)", rlt.Quota{Algorithm: rlt.TokenBucket, Limit: 5, Window: time.Second}.String())
	require.Contains(t, rlt.Quota{}.String(), "invalid policy")
}

// Policies are told apart by name: made-up names that repeat get a suffix,
// given names may not repeat, and a dialect named twice is written once.
func TestPolicyNamesAreUnique(t *testing.T) {
	h, _ := newHandler(t,
		rlt.WithQuota(rlt.Quota{Limit: 10, Window: time.Second}),
		rlt.WithQuota(rlt.Quota{Limit: 10, Window: time.Second, Algorithm: rlt.TokenBucket}),
		rlt.WithDialect(rlt.IETF, rlt.IETF))
	require.Equal(t, `"10-per-1s";q=10;w=1, "10-per-1s-2";q=10;w=1`, call(h).Header.Get("RateLimit-Policy"))

	_, err := rlt.NewHandler(nil,
		rlt.WithQuota(rlt.Quota{Name: "api", Limit: 10, Window: time.Second}),
		rlt.WithQuota(rlt.Quota{Name: "api", Limit: 100, Window: time.Minute}))
	require.ErrorContains(t, err, `name "api" is used twice`)
}

// A clock far from today (a zero time.Time) still limits correctly, and its
// headers carry its own (odd) epoch times.
func TestClockAtTheZeroTime(t *testing.T) {
	clock := rlt.NewManualClock(time.Time{})
	for _, alg := range rlt.Algorithms() {
		h, err := rlt.NewHandler(nil, rlt.WithClock(clock), rlt.WithDialect(rlt.XRateLimit),
			rlt.WithQuota(rlt.Quota{Algorithm: alg, Limit: 3, Window: time.Second}))
		require.NoError(t, err)
		require.Equal(t, []int{200, 200, 200, 429}, statuses(h, 4), alg)
		res := call(h)
		wait := int64(1)
		if alg == rlt.SlidingCounter {
			wait = 2 // the first window's 3 weigh fully at the start of the next
		}
		require.Equal(t, strconv.FormatInt(time.Time{}.Unix()+wait, 10), res.Header.Get("X-RateLimit-Reset"), alg)
		require.Equal(t, strconv.FormatInt(wait, 10), res.Header.Get("Retry-After"), alg)
	}
}

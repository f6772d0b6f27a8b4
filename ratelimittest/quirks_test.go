package ratelimittest_test

import (
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	rlt "github.com/headway-go/headway/ratelimittest"
)

// discordBody reads the retry_after of a Discord 429 body, as written.
func discordBody(t *testing.T, res *http.Response) string {
	t.Helper()
	var body struct {
		RetryAfter json.Number `json:"retry_after"`
	}
	dec := json.NewDecoder(res.Body)
	dec.UseNumber()
	require.NoError(t, dec.Decode(&body))
	return body.RetryAfter.String()
}

// Retry-After is the refusing policy's whole window (go-chi/httprate), in
// either form, while every reset still tells the truth.
func TestRetryAfterFullWindow(t *testing.T) {
	epoch := start.Unix() // 12:00:00, the clock being at 12:00:00.25
	t.Run("fixed window", func(t *testing.T) {
		for _, c := range []struct {
			form rlt.RetryAfterForm
			full bool
			want string
		}{
			{rlt.RetryAfterSeconds, false, "10"}, // 9.75s to the window's end
			{rlt.RetryAfterSeconds, true, "60"},
			{rlt.RetryAfterDate, false, "Thu, 26 Nov 2026 12:01:00 GMT"},
			{rlt.RetryAfterDate, true, "Thu, 26 Nov 2026 12:01:51 GMT"}, // 12:00:50.25 + 1m, rounded up
			{rlt.RetryAfterNone, true, ""},
		} {
			t.Run(string(c.form)+strconv.FormatBool(c.full), func(t *testing.T) {
				opts := []rlt.Option{rlt.WithQuota(rlt.Quota{Name: "api", Limit: 5, Window: time.Minute}),
					rlt.WithDialect(rlt.IETF, rlt.XRateLimit), rlt.WithRetryAfter(c.form)}
				if c.full {
					opts = append(opts, rlt.WithRetryAfterFullWindow())
				}
				h, clock := newHandler(t, opts...)
				clock.Advance(50 * time.Second)
				require.Equal(t, repeat(200, 5), statuses(h, 5))
				res := call(h)
				require.Equal(t, 429, res.StatusCode)
				require.Equal(t, c.want, res.Header.Get("Retry-After"))
				require.Equal(t, `"api";r=0;t=10`, res.Header.Get("RateLimit"), "the reset is the true one")
				require.Equal(t, strconv.FormatInt(epoch+60, 10), res.Header.Get("X-RateLimit-Reset"))
			})
		}
	})
	t.Run("discord body stays true", func(t *testing.T) {
		h, clock := newHandler(t, rlt.WithQuota(rlt.Quota{Limit: 1, Window: time.Minute}),
			rlt.WithDialect(rlt.Discord), rlt.WithRetryAfterFullWindow())
		clock.Advance(50 * time.Second)
		require.Equal(t, 200, call(h).StatusCode)
		res := call(h)
		require.Equal(t, "60", res.Header.Get("Retry-After"))
		require.Equal(t, "9.75", res.Header.Get("X-RateLimit-Reset-After"))
		require.Equal(t, "9.75", discordBody(t, res))
	})
	t.Run("window under a second", func(t *testing.T) {
		h, _ := newHandler(t, rlt.WithQuota(rlt.Quota{Limit: 1, Window: 500 * time.Millisecond}), rlt.WithRetryAfterFullWindow())
		require.Equal(t, []int{200, 429}, statuses(h, 2))
		require.Equal(t, "1", call(h).Header.Get("Retry-After"), "500ms, rounded up")
	})
	t.Run("too short when the wait exceeds a window", func(t *testing.T) {
		h, _ := newHandler(t, rlt.WithRetryAfterFullWindow(), rlt.WithQuota(rlt.Quota{
			Algorithm: rlt.TokenBucket, Limit: 1, Window: time.Second, Burst: 3, Cost: rlt.CostFromHeader("X-Cost", 1)}))
		require.Equal(t, 200, call(h, "X-Cost", "3").StatusCode)
		res := call(h, "X-Cost", "3")
		require.Equal(t, 429, res.StatusCode)
		require.Equal(t, "1", res.Header.Get("Retry-After"), "the true wait is 3s")
		require.Equal(t, `"1-per-1s";r=0;t=3`, res.Header.Get("RateLimit"))
	})
	t.Run("stacked: the policy with the longest wait", func(t *testing.T) {
		for _, c := range []struct {
			name     string
			policies []rlt.Quota
			plain    string
			full     string
		}{
			// The GCRA waits 60s (window 2m); the hour ends in 29.75s.
			{"longest wait, not longest window", []rlt.Quota{
				{Name: "gcra", Algorithm: rlt.GCRA, Limit: 2, Window: 2 * time.Minute},
				{Name: "hourly", Limit: 2, Window: time.Hour},
			}, "60", "120"},
			// Both end at 13:00: the longer window.
			{"a tie", []rlt.Quota{
				{Name: "minute", Limit: 2, Window: time.Minute},
				{Name: "hourly", Limit: 2, Window: time.Hour},
			}, "30", "3600"},
		} {
			t.Run(c.name, func(t *testing.T) {
				for _, full := range []bool{false, true} {
					var opts []rlt.Option
					for _, p := range c.policies {
						opts = append(opts, rlt.WithQuota(p))
					}
					if full {
						opts = append(opts, rlt.WithRetryAfterFullWindow())
					}
					h, clock := newHandler(t, opts...)
					clock.Advance(59*time.Minute + 30*time.Second) // 12:59:30.25
					require.Equal(t, []int{200, 200, 429}, statuses(h, 3))
					res := call(h)
					want := c.plain
					if full {
						want = c.full
					}
					require.Equal(t, want, res.Header.Get("Retry-After"))
				}
			})
		}
	})
}

// A GCRA of 50 per second with a burst of 1: the true reset and wait are
// 20ms. Every dialect already writes whole seconds except OpenAI and
// Discord; WithCoarseResets makes those whole seconds too.
func TestCoarseResets(t *testing.T) {
	epoch := start.Unix()
	sec := func(n int64) string { return strconv.FormatInt(n, 10) }
	same := func(k, v string) [2][2]string { return [2][2]string{{k, v}, {k, v}} }
	cases := []struct {
		d      rlt.Dialect
		fields [][2][2]string // per field: {name, plain}, {name, coarse}
	}{
		{rlt.IETF, [][2][2]string{same("RateLimit", `"api";r=0;t=1`)}},
		{rlt.IETFDraft07, [][2][2]string{same("RateLimit", "limit=1, remaining=0, reset=1")}},
		{rlt.IETFDraft04, [][2][2]string{same("RateLimit-Reset", "1")}},
		{rlt.XRateLimit, [][2][2]string{same("X-RateLimit-Reset", sec(epoch+1))}},
		{rlt.GitHub, [][2][2]string{same("X-RateLimit-Reset", sec(epoch+1))}},
		{rlt.OpenAI, [][2][2]string{{{"X-Ratelimit-Reset-Requests", "20ms"}, {"X-Ratelimit-Reset-Requests", "1s"}}}},
		{rlt.Anthropic, [][2][2]string{same("Anthropic-Ratelimit-Requests-Reset", "2026-11-26T12:00:01Z")}},
		{rlt.Discord, [][2][2]string{
			{{"X-RateLimit-Reset-After", "0.02"}, {"X-RateLimit-Reset-After", "1"}},
			{{"X-RateLimit-Reset", sec(epoch) + ".27"}, {"X-RateLimit-Reset", sec(epoch + 1)}},
		}},
		{rlt.Shopify, [][2][2]string{same("X-Shopify-Shop-Api-Call-Limit", "1/1")}},
	}
	for _, c := range cases {
		t.Run(string(c.d), func(t *testing.T) {
			for i, coarse := range []bool{false, true} {
				opts := []rlt.Option{rlt.WithDialect(c.d),
					rlt.WithQuota(rlt.Quota{Name: "api", Algorithm: rlt.GCRA, Limit: 50, Window: time.Second, Burst: 1})}
				if coarse {
					opts = append(opts, rlt.WithCoarseResets())
				}
				h, _ := newHandler(t, opts...)
				ok, no := call(h), call(h)
				require.Equal(t, 200, ok.StatusCode)
				require.Equal(t, 429, no.StatusCode)
				require.Equal(t, "1", no.Header.Get("Retry-After"), "20ms, rounded up: already so without the option")
				for _, f := range c.fields {
					// The admission's reset (the next unit in 20ms)
					// and the refusal's (its wait, 20ms) agree.
					require.Equal(t, f[i][1], ok.Header.Get(f[i][0]), "coarse %v: %s", coarse, f[i][0])
					require.Equal(t, f[i][1], no.Header.Get(f[i][0]), "coarse %v: %s on the refusal", coarse, f[i][0])
				}
				if c.d == rlt.Discord {
					want := "0.02"
					if coarse {
						want = "1"
					}
					require.Equal(t, want, discordBody(t, no))
				}
			}
		})
	}
	t.Run("OpenAI tokens", func(t *testing.T) {
		h, _ := newHandler(t, rlt.WithDialect(rlt.OpenAI), rlt.WithCoarseResets(),
			rlt.WithQuota(rlt.Quota{Limit: 5, Window: time.Second}),
			rlt.WithQuota(rlt.Quota{Algorithm: rlt.TokenBucket, Limit: 1000, Window: time.Minute, Unit: rlt.UnitTokens, Cost: rlt.CostFromHeader("X-Tokens", 100)}))
		res := call(h)
		require.Equal(t, "1s", res.Header.Get("X-Ratelimit-Reset-Requests"), "750ms, rounded up")
		require.Equal(t, "6s", res.Header.Get("X-Ratelimit-Reset-Tokens"), "100 tokens at 1000/min")
		require.Equal(t, "7s", call(h, "X-Tokens", "1").Header.Get("X-Ratelimit-Reset-Tokens"), "101 tokens: 6.06s, rounded up")
	})
	t.Run("several minutes", func(t *testing.T) {
		h, clock := newHandler(t, rlt.WithDialect(rlt.OpenAI, rlt.Discord), rlt.WithCoarseResets(),
			rlt.WithQuota(rlt.Quota{Limit: 1, Window: time.Hour}))
		clock.Advance(5*time.Minute + 500*time.Millisecond) // 12:05:00.75, 54m59.25s to 13:00
		res := call(h)
		require.Equal(t, "55m0s", res.Header.Get("X-Ratelimit-Reset-Requests"))
		require.Equal(t, "3300", res.Header.Get("X-RateLimit-Reset-After"))
		require.Equal(t, strconv.FormatInt(epoch+3600, 10), res.Header.Get("X-RateLimit-Reset"))
	})
}

// Every reset says one second, whatever the truth (here half a day), in
// every dialect that writes one; Retry-After stays true.
func TestResetAlwaysOne(t *testing.T) {
	epoch := start.Unix()
	sec := func(n int64) string { return strconv.FormatInt(n, 10) }
	cases := []struct {
		d              rlt.Dialect
		first, ok, req map[string]string // on a 413 before any admission; the first admission; the refusal
	}{
		{rlt.IETF,
			map[string]string{"RateLimit": `"daily";r=2;t=1`},
			map[string]string{"RateLimit": `"daily";r=1;t=1`},
			map[string]string{"RateLimit": `"daily";r=0;t=1`}},
		{rlt.IETFDraft07,
			map[string]string{"RateLimit": "limit=2, remaining=2, reset=1"},
			map[string]string{"RateLimit": "limit=2, remaining=1, reset=1"},
			map[string]string{"RateLimit": "limit=2, remaining=0, reset=1"}},
		{rlt.IETFDraft04,
			map[string]string{"RateLimit-Reset": "1"},
			map[string]string{"RateLimit-Reset": "1", "RateLimit-Remaining": "1"},
			map[string]string{"RateLimit-Reset": "1", "RateLimit-Remaining": "0"}},
		// Absolute resets: 12:00:00.25 + 1s, rounded up to the second.
		{rlt.XRateLimit,
			map[string]string{"X-RateLimit-Reset": sec(epoch + 2)},
			map[string]string{"X-RateLimit-Reset": sec(epoch + 2)},
			map[string]string{"X-RateLimit-Reset": sec(epoch + 2)}},
		{rlt.GitHub,
			map[string]string{"X-RateLimit-Reset": sec(epoch + 2)},
			map[string]string{"X-RateLimit-Reset": sec(epoch + 2), "X-RateLimit-Used": "1"},
			map[string]string{"X-RateLimit-Reset": sec(epoch + 2)}},
		{rlt.OpenAI,
			map[string]string{"X-Ratelimit-Reset-Requests": "1s"},
			map[string]string{"X-Ratelimit-Reset-Requests": "1s"},
			map[string]string{"X-Ratelimit-Reset-Requests": "1s"}},
		{rlt.Anthropic,
			map[string]string{"Anthropic-Ratelimit-Requests-Reset": "2026-11-26T12:00:02Z"},
			map[string]string{"Anthropic-Ratelimit-Requests-Reset": "2026-11-26T12:00:02Z"},
			map[string]string{"Anthropic-Ratelimit-Requests-Reset": "2026-11-26T12:00:02Z"}},
		// Discord's reset has milliseconds: exactly 1s after the server's time.
		{rlt.Discord,
			map[string]string{"X-RateLimit-Reset-After": "1", "X-RateLimit-Reset": sec(epoch+1) + ".25"},
			map[string]string{"X-RateLimit-Reset-After": "1", "X-RateLimit-Reset": sec(epoch+1) + ".25"},
			map[string]string{"X-RateLimit-Reset-After": "1", "X-RateLimit-Reset": sec(epoch+1) + ".25"}},
		{rlt.Shopify,
			map[string]string{"X-Shopify-Shop-Api-Call-Limit": "0/2"},
			map[string]string{"X-Shopify-Shop-Api-Call-Limit": "1/2"},
			map[string]string{"X-Shopify-Shop-Api-Call-Limit": "2/2"}},
	}
	for _, c := range cases {
		t.Run(string(c.d), func(t *testing.T) {
			h, _ := newHandler(t, rlt.WithDialect(c.d), rlt.WithResetAlwaysOne(),
				rlt.WithQuota(rlt.Quota{Name: "daily", Limit: 2, Window: 24 * time.Hour, Cost: rlt.CostFromHeader("X-Cost", 1)}))
			check := func(res *http.Response, want map[string]string) {
				t.Helper()
				for k, v := range want {
					require.Equal(t, v, res.Header.Get(k), k)
				}
			}
			res := call(h, "X-Cost", "3")
			require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
			check(res, c.first) // the true reset is 0: nothing is used
			res = call(h)
			require.Equal(t, 200, res.StatusCode)
			check(res, c.ok)
			require.Equal(t, 200, call(h).StatusCode)
			res = call(h)
			require.Equal(t, 429, res.StatusCode)
			check(res, c.req)
			require.Equal(t, "43200", res.Header.Get("Retry-After"), "11h59m59.75s to midnight: Retry-After is true")
			if c.d == rlt.Discord {
				require.Equal(t, "43199.75", discordBody(t, res))
			}
		})
	}
	t.Run("with coarse resets", func(t *testing.T) {
		h, _ := newHandler(t, rlt.WithDialect(rlt.Discord), rlt.WithResetAlwaysOne(), rlt.WithCoarseResets(),
			rlt.WithQuota(rlt.Quota{Limit: 2, Window: 24 * time.Hour}))
		res := call(h)
		require.Equal(t, "1", res.Header.Get("X-RateLimit-Reset-After"))
		require.Equal(t, sec(epoch+2), res.Header.Get("X-RateLimit-Reset"), "12:00:01.25, rounded up")
	})
}

// quirkCase is a header quirk and the response fields (canonical names;
// "body") it may change.
type quirkCase struct {
	name    string
	opts    []rlt.Option
	changes func(field string) bool
}

func headerQuirks() []quirkCase {
	qs := []quirkCase{
		{"full-window Retry-After", []rlt.Option{rlt.WithRetryAfterFullWindow()},
			func(f string) bool { return f == "Retry-After" }},
		{"coarse resets", []rlt.Option{rlt.WithCoarseResets()}, func(f string) bool {
			// OpenAI's resets; Discord's Reset, Reset-After and body.
			return strings.HasPrefix(f, "X-Ratelimit-Reset") || f == "body"
		}},
		{"reset always one", []rlt.Option{rlt.WithResetAlwaysOne()}, func(f string) bool {
			// The IETF t; OpenAI's and Discord's resets.
			return f == "Ratelimit" || strings.HasPrefix(f, "X-Ratelimit-Reset")
		}},
	}
	all := quirkCase{name: "all three", changes: func(f string) bool {
		for _, q := range qs {
			if q.changes(f) {
				return true
			}
		}
		return false
	}}
	for _, q := range qs {
		all.opts = append(all.opts, q.opts...)
	}
	return append(qs, all)
}

// response is what a test compares of one response: the status and every
// field, the body as "body".
type response struct {
	status int
	fields map[string]string
}

func record(h http.Handler, hdr ...string) response {
	res := call(h, hdr...)
	body, _ := io.ReadAll(res.Body)
	r := response{status: res.StatusCode, fields: map[string]string{"body": string(body)}}
	for k, v := range res.Header {
		r.fields[k] = strings.Join(v, ", ")
	}
	return r
}

// A header quirk changes only its fields: the same traffic gets the same
// statuses, admissions and every other field, in every algorithm.
func TestHeaderQuirksLeaveAdmissionAlone(t *testing.T) {
	for _, alg := range rlt.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			run := func(opts ...rlt.Option) ([]response, []rlt.Admission) {
				h, clock := newHandler(t, append([]rlt.Option{
					rlt.WithDialect(rlt.IETF, rlt.OpenAI, rlt.Discord),
					rlt.WithQuota(rlt.Quota{Algorithm: alg, Limit: 7, Window: 1100 * time.Millisecond, Burst: 3, Cost: rlt.CostFromHeader("X-Cost", 1)}),
					rlt.WithQuota(rlt.Quota{Algorithm: alg, Limit: 40, Window: time.Minute, Cost: rlt.CostFromHeader("X-Cost", 1)}),
				}, opts...)...)
				rng := rand.New(rand.NewPCG(3, 4))
				var out []response
				for range 400 {
					clock.Advance(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
					out = append(out, record(h, "X-Cost", strconv.Itoa(rng.IntN(4))))
				}
				return out, h.Admissions()
			}
			want, wantAdm := run()
			require.Greater(t, len(wantAdm), 40)
			for _, q := range headerQuirks() {
				got, adm := run(q.opts...)
				require.Equal(t, wantAdm, adm, q.name)
				changed := 0
				for i := range want {
					require.Equal(t, want[i].status, got[i].status, "%s: response %d", q.name, i)
					require.Len(t, got[i].fields, len(want[i].fields), "%s: response %d", q.name, i)
					for f, v := range want[i].fields {
						if q.changes(f) {
							if got[i].fields[f] != v {
								changed++
							}
							continue
						}
						require.Equal(t, v, got[i].fields[f], "%s: response %d: %s", q.name, i, f)
					}
				}
				require.Positive(t, changed, "%s changed nothing", q.name)
			}
		})
	}
}

func TestQuirksString(t *testing.T) {
	h, _ := newHandler(t, rlt.WithQuota(rlt.Quota{Limit: 10, Window: time.Second, Anchor: rlt.AnchorFirstRequest}),
		rlt.WithRetryAfterFullWindow(), rlt.WithCoarseResets(), rlt.WithResetAlwaysOne())
	require.Equal(t, "fixed-window 10 requests per 1s (windows from each key's first request), one shared quota; "+
		"headers ietf; rejections 429 with Retry-After seconds; "+
		"faults: Retry-After the refusing policy's whole window, resets in whole seconds, every reset 1s", h.String())
}

// The instant resets in whole seconds are rounded down (go-chi/httprate,
// sethvargo/go-limiter): a window of 100ms that ends at 12:00:00.3 says
// 12:00:00, the Date's own second, where it said 12:00:01; the delays and
// Retry-After are unchanged, and so is who is admitted.
func TestFloorResets(t *testing.T) {
	epoch := start.Unix()
	sec := func(n int64) string { return strconv.FormatInt(n, 10) }
	cases := []struct {
		d           rlt.Dialect
		field       string
		plain, down string
	}{
		{rlt.XRateLimit, "X-RateLimit-Reset", sec(epoch + 1), sec(epoch)},
		{rlt.GitHub, "X-RateLimit-Reset", sec(epoch + 1), sec(epoch)},
		{rlt.Anthropic, "Anthropic-Ratelimit-Requests-Reset", "2026-11-26T12:00:01Z", "2026-11-26T12:00:00Z"},
		{rlt.IETF, "RateLimit", `"api";r=0;t=1`, `"api";r=0;t=1`},
	}
	for _, c := range cases {
		t.Run(string(c.d), func(t *testing.T) {
			var adm [2][]rlt.Admission
			for i, down := range []bool{false, true} {
				opts := []rlt.Option{rlt.WithDialect(c.d),
					rlt.WithQuota(rlt.Quota{Name: "api", Limit: 1, Window: 100 * time.Millisecond})}
				want := c.plain
				if down {
					opts, want = append(opts, rlt.WithFloorResets()), c.down
				}
				h, clock := newHandler(t, opts...)
				ok, no := call(h), call(h)
				require.Equal(t, 200, ok.StatusCode)
				require.Equal(t, 429, no.StatusCode)
				require.Equal(t, want, ok.Header.Get(c.field), "floor %v", down)
				require.Equal(t, want, no.Header.Get(c.field), "floor %v: on the refusal", down)
				require.Equal(t, "1", no.Header.Get("Retry-After"), "50ms, rounded up, either way")
				clock.Advance(100 * time.Millisecond)
				require.Equal(t, 200, call(h).StatusCode)
				adm[i] = h.Admissions()
			}
			require.Equal(t, adm[0], adm[1])
		})
	}
	h, _ := newHandler(t, rlt.WithFloorResets())
	require.Contains(t, h.String(), "faults: instant resets rounded down")
}

// TestFloorRetryAfterDate: a Retry-After written as a date is an instant,
// which WithFloorResets rounds down as sethvargo/go-limiter does (to the
// second already begun, when the window ends within it); written in
// seconds it is a delay, rounded up either way.
func TestFloorRetryAfterDate(t *testing.T) {
	for _, c := range []struct {
		form  rlt.RetryAfterForm
		floor bool
		want  string
	}{
		{rlt.RetryAfterDate, false, "Thu, 26 Nov 2026 12:00:01 GMT"},
		{rlt.RetryAfterDate, true, "Thu, 26 Nov 2026 12:00:00 GMT"},
		{rlt.RetryAfterSeconds, false, "1"},
		{rlt.RetryAfterSeconds, true, "1"},
	} {
		opts := []rlt.Option{rlt.WithDialect(rlt.XRateLimit), rlt.WithRetryAfter(c.form),
			rlt.WithQuota(rlt.Quota{Name: "api", Limit: 1, Window: 100 * time.Millisecond})}
		if c.floor {
			opts = append(opts, rlt.WithFloorResets())
		}
		h, _ := newHandler(t, opts...)
		require.Equal(t, 200, call(h).StatusCode)
		no := call(h)
		require.Equal(t, 429, no.StatusCode)
		require.Equal(t, c.want, no.Header.Get("Retry-After"), "%s, floor %v", c.form, c.floor)
	}
}

// TestRoundedCounts: WithRoundedCounts admits and counts as go-chi/httprate
// 0.16's limiter does, checked against a transcription of its rule (clock-
// aligned windows, rate = prev*(w-e)/w + curr rounded by math.Round, a
// request admitted while rate+1 <= limit, Remaining limit-rate-1 after it)
// over random arrivals; the exact counter admits more.
func TestRoundedCounts(t *testing.T) {
	for _, c := range []struct {
		limit  int
		window time.Duration
	}{{1, 100 * time.Millisecond}, {2, time.Second}, {5, time.Second}, {3, 300 * time.Millisecond}} {
		for _, rounded := range []bool{true, false} {
			opts := []rlt.Option{rlt.WithDialect(rlt.XRateLimit),
				rlt.WithQuota(rlt.Quota{Algorithm: rlt.SlidingCounter, Limit: c.limit, Window: c.window})}
			if rounded {
				opts = append(opts, rlt.WithRoundedCounts())
			}
			h, clock := newHandler(t, opts...)
			rnd := rand.New(rand.NewPCG(uint64(c.limit), 7))
			w := c.window.Nanoseconds()
			counts := map[int64]int{} // admitted, by window
			mismatches := 0
			for range 2000 {
				clock.Advance(time.Duration(rnd.Int64N(w / int64(c.limit))))
				now := clock.Now().UnixNano()
				ws := now / w
				e := float64(now-ws*w) / float64(w)
				rate := float64(counts[ws-1])*(1-e) + float64(counts[ws])
				if rounded {
					rate = math.Round(rate)
				}
				admit := rate+1 <= float64(c.limit)
				if !rounded {
					admit = rate < float64(c.limit) // the exact counter
				}
				res := call(h)
				if (res.StatusCode == http.StatusOK) != admit {
					mismatches++
					continue
				}
				if admit {
					if rounded {
						require.Equal(t, strconv.Itoa(c.limit-int(rate)-1), res.Header.Get("X-RateLimit-Remaining"), "rate %.3f", rate)
					}
					counts[ws]++
				}
			}
			// The float reference and the exact arithmetic may differ
			// only where the count is a hair from the threshold.
			require.LessOrEqual(t, mismatches, 2, "%d per %v, rounded %v", c.limit, c.window, rounded)
		}
	}
}

// TestWindowEndResets: with WithWindowEndResets a sliding counter's reset is
// its current window's end, as go-chi/httprate writes it; without, when all
// it counts has aged out.
func TestWindowEndResets(t *testing.T) {
	for _, end := range []bool{false, true} {
		opts := []rlt.Option{rlt.WithDialect(rlt.IETF),
			rlt.WithQuota(rlt.Quota{Name: "api", Algorithm: rlt.SlidingCounter, Limit: 5, Window: 10 * time.Second})}
		if end {
			opts = append(opts, rlt.WithWindowEndResets())
		}
		h, clock := newHandler(t, opts...) // 12:00:00.25, in the window [12:00:00, 12:00:10)
		clock.Advance(3 * time.Second)
		want := `"api";r=4;t=17` // when the next window, [10, 20), ends
		if end {
			want = `"api";r=4;t=7` // when this one does
		}
		require.Equal(t, want, call(h).Header.Get("RateLimit"), "end resets %v", end)
	}
}

// Retry-After's delay-seconds are rounded down (go-chi/httprate's
// int(windowLength.Seconds())): with the whole window, 0 for a window of
// 100 ms and 1 for one of 1.5 s; alone, a true wait of 300 ms says 0
// where it said 1. A date and the resets are unchanged.
func TestTruncatedRetryAfter(t *testing.T) {
	for _, c := range []struct {
		name   string
		window time.Duration
		full   bool
		trunc  bool
		want   string
	}{
		{"100ms, whole window", 100 * time.Millisecond, true, true, "0"},
		{"100ms, whole window, rounded up", 100 * time.Millisecond, true, false, "1"},
		{"1.5s, whole window", 1500 * time.Millisecond, true, true, "1"},
		{"1.5s, whole window, rounded up", 1500 * time.Millisecond, true, false, "2"},
		{"the true wait", 500 * time.Millisecond, false, true, "0"}, // 250ms to the window's end
		{"the true wait, rounded up", 500 * time.Millisecond, false, false, "1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := []rlt.Option{rlt.WithQuota(rlt.Quota{Name: "api", Limit: 1, Window: c.window}), rlt.WithDialect(rlt.IETF)}
			if c.full {
				opts = append(opts, rlt.WithRetryAfterFullWindow())
			}
			if c.trunc {
				opts = append(opts, rlt.WithTruncatedRetryAfter())
			}
			h, _ := newHandler(t, opts...) // 12:00:00.25
			require.Equal(t, 200, call(h).StatusCode)
			res := call(h)
			require.Equal(t, 429, res.StatusCode)
			require.Equal(t, c.want, res.Header.Get("Retry-After"))
		})
	}
	t.Run("a date is unchanged", func(t *testing.T) {
		h, _ := newHandler(t, rlt.WithQuota(rlt.Quota{Limit: 1, Window: time.Second}), rlt.WithRetryAfter(rlt.RetryAfterDate),
			rlt.WithTruncatedRetryAfter())
		require.Equal(t, []int{200, 429}, statuses(h, 2))
		require.Equal(t, "Thu, 26 Nov 2026 12:00:01 GMT", call(h).Header.Get("Retry-After"))
	})
	t.Run("named", func(t *testing.T) {
		h, _ := newHandler(t, rlt.WithTruncatedRetryAfter())
		require.Contains(t, h.String(), "faults: Retry-After rounded down")
	})
}

package main

import (
	"net/http"
	"net/url"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/examples/sdk/internal/sdkrun"
	"github.com/headway-go/headway/ratelimittest"
)

// rtt is the emulated network's round trip.
const rtt = 10 * time.Millisecond

// run runs the issue's workload through s in virtual time: 100 Users.Get
// from 8 goroutines into a fixed window of 10 a second, GitHub's headers.
func run(t *testing.T, s setup) sdkrun.Result {
	t.Helper()
	var res sdkrun.Result
	synctest.Test(t, func(t *testing.T) {
		api := newAPI(nil) // time.Now is the bubble's virtual clock
		res = usersGet(s, sdkrun.Memory{Handler: api, RTT: rtt}, "http://api.github.test", api, 100, 8, rtt)
	})
	t.Log("\n" + sdkrun.Header + "\n" + res.String())
	return res
}

// TestREADME is the README's way: 100 of 100, at the ideal or near it, and
// no 429s but what the pacing model spends learning the window (one, in
// the first window, with pace at 5dc7455). The order in which the
// goroutines run decides between two outcomes (200 runs at 15f60e7): 9.02-
// 9.03 s, the ideal, in 194, and 9.56 s (1.06x) in 6, where the last call,
// the last unit of its window, is held about 300 ms to test where the
// window ends (pace's reserveEnd), which nothing after it needs; each
// window also opens some 12 ms later than the one before while a window
// from a first request still explains the answers. The bound of 1.05 failed
// CI on it; it leaves room above the second outcome.
func TestREADME(t *testing.T) {
	res := run(t, setups[2])
	require.Equal(t, 100, res.Succeeded, "every call succeeds")
	require.LessOrEqual(t, res.Refused, sdkrun.Learning, "no 429s but the pacing model's learning")
	require.Equal(t, 100+res.Refused, res.Sent, "one request per call, and the refused ones again")
	require.LessOrEqual(t, res.Slowdown(), 1.07)
}

// TestPreCheckRefusesWhatHeadwayWouldHold shows why the README turns
// go-github's check off: headway spends a window to remaining 0, and
// go-github then fails every call until the reset without sending it.
func TestPreCheckRefusesWhatHeadwayWouldHold(t *testing.T) {
	res := run(t, setups[1])
	require.Positive(t, res.Local, "go-github refused calls locally")
	require.Less(t, res.Succeeded, 100)
}

// TestGoGithubAlone is the baseline: go-github by itself fails most calls.
func TestGoGithubAlone(t *testing.T) {
	res := run(t, setups[0])
	require.Positive(t, res.Failed)
	require.Positive(t, res.Local+res.Refused)
}

// TestResources: the search resource's small quota is paced apart from
// core's (x-ratelimit-resource): searches wait for their own window and
// never hold the Users.Get calls back. 60 Users.Get and 12 Search.Users
// from 8 goroutines, none refused but the pacing model's learning of each
// resource (3 with pace at 5dc7455, and 1.15x the slower resource's
// ideal; none and 1.00x before it; 1.08x until the sliding counter's phase
// stopped being taken from the Date, 1.20x since: with windows of a second,
// whole-second resets leave the phase open, and a search quota of 2 cannot
// rule the counter out before a probe does, so its most holds calls back).
func TestResources(t *testing.T) {
	const users, searches = 60, 12
	synctest.Test(t, func(t *testing.T) {
		api := newFullAPI(nil)
		start := time.Now()
		res := mixed(onHeadway(sdkrun.Memory{Handler: api, RTT: rtt}, "http://api.github.test"), users, searches, 8)
		core, search, _ := api.refused()
		res.Name, res.Sent, res.Refused = "go-github on headway (README)", int(api.core.Stats().Served+api.search.Stats().Served)+core+search, core+search
		res.Ideal = max(
			sdkrun.Ideal(start, users, rtt, func(c ratelimittest.Clock) http.Handler { return newFullAPI(c).core },
				func(i int) *http.Request { return httpRequest("http://api.github.test/users/u") }),
			sdkrun.Ideal(start, searches, rtt, func(c ratelimittest.Clock) http.Handler { return newFullAPI(c).search },
				func(i int) *http.Request { return httpRequest("http://api.github.test/search/users?q=u") }))
		t.Log("\n" + sdkrun.Header + "\n" + res.String())
		require.Equal(t, users+searches, res.Succeeded)
		require.LessOrEqual(t, core, sdkrun.Learning, "core refused only while learning")
		require.LessOrEqual(t, search, sdkrun.Learning, "search refused only while learning")
		require.LessOrEqual(t, res.Slowdown(), 1.25)
	})
}

// TestSecondaryLimit: 24 Issues.Create from 8 goroutines into a secondary
// limit (403 with Retry-After, no counters). Declared with WithQuota, as
// the README says, it is never hit. Undeclared, headway retries each 403
// after its Retry-After, but the pacing layer does not yet pause the key on
// a 403 as it does on a 429, so the other goroutines keep running into it:
// about 30 of 50 attempts refused and 4 calls failed after 4 attempts with
// pace before b83f1e0, 15 to 18 of 40 and none failed with pace at
// 5dc7455. go-github alone fails every refused call.
func TestSecondaryLimit(t *testing.T) {
	const calls = 24
	var alone, undeclared int
	for _, tc := range []struct {
		name     string
		client   func(base http.RoundTripper) *github.Client
		declared bool
	}{
		{name: "go-github on headway (README)", client: func(base http.RoundTripper) *github.Client {
			return onHeadway(base, "http://api.github.test", secondaryLimit)
		}, declared: true},
		{name: "go-github on headway, limit not declared", client: func(base http.RoundTripper) *github.Client {
			return onHeadway(base, "http://api.github.test")
		}},
		{name: "go-github alone", client: func(base http.RoundTripper) *github.Client {
			gh := github.NewClient(&http.Client{Transport: base})
			gh.BaseURL, _ = url.Parse("http://api.github.test/")
			return gh
		}},
	} {
		synctest.Test(t, func(t *testing.T) {
			api := newFullAPI(nil)
			start := time.Now()
			res := createIssues(tc.client(sdkrun.Memory{Handler: api, RTT: rtt}), calls, 8)
			_, _, secondary := api.refused()
			res.Name, res.Refused = tc.name, secondary
			res.Sent = int(api.secondary.Stats().Served) + secondary
			res.Ideal = issuesIdeal(start, calls, rtt)
			t.Log("\n" + sdkrun.Header + "\n" + res.String())
			switch {
			case tc.declared:
				require.Equal(t, calls, res.Succeeded)
				require.Zero(t, secondary, "never refused")
				require.LessOrEqual(t, res.Slowdown(), 1.1)
			case tc.name == "go-github alone":
				require.Positive(t, res.Failed)
				alone = res.Succeeded
			default:
				require.Positive(t, secondary)
				require.GreaterOrEqual(t, res.Succeeded, calls*3/4, "most 403s retried after their Retry-After")
				undeclared = res.Succeeded
			}
		})
	}
	require.Greater(t, undeclared, alone, "headway retries what go-github alone fails")
}

package main

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/examples/sdk/internal/sdkrun"
)

const (
	rtt   = 20 * time.Millisecond
	calls = 60
)

// run runs calls chat completions from 8 goroutines through s in virtual
// time; vary gives the prompts different sizes.
func run(t *testing.T, s setup, vary bool) sdkrun.Result {
	t.Helper()
	var res sdkrun.Result
	synctest.Test(t, func(t *testing.T) {
		api := newAPI(nil)
		res = chats(s, sdkrun.Memory{Handler: api, RTT: rtt}, "http://api.openai.test", api, calls, 8, rtt, vary)
	})
	t.Log("\n" + sdkrun.Header + "\n" + res.String())
	return res
}

// TestREADME is the README's way, with prompts of one size: every call
// succeeds, none is refused, and the tokens quota is spent at its rate.
func TestREADME(t *testing.T) {
	res := run(t, setups[2], false)
	require.Equal(t, calls, res.Succeeded)
	require.Zero(t, res.Refused, "no 429s")
	require.Equal(t, calls, res.Sent)
	require.LessOrEqual(t, res.Slowdown(), 1.05)
}

// TestREADMEPromptsOfManySizes is the README's way with prompts of 300 to
// 1,495 tokens. The pacing layer learns a token bucket's refill rate too
// high when the costs differ (2.0-2.4e3 tokens/s here, for a true 1.2e3),
// and about one attempt in three is refused (25-26 of 85, 1-2 calls failed
// after 4 attempts), and declaring the costs then helps little: without
// them, 24 to 65 refused from run to run. The bounds hold that measure, so
// that a change for the worse fails, and a fix tightens them.
func TestREADMEPromptsOfManySizes(t *testing.T) {
	res := run(t, setups[2], true)
	run(t, setups[1], true) // for the log: without the costs, 24-65 refused
	require.GreaterOrEqual(t, res.Succeeded, calls-3)
	require.LessOrEqual(t, res.Refused, calls/2)
	require.LessOrEqual(t, res.Slowdown(), 1.1)
}

// TestWithoutCost shows why each call declares its tokens: headway then
// sees only the requests quota's room, and the tokens quota refuses.
func TestWithoutCost(t *testing.T) {
	res := run(t, setups[1], false)
	require.Positive(t, res.Refused)
}

// TestOpenAIGoAlone is the baseline: openai-go's own retries, into 429s.
func TestOpenAIGoAlone(t *testing.T) {
	res := run(t, setups[0], false)
	require.Positive(t, res.Refused)
	require.Positive(t, res.Failed)
}

// TestFailingBackend: with openai-go's own retries left on, a backend that
// fails every call sees at most headway's max attempts per call, not the
// product of both loops, which it does see when openai-go's count header is
// removed and headway cannot tell. One call per client: over many, the
// retry budget would bound headway's retries too.
func TestFailingBackend(t *testing.T) {
	want := map[string]float64{
		"GET, 500s: openai-go alone":                                3,
		"GET, 500s: openai-go on headway":                           headway.DefaultMaxAttempts,
		"GET, 500s: openai-go on headway, its count header removed": 3 * headway.DefaultMaxAttempts,
		"POST, 500s: openai-go alone":                               3,
		"POST, 500s: openai-go on headway":                          1, // not repeated: it may have been processed
		"GET, connections dropped: openai-go alone":                 3,
		"GET, connections dropped: openai-go on headway":            headway.DefaultMaxAttempts,
	}
	require.Len(t, want, len(failures))
	for _, f := range failures {
		var got float64
		synctest.Test(t, func(t *testing.T) {
			api := failing(nil, f.drop)
			got = attemptsPerCall(newFailClient(f, sdkrun.Memory{Handler: api, RTT: rtt}, "http://api.openai.test"), api, 1, f.post)
		})
		t.Logf("%-62s %5.1f requests per call", f.name, got)
		require.Equal(t, want[f.name], got, f.name)
		if f.headway && !f.noCount {
			require.LessOrEqual(t, got, float64(headway.DefaultMaxAttempts), f.name)
		}
	}
}

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

// policies is how many quotas the emulated API enforces.
const policies = 2

// TestREADME is the README's way, with prompts of one size: every call
// succeeds, nothing is refused but the pacing model's learning, and the
// tokens quota is spent at its rate. (Before cfc6c3e the tokens bucket's
// refill rate cost 3 to 5 refusals more, each probe testing a faster
// rate than the one measured, which its resets had already ruled out;
// now 0-1 refusals a run.)
func TestREADME(t *testing.T) {
	res := run(t, setups[2], false)
	require.Equal(t, calls, res.Succeeded)
	require.LessOrEqual(t, res.Refused, policies*sdkrun.Learning, "no 429s but the pacing model's learning")
	require.LessOrEqual(t, res.Slowdown(), 1.05)
}

// TestREADMEPromptsOfManySizes is the README's way with prompts of 300 to
// 1,495 tokens, each declaring a different cost: the same. (With pace
// before b83f1e0, which learnt a token bucket's refill rate too high when
// the costs differed, a third of the attempts were refused.)
func TestREADMEPromptsOfManySizes(t *testing.T) {
	res := run(t, setups[2], true)
	require.Equal(t, calls, res.Succeeded)
	require.LessOrEqual(t, res.Refused, policies*sdkrun.Learning, "no 429s but the pacing model's learning")
	require.LessOrEqual(t, res.Slowdown(), 1.05)
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

package main

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/examples/sdk/internal/sdkrun"
)

// rtt is the emulated network's round trip.
const rtt = 10 * time.Millisecond

// run runs the workload through s in virtual time: 100 Users.Get
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

// TestREADME is the README's way: 100 of 100, none refused, within 5% of
// the ideal.
func TestREADME(t *testing.T) {
	res := run(t, setups[2])
	require.Equal(t, 100, res.Succeeded, "every call succeeds")
	require.Zero(t, res.Refused, "no 429s")
	require.Equal(t, 100, res.Sent, "one request per call")
	require.LessOrEqual(t, res.Slowdown(), 1.05)
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

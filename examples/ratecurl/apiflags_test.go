package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/ratelimittest"
)

// TestCostDeclaresTokens: with -cost, headway waits until the server's
// tokens quota has room for each request; without it, it sends what the
// quota cannot take and the server refuses. The server meters 1,000 tokens
// a request against 3,000 a minute: three fit, the fourth would wait for
// the minute, longer than -max-wait, and fails without being sent.
//
// The server takes 100 ms to answer, as a remote one would: on loopback an
// answer can come back before a request granted earlier is on the wire
// (the race detector, a loaded machine): without -cost, the first three
// answers could show the tokens spent before the fourth left, which then
// waited instead; with it, a late request could be taken for one that an
// answer had already counted. Either made this test flaky: it failed in
// CI once, and about 1 run in 20 with 8 copies running at once. And the
// server's minute starts with the test (windowStart): its windows are on
// its clock's minutes, and a run that crossed one (a run takes about
// 0.4 s, so about 1 in 150) found the quota whole again.
func TestCostDeclaresTokens(t *testing.T) {
	for _, declared := range []bool{true, false} {
		srv := ratelimittest.NewServer(nil, ratelimittest.WithDialect(ratelimittest.OpenAI),
			ratelimittest.WithLatency(100*time.Millisecond), ratelimittest.WithClock(windowStart(time.Minute)),
			ratelimittest.WithQuota(ratelimittest.Quota{Limit: 100, Window: time.Minute}),
			ratelimittest.WithQuota(ratelimittest.Quota{Limit: 3000, Window: time.Minute, Unit: ratelimittest.UnitTokens,
				Cost: ratelimittest.CostFromHeader("X-Tokens", 0)}))
		args := []string{"-n", "4", "-c", "4", "-max-wait", "1s", "-H", "X-Tokens: 1000", srv.URL}
		if declared {
			args = append([]string{"-cost", "tokens=1000"}, args...)
		}
		_, rep, out := runJSON(t, args...)
		st := srv.Stats()
		srv.Close()
		if declared {
			require.EqualValues(t, 3, st.Served, out.stderr)
			require.Zero(t, st.Rejected, "nothing sent that the quota could not take: %s", out.stderr)
			require.Equal(t, 3, rep.Succeeded)
			require.Equal(t, 3, rep.Attempts, "the fourth was never sent")
		} else {
			require.EqualValues(t, 3, st.Served)
			require.Positive(t, st.Rejected, "the fourth was sent and refused: %s", out.stderr)
		}
	}
}

// windowStart returns a clock that reads a whole multiple of w at the
// moment it is made and runs on from there at the real clock's pace (its
// Date headers are up to w behind the real ones), so that a server's
// window of w begins with the test rather than at some point within it.
func windowStart(w time.Duration) ratelimittest.Clock {
	now := time.Now()
	return shiftedClock(now.Truncate(w).Sub(now))
}

// shiftedClock is the real clock plus itself.
type shiftedClock time.Duration

func (c shiftedClock) Now() time.Time { return time.Now().Add(time.Duration(c)) }

func TestHeaderFromEnvironment(t *testing.T) {
	t.Setenv("RATECURL_TEST_TOKEN", "s3cr3t")
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"), r.Header.Get("X-Price"))
		mu.Unlock()
	})
	code, _, out := runJSON(t, "-H", "Authorization: Bearer ${RATECURL_TEST_TOKEN}", "-H", "X-Price: $5", srv.URL)
	require.Equal(t, exitOK, code, out.stderr)
	mu.Lock()
	require.Equal(t, []string{"Bearer s3cr3t", "$5"}, seen, "${NAME} expanded, a lone $ kept")
	mu.Unlock()

	for _, tc := range []struct{ h, want string }{
		{"Authorization: Bearer ${RATECURL_TEST_UNSET}", "bad -H for Authorization: environment variable RATECURL_TEST_UNSET is not set"},
		{"Authorization: Bearer ${RATECURL_TEST_TOKEN", "unterminated ${"},
		{"Authorization: ${1X}", "${1X}: not an environment variable's name"},
	} {
		out := runCLI(t, "", "-H", tc.h, srv.URL)
		require.Equal(t, exitUsage, out.code)
		require.Contains(t, out.stderr, tc.want)
		require.NotContains(t, out.stderr, "s3cr3t", "a secret is never printed")
	}
	hits, _, _, _ := srv.seen()
	require.Equal(t, 1, hits, "bad usage sends nothing")
}

func TestBodyFileSentAsItIs(t *testing.T) {
	dir := t.TempDir()
	jsonFile := filepath.Join(dir, "chat.json")
	chat := "{\"model\": \"m\",\n \"messages\": [{\"role\": \"user\", \"content\": \"a&b=c\"}]}\n"
	require.NoError(t, os.WriteFile(jsonFile, []byte(chat), 0o600))
	binFile := filepath.Join(dir, "blob.bin")
	require.NoError(t, os.WriteFile(binFile, []byte("\x00\xfe&x=1\r\n"), 0o600))

	srv := newServer(t, statusHandler(http.StatusOK))
	code, _, out := runJSON(t, "-body-file", jsonFile, srv.URL)
	require.Equal(t, exitOK, code, out.stderr)
	code, _, out = runJSON(t, "-body-file", binFile, "-X", "PUT", srv.URL)
	require.Equal(t, exitOK, code, out.stderr)
	out = runCLI(t, chat, "-json", "-body-file", "-", "-H", "Content-Type: text/plain", srv.URL)
	require.Equal(t, exitOK, out.code, out.stderr)

	hits, methods, bodies, _ := srv.seen()
	require.Equal(t, 3, hits)
	require.Equal(t, []string{"POST", "PUT", "POST"}, methods)
	require.Equal(t, []string{chat, "\x00\xfe&x=1\r\n", chat}, bodies)
	require.Equal(t, []string{"application/json", "application/x-www-form-urlencoded", "text/plain"}, srv.ctypes)
}

func TestAPIFlagsBadUsage(t *testing.T) {
	srv := newServer(t, statusHandler(http.StatusOK))
	missing := filepath.Join(t.TempDir(), "missing.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-cost", "tokens", srv.URL}, `bad -cost "tokens": want UNIT=N`},
		{[]string{"-cost", "bananas=3", srv.URL}, `bad -cost "bananas=3": want UNIT=N`},
		{[]string{"-cost", "tokens=-1", srv.URL}, `bad -cost "tokens=-1": N must be a whole number`},
		{[]string{"-body-file", missing, srv.URL}, "-body-file " + missing + ": open "},
		{[]string{"-body-file", missing, "-d", "x", srv.URL}, "-body-file and -d both give a body"},
	} {
		out := runCLI(t, "", tc.args...)
		require.Equal(t, exitUsage, out.code, strings.Join(tc.args, " "))
		require.Contains(t, out.stderr, "ratecurl: "+tc.want)
	}
	hits, _, _, _ := srv.seen()
	require.Zero(t, hits)

	out := runCLI(t, "", "-h")
	for _, flag := range []string{"-cost UNIT=N", "-body-file FILE", "${NAME}", "Bearer ${OPENAI_API_KEY}"} {
		require.Contains(t, out.stderr, flag, "ratecurl -h documents it")
	}
}

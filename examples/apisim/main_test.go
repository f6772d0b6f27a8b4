package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"1s": time.Second, "1.5": 1500 * time.Millisecond, "-90": -90 * time.Second,
		" 60 ": time.Minute, "250ms": 250 * time.Millisecond, "0.0000000015": 2,
	} {
		got, err := parseDuration(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"NaN", "Inf", "-Inf", "1e10", "soon", ""} {
		_, err := parseDuration(in)
		require.Error(t, err, in)
	}
}

func TestFlagsRefuseWhatTheLibraryRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"-drop-every", "-1"}, {"-missing-every", "-2"}, {"-latency", "-1s"}, {"-tokens", "-5", "-dialect", "openai"},
		{"-dialect", "ietf,ietf-draft-07"}, {"-limit", "0"}, {"-window", "NaN"}, {"-partition", "header:"},
		{"-retry-after", "full-windows"}, {"-anchor", "midnight"}, {"-anchor", "first-request", "-algorithm", "gcra"},
		{"-anchor", "first-request", "-policy", "5/1m", "-algorithm", "token-bucket"},
	} {
		err := run(context.Background(), append([]string{"-addr", "127.0.0.1:0"}, args...), io.Discard, nil)
		require.Error(t, err, args)
		// Either way apisim exits 2.
		require.True(t, errors.As(err, new(usageError)) || errors.As(err, new(flagError)), "%v: %v", args, err)
	}
	err := run(context.Background(), []string{"-nope"}, io.Discard, nil)
	require.ErrorAs(t, err, new(flagError))
}

// Every path is the API, odd ones included; only GET /_stats is not.
func TestEveryPathIsTheAPI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addrc, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-limit", "100", "-dialect", "x-ratelimit"}, io.Discard, func(a string) { addrc <- a })
	}()
	addr := <-addrc
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	// A raw request: net/http's client would clean the path itself.
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = io.WriteString(conn, "GET //v1/../x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	raw, err := io.ReadAll(conn)
	require.NoError(t, err)
	require.Contains(t, string(raw), "HTTP/1.1 200 OK")
	require.Contains(t, string(raw), "X-Ratelimit-Remaining: 99")

	for _, m := range []string{http.MethodPost, http.MethodHead} {
		req, _ := http.NewRequest(m, "http://"+addr+"/_stats", nil)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = res.Body.Close()
		require.NotEmpty(t, res.Header.Get("X-RateLimit-Remaining"), "%s /_stats is the API", m)
	}
	res, err := http.Get("http://" + addr + "/_stats")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	require.JSONEq(t, `{"served": 3, "rejected": 0}`, string(body))
	http.DefaultClient.CloseIdleConnections()
}

// serve runs apisim with args until the test ends and returns its address
// and the line it logged at start.
func serve(t *testing.T, args ...string) (addr, logLine string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var logw strings.Builder
	addrc, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), &logw, func(a string) { addrc <- a })
	}()
	select {
	case addr = <-addrc:
	case err := <-done:
		cancel()
		t.Fatalf("apisim %v: %v", args, err)
	}
	logLine = logw.String() // written before ready was called
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		http.DefaultClient.CloseIdleConnections()
	})
	return addr, logLine
}

func get(t *testing.T, url string) *http.Response {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	require.NoError(t, res.Body.Close())
	return res
}

// The quirk flags reach the server. On the real clock, only values that no
// timing can change are asserted: a window anchored at the first request
// has a whole minute to go, which whole seconds rounded up keep saying for
// up to a second; a full-window Retry-After is the window; a reset that is
// always one is one.
func TestQuirkFlags(t *testing.T) {
	t.Run("full window, anchor, coarse resets", func(t *testing.T) {
		addr, logLine := serve(t, "-limit", "2", "-window", "1m", "-retry-after", "full-window",
			"-anchor", "first-request", "-coarse-resets", "-dialect", "openai,discord")
		require.Contains(t, logLine, "fixed-window 2 requests per 1m0s (windows from each key's first request)")
		require.Contains(t, logLine, "Retry-After the refusing policy's whole window, resets in whole seconds")
		res := get(t, "http://"+addr+"/v1")
		require.Equal(t, 200, res.StatusCode)
		require.Equal(t, "1m0s", res.Header.Get("X-Ratelimit-Reset-Requests"), "the window starts now, not on the clock's minute")
		require.Equal(t, "60", res.Header.Get("X-Ratelimit-Reset-After"))
		require.Equal(t, 200, get(t, "http://"+addr+"/v1").StatusCode)
		res = get(t, "http://"+addr+"/v1")
		require.Equal(t, 429, res.StatusCode)
		require.Equal(t, "60", res.Header.Get("Retry-After"), "the whole window")
		require.Equal(t, "1m0s", res.Header.Get("X-Ratelimit-Reset-Requests"))
	})
	t.Run("go-chi/httprate's counter", func(t *testing.T) {
		addr, logLine := serve(t, "-algorithm", "sliding-counter", "-limit", "2", "-window", "1h", "-anchor", "first-request",
			"-floor-resets", "-rounded-counts", "-window-end-resets", "-dialect", "ietf")
		require.Contains(t, logLine, "instant resets rounded down, sliding counts rounded, a sliding counter resets at its window's end")
		res := get(t, "http://"+addr+"/")
		require.Equal(t, `"2-per-1h0m0s";r=1;t=3600`, res.Header.Get("RateLimit"), "the window's end, not the next one's")
	})
	t.Run("httprate's Retry-After under a second", func(t *testing.T) {
		addr, logLine := serve(t, "-algorithm", "sliding-counter", "-limit", "1", "-window", "900ms", "-anchor", "first-request",
			"-retry-after", "full-window", "-truncated-retry-after")
		require.Contains(t, logLine, "Retry-After rounded down")
		require.Equal(t, 200, get(t, "http://"+addr+"/").StatusCode)
		res := get(t, "http://"+addr+"/")
		require.Equal(t, 429, res.StatusCode)
		require.Equal(t, "0", res.Header.Get("Retry-After"), "int(0.9)")
	})
	t.Run("reset always one", func(t *testing.T) {
		addr, logLine := serve(t, "-limit", "1", "-window", "1h", "-anchor", "first-request", "-reset-always-one", "-dialect", "ietf")
		require.Contains(t, logLine, "every reset 1s")
		res := get(t, "http://"+addr+"/")
		require.Equal(t, `"1-per-1h0m0s";r=0;t=1`, res.Header.Get("RateLimit"))
		res = get(t, "http://"+addr+"/")
		require.Equal(t, 429, res.StatusCode)
		require.Equal(t, `"1-per-1h0m0s";r=0;t=1`, res.Header.Get("RateLimit"))
		require.Equal(t, "3600", res.Header.Get("Retry-After"), "Retry-After stays true: the anchored hour, less a moment")
	})
}

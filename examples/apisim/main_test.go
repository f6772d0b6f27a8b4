package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
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

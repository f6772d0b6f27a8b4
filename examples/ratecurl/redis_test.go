package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/pace"
	"github.com/headway-go/headway/ratelimittest"
	"github.com/headway-go/headway/redisstore"
)

func TestRedisFlags(t *testing.T) {
	o, err := parseArgs([]string{"-redis", "redis://user:secret@127.0.0.1:6390/2", "-redis-timeout", "80ms", "http://x/"}, nil)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:6390", o.redis.Addr)
	require.Equal(t, 2, o.redis.DB)
	require.Equal(t, 80*time.Millisecond, o.redisWait)

	o, err = parseArgs([]string{"http://x/"}, nil)
	require.NoError(t, err)
	require.Nil(t, o.redis, "without -redis, pacing is per process")
	require.Equal(t, redisstore.DefaultTimeout, o.redisWait)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-redis", "http://127.0.0.1:6379"}, "bad -redis"},
		{[]string{"-redis", "redis://user:secret@127.0.0.1:notaport"}, "bad -redis"},
		{[]string{"-redis", "redis://127.0.0.1:6379", "-redis-timeout", "0"}, "-redis-timeout must be positive"},
	} {
		out := runCLI(t, "", append(tc.args, "http://127.0.0.1:1/")...)
		require.Equal(t, exitUsage, out.code, "%v: %s", tc.args, out.stderr)
		require.Contains(t, out.stderr, tc.want)
		require.NotContains(t, out.stderr, "secret", "a Redis password is not printed")
	}
	out := runCLI(t, "", "-h")
	require.Contains(t, out.stderr, "-redis URL")
	require.Contains(t, out.stderr, "-redis-timeout")
}

// TestRedisDownPacesAlone: with nothing at -redis, every request still goes
// (paced by this process alone), and -v says so.
func TestRedisDownPacesAlone(t *testing.T) {
	srv := newServer(t, statusHandler(200))
	code, r, out := runJSON(t, "-v", "-n", "6", "-c", "2", "-redis", "redis://"+deadAddr(t), "-redis-timeout", "100ms", srv.URL)
	require.Equal(t, exitOK, code, out.stderr)
	require.Equal(t, 6, r.Succeeded)
	require.Contains(t, out.stderr, "ratecurl: pacing state: redis unavailable (")
	require.Contains(t, out.stderr, "pacing alone until it answers")
}

// TestRedisShared: three ratecurl runs at once share one quota through a
// real Redis: every attempt's lease is in the one shared state.
func TestRedisShared(t *testing.T) {
	addr := startRedisServer(t)
	srv := ratelimittest.NewServer(nil, ratelimittest.WithQuota(ratelimittest.Quota{
		Algorithm: ratelimittest.FixedWindow, Limit: 30, Window: time.Second}))
	defer srv.Close()
	var wg sync.WaitGroup
	outs := make([]cli, 3)
	for i := range outs {
		wg.Go(func() {
			outs[i] = runCLI(t, "", "-json", "-v", "-n", "20", "-c", "4", "-redis", "redis://"+addr, srv.URL+"/items")
		})
	}
	wg.Wait()
	for _, out := range outs {
		require.Equal(t, exitOK, out.code, out.stderr)
		require.NotContains(t, out.stderr, "pacing state:", "no switch: Redis answered throughout")
	}
	st := srv.Stats()
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	state, err := redisstore.New(client).Load(context.Background(), srv.Listener.Addr().String())
	require.NoError(t, err)
	// Every attempt took its lease in Redis (and a lease reserved ahead,
	// on a store slow enough, may have been given back unsent).
	require.GreaterOrEqual(t, leasesTaken(t, state), uint64(st.Served+st.Rejected), "every attempt took its lease in Redis")
	require.LessOrEqual(t, leasesTaken(t, state), uint64(st.Served+st.Rejected+8), "every attempt took its lease in Redis")
	// Paced as one: the first window's end, which its resets (whole
	// seconds, rounded up) put anywhere in the next second, may cost a
	// probe besides the refusal that tells the policy; three runs pacing
	// alone are refused 5-9%.
	require.LessOrEqual(t, st.Rejected, int64(2), "the three runs paced as one")
}

// leasesTaken returns how many leases a key's state has granted: the
// number of the next lease, less one. The next lease is reserved on the
// caller's copy (nothing is written back), late enough that every lease
// has expired and every pause has ended, and again when it must wait.
func leasesTaken(t *testing.T, state pace.State) uint64 {
	t.Helper()
	at := time.Now().Add(pace.DefaultLeaseTTL + time.Hour)
	var d pace.Decision
	for range 100 {
		if d = state.Reserve(at, pace.Request{}, nil); d.OK {
			return d.Lease.Seq() - 1
		}
		at = d.At
	}
	t.Fatalf("the loaded state grants no lease: it waits until %v (%v: %s)", d.At, d.Why, d.Detail)
	return 0
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	return addr
}

// startRedisServer starts a redis-server of the test's own on a free
// loopback port, stopped when the test ends, and returns its address.
// Without the binary the test is skipped, unless HEADWAY_REQUIRE_REDIS is
// set (as .ci/run sets it).
func startRedisServer(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("HEADWAY_REQUIRE_REDIS") != "" {
			t.Fatal("HEADWAY_REQUIRE_REDIS is set but redis-server is not installed: apt-get install -y redis-server")
		}
		t.Skip("redis-server is not installed (apt-get install -y redis-server); set HEADWAY_REQUIRE_REDIS=1 to fail instead")
	}
	addr := deadAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := client.Ping(ctx).Err()
		cancel()
		if err == nil {
			return addr
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("redis-server exited: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal(errors.Join(fmt.Errorf("redis-server on %s does not answer", addr), err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

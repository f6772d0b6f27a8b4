package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// The integration tests run against real redis-server processes of their
// own, on free loopback ports: one shared by the tests that only read and
// write, and one per test that kills or pauses its server. Without the
// redis-server binary they are skipped, unless HEADWAY_REQUIRE_REDIS is set
// (as .ci/run sets it), in which case the package fails.

var (
	// sharedRedis is the server TestMain starts, nil when skipping.
	sharedRedis *redisServer
	// skipRedis says why the integration tests are skipped ("" to run).
	skipRedis string
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // go-redis logs each failed dial: the tests fail dials on purpose
	code := func() int {
		if _, err := exec.LookPath("redis-server"); err != nil {
			if os.Getenv("HEADWAY_REQUIRE_REDIS") != "" {
				fmt.Fprintln(os.Stderr, "redisstore: HEADWAY_REQUIRE_REDIS is set but redis-server is not installed: "+
					"apt-get install -y redis-server")
				return 1
			}
			skipRedis = "redis-server is not installed (apt-get install -y redis-server); " +
				"set HEADWAY_REQUIRE_REDIS=1 to fail instead of skipping"
			return m.Run()
		}
		srv, err := startRedis()
		if err != nil {
			fmt.Fprintln(os.Stderr, "redisstore:", err)
			return 1
		}
		sharedRedis = srv
		defer srv.stop()
		return m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// quiet is a go-redis logger that says nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// requireRedis skips t when the integration tests cannot run.
func requireRedis(t *testing.T) {
	t.Helper()
	if skipRedis != "" {
		t.Skip(skipRedis)
	}
}

// redisServer is a redis-server process on a loopback port, without
// persistence: killed and started again, it comes back empty.
type redisServer struct {
	port int
	addr string

	mu  sync.Mutex
	cmd *exec.Cmd
	out *bytes.Buffer // its output, for failures
	ch  chan struct{} // closed when it has exited
}

// startRedis starts a server on a free loopback port.
func startRedis() (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &redisServer{port: port, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	return r, r.start()
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// newRedis starts a server of t's own, stopped when t ends.
func newRedis(t *testing.T) *redisServer {
	t.Helper()
	requireRedis(t)
	r, err := startRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	return r
}

// start starts the server on its port and waits until it answers.
func (r *redisServer) start() error {
	cmd := exec.Command("redis-server",
		"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	ch := make(chan struct{})
	go func() { cmd.Wait(); close(ch) }()
	r.mu.Lock()
	r.cmd, r.out, r.ch = cmd, out, ch
	r.mu.Unlock()

	c := redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ch:
			return fmt.Errorf("redis-server exited at start: %s", out)
		default:
		}
		if time.Now().After(deadline) {
			r.stop()
			return fmt.Errorf("redis-server on %s does not answer: %v\n%s", r.addr, err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signal sends sig to the server.
func (r *redisServer) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Signal(sig)
	}
}

// kill kills the server (SIGKILL) and waits until it has exited.
func (r *redisServer) kill() {
	r.signal(syscall.SIGCONT) // a paused process dies only once resumed
	r.signal(syscall.SIGKILL)
	r.mu.Lock()
	ch := r.ch
	r.cmd = nil
	r.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// pause stops the server (SIGSTOP): it keeps its connections, and answers
// nothing until resume.
func (r *redisServer) pause() { r.signal(syscall.SIGSTOP) }

// resume continues a paused server (SIGCONT).
func (r *redisServer) resume() { r.signal(syscall.SIGCONT) }

// stop kills the server, if it runs.
func (r *redisServer) stop() { r.kill() }

// client returns a client of the server, closed when t ends.
func (r *redisServer) client(t *testing.T, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: r.addr, ContextTimeoutEnabled: true}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// deleteKeys deletes the keys that start with prefix.
func deleteKeys(c redis.UniversalClient, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, escapeGlob(prefix)+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	return c.Del(ctx, keys...).Err()
}

// escapeGlob escapes the characters that SCAN's MATCH treats specially.
func escapeGlob(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(b)
}

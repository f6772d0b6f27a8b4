package headway_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/testkit/sim"
	"github.com/headway-go/headway/pace"
)

// slowReadStore is a shared store (not the in-process one) that takes 20 ms
// to read, as a remote one does.
type slowReadStore struct{ m *pace.MemoryStore }

func (s slowReadStore) Load(ctx context.Context, key string) (pace.State, error) {
	time.Sleep(20 * time.Millisecond)
	return s.m.Load(ctx, key)
}
func (s slowReadStore) CompareAndSwap(ctx context.Context, key string, v uint64, next pace.State) (bool, error) {
	return s.m.CompareAndSwap(ctx, key, v, next)
}

// TestLearntCapAcrossLines: the window is the key's, shared by its lines.
// A POST that its own quota refuses must not hold a place in it while it
// reads a slow shared store: a GET of another line that found the window
// full then slept until max wait (1m4s), though the window had room.
// A place is now taken only once the request is granted.
func TestLearntCapAcrossLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/long" {
				time.Sleep(100 * time.Second)
			} else {
				time.Sleep(time.Second)
			}
		})
		start := time.Now()
		rt := headway.NewTransport(sim.Transport{Handler: api, RTT: time.Millisecond},
			headway.WithStore(slowReadStore{pace.NewMemoryStore(time.Now)}),
			headway.WithQuota("POST api.test/jobs", 1, time.Hour), headway.WithoutRetries())
		c := &http.Client{Transport: rt}
		do := func(method, path string) (time.Duration, error) {
			req, _ := http.NewRequest(method, "http://api.test"+path, nil)
			resp, err := c.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return time.Since(start), err
		}
		_, err := do("POST", "/jobs") // the quota's one; the window grows to 2
		require.NoError(t, err)
		time.Sleep(time.Second)
		longDone := make(chan struct{})
		go func() { do("GET", "/long"); close(longDone) }() // one slot of 2, for 100 s
		time.Sleep(time.Second)
		aErr := make(chan error, 1)
		go func() { _, err := do("POST", "/jobs"); aErr <- err }() // takes the other slot while it reads the store
		time.Sleep(5 * time.Millisecond)
		bDone := make(chan time.Duration, 1)
		bStart := time.Since(start)
		go func() { at, err := do("GET", "/b"); require.NoError(t, err); bDone <- at }()
		require.Error(t, <-aErr, "the POST is refused: its quota is spent for an hour")
		aAt := time.Since(start)
		at := <-bDone
		t.Logf("B asked at %v, the window had room from %v, B answered at %v", bStart, aAt, at)
		<-longDone
		require.Less(t, at-aAt, 5*time.Second, "B should go once the POST gave its slot back")
	})
}

// TestLearntCapAfterSweep: a key whose answers name a quota has no
// window, even once its waiters were swept (idle 1-2 minutes, while its
// pacing state lives on). The window started again at one request, and a
// fast request behind a slow one waited 29 s for it. A window now opens
// only with an answer that names nothing.
func TestLearntCapAfterSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("RateLimit-Policy", `"default";q=100000;w=60`)
			w.Header().Set("RateLimit", `"default";r=99999;t=60`)
			if r.URL.Path == "/slow" {
				time.Sleep(30 * time.Second)
			}
		})
		rt := headway.NewTransport(sim.Transport{Handler: api, RTT: 10 * time.Millisecond}, headway.WithoutRetries())
		c := &http.Client{Transport: rt}
		get := func(url string) time.Duration {
			t0 := time.Now()
			resp, err := c.Get(url)
			require.NoError(t, err)
			resp.Body.Close()
			return time.Since(t0)
		}
		get("http://api.test/fast") // named: no window
		// before the sweep: slow and fast go together
		go get("http://api.test/slow")
		time.Sleep(time.Second)
		require.Less(t, get("http://api.test/fast"), time.Second)
		time.Sleep(40 * time.Second)
		// idle, but for requests to other hosts, which sweep
		for range 3 {
			time.Sleep(61 * time.Second)
			get("http://other.test/x")
		}
		time.Sleep(time.Second)
		slow := make(chan struct{})
		go func() { get("http://api.test/slow"); close(slow) }()
		time.Sleep(time.Second)
		d := get("http://api.test/fast")
		<-slow
		t.Logf("a fast request behind a slow one after the sweep took %v", d)
		require.Less(t, d, time.Second, "the key names its quota: it has no window")
	})
}

// TestLearntCapKeepsRetryAfter: a 429 with a Retry-After but no quota
// headers is a rate's, told to the pacing state, which pauses the key.
// Taken for a cap's, it was not told, and the next request went 1 ms
// later, into the server's pause.
func TestLearntCapKeepsRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n, sentDuringPause atomic.Int64
		var pauseUntil atomic.Int64
		start := time.Now()
		api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			now := int64(time.Since(start))
			if now < pauseUntil.Load() {
				sentDuringPause.Add(1)
				w.Header().Set("Retry-After", "30")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			if n.Add(1) == 4 { // the rate limiter's turn: pause 30 s
				pauseUntil.Store(now + int64(30*time.Second))
				w.Header().Set("Retry-After", "30")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			time.Sleep(100 * time.Millisecond)
		})
		rt := headway.NewTransport(sim.Transport{Handler: api, RTT: time.Millisecond}, headway.WithoutRetries())
		c := &http.Client{Transport: rt}
		get := func() int {
			resp, err := c.Get("http://api.test/x")
			if err != nil {
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		get() // window 2
		// two workers
		done := make(chan struct{})
		for range 2 {
			go func() {
				for range 4 {
					get()
				}
				done <- struct{}{}
			}()
		}
		<-done
		<-done
		t.Logf("requests sent into the server's 30 s pause: %d", sentDuringPause.Load())
		// One arrives with the 429 (it was in flight): unavoidable.
		require.LessOrEqual(t, sentDuringPause.Load(), int64(1), "Retry-After pauses the key")
	})
}

// TestLearntCapLongPolls: a silent API (no rate-limit headers) with long
// polls in flight (a watcher's loop). The window grew only as answers
// came, so a request behind the long polls waited for them and was
// refused at max wait, though the server has no cap at all. A window
// that stays full without an answer for windowStall now grows all the
// same (a cap's 429 would have come at once).
func TestLearntCapLongPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var served atomic.Int64
		api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/poll" {
				time.Sleep(90 * time.Second)
			}
			served.Add(1)
		})
		rt := headway.NewTransport(sim.Transport{Handler: api, RTT: 10 * time.Millisecond}, headway.WithoutRetries())
		c := &http.Client{Transport: rt}
		get := func(path string) (time.Duration, error) {
			t0 := time.Now()
			resp, err := c.Get("http://api.test" + path)
			if err == nil {
				resp.Body.Close()
			}
			return time.Since(t0), err
		}
		_, err := get("/x") // the key's first answer: window 2
		require.NoError(t, err)
		polls := make(chan error, 3)
		for range 3 {
			go func() { _, err := get("/poll"); polls <- err }()
		}
		time.Sleep(time.Second)
		d, err := get("/x")
		t.Logf("a plain GET behind 3 long polls: %v, %v", d, err)
		for range 3 {
			<-polls
		}
		require.NoError(t, err)
		require.Less(t, d, time.Second)
	})
}

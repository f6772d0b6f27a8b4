package headway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/ratelimittest"
)

// A server that refuses the first request with 429 and Retry-After.
func flakyServer() *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After-Ms", "20")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "hello")
	}))
}

// New returns a client with the recommended stack: it waits as the server
// asks and retries.
func ExampleNew() {
	srv := flakyServer()
	defer srv.Close()

	client := headway.New()
	resp, err := client.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 hello
}

// Wrap adds headway to a client you already have, keeping its timeout,
// cookies and redirect policy; the original client is left untouched.
func ExampleWrap() {
	srv := flakyServer()
	defer srv.Close()

	base := &http.Client{Timeout: 10 * time.Second}
	client := headway.Wrap(base, headway.WithMaxAttempts(3), headway.WithJitter(headway.JitterEqual))
	resp, err := client.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, base.Transport == nil)
	// Output: 200 true
}

// NewTransport wraps any RoundTripper, for clients built elsewhere.
func ExampleNewTransport() {
	srv := flakyServer()
	defer srv.Close()

	client := &http.Client{Transport: headway.NewTransport(http.DefaultTransport, headway.WithMaxWait(30*time.Second))}
	resp, err := client.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output: 200
}

// ContextWithStats tells how many attempts a request took and how long it
// waited.
func ExampleContextWithStats() {
	srv := flakyServer()
	defer srv.Close()

	var st headway.Stats
	req, _ := http.NewRequestWithContext(headway.ContextWithStats(context.Background(), &st), "GET", srv.URL, nil)
	resp, err := headway.New().Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("attempts:", st.Attempts, "throttled:", st.Throttled, "waited at least 20ms:", st.Waited >= 20*time.Millisecond)
	// Output: attempts: 2 throttled: 1 waited at least 20ms: true
}

// When the server asks for a wait longer than the client accepts, headway
// gives up at once with a *RateLimitError instead of hanging.
func ExampleRateLimitError() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		http.Error(w, "quota exhausted", http.StatusTooManyRequests)
	}))
	defer srv.Close()

	_, err := headway.New(headway.WithMaxWait(time.Minute)).Get(srv.URL)
	var rle *headway.RateLimitError
	if errors.As(err, &rle) {
		fmt.Println(errors.Is(err, headway.ErrRateLimitExceeded), rle.Reason, rle.RetryAfter, rle.Attempts)
	}
	// Output: true wait longer than max wait 1h0m0s 1
}

// A test of your own client can run an emulated API and headway on one
// ratelimittest.ManualClock: nothing sleeps on the real clock, and the
// client waits what the server's answers imply. (Two requests a second
// could be a bucket refilling one every half second or a window: the
// third request tests the bucket, is refused, and the rest wait for the
// window.)
func ExampleWithClock() {
	clock := ratelimittest.NewManualClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	srv := ratelimittest.NewServer(api, ratelimittest.WithClock(clock),
		ratelimittest.WithQuota(ratelimittest.Quota{Limit: 2, Window: time.Second}))
	defer srv.Close()
	client := headway.Wrap(srv.Client(), headway.WithClock(clock), headway.WithRandSource(rand.NewPCG(1, 2)))

	// Move the fake time on whenever the client waits for it.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		for clock.BlockUntilWaiting(ctx, 1) == nil {
			clock.Advance(10 * time.Millisecond)
		}
	}()

	start := clock.Now()
	for range 5 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}
	st := srv.Stats()
	fmt.Println("served:", st.Served, "refused:", st.Rejected, "fake seconds:", clock.Now().Sub(start).Truncate(time.Second).Seconds())
	// Output: served: 5 refused: 1 fake seconds: 2
}

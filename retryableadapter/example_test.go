package retryableadapter_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	retryablehttp "github.com/hashicorp/go-retryablehttp"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/retryableadapter"
)

// A go-retryablehttp client that treats Retry-After as law: the first
// answer is a 429 asking for 20 ms, and the client waits that long (not a
// jittered guess) before its second and last attempt.
func ExampleConfigure() {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			w.Header().Set("Retry-After-Ms", "20")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()

	client := retryablehttp.NewClient()
	client.Logger = nil
	retryableadapter.Configure(client,
		retryableadapter.WithMaxAttempts(3),
		retryableadapter.WithBackoffDelays(10*time.Millisecond, 2*time.Second))

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", attempts.Load(), "attempts")
	// Output: 200 hello after 2 attempts
}

// When the server asks for a wait longer than WithMaxWait, the client gives
// up at once with a *headway.RateLimitError instead of sleeping for hours.
func ExampleConfigure_rateLimitError() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()

	client := retryablehttp.NewClient()
	client.Logger = nil
	retryableadapter.Configure(client, retryableadapter.WithMaxWait(time.Minute))

	_, err := client.Get(srv.URL)
	var rle *headway.RateLimitError
	if errors.As(err, &rle) {
		fmt.Printf("gave up: %v after %d attempt; server asked for %v\n", rle.Reason, rle.Attempts, rle.RetryAfter)
	}
	// Output: gave up: wait longer than max wait after 1 attempt; server asked for 1h0m0s
}

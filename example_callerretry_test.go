package headway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway"
)

// An SDK that retries on its own (openai-go, anthropic-sdk-go: every
// Stainless-generated SDK) numbers its attempts in X-Stainless-Retry-Count.
// headway gives its first attempt the whole retry loop, tells it not to
// retry what headway gave up on (X-Should-Retry: false, which these SDKs
// obey), and does not send a later attempt: a backend that fails every
// call sees WithMaxAttempts requests per call, not their product with the
// SDK's retries.
func ExampleErrRetriedByCaller() {
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	client := headway.New(headway.WithBackoffDelays(time.Millisecond, time.Millisecond))

	// The SDK's loop, reduced: up to 2 retries, unless told not to.
	for n := 0; n <= 2; n++ {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/models", nil)
		req.Header.Set("X-Stainless-Retry-Count", strconv.Itoa(n))
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			break
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, "X-Should-Retry:", resp.Header.Get("X-Should-Retry"))
		if resp.Header.Get("X-Should-Retry") == "false" {
			break
		}
	}
	fmt.Println("requests the server saw:", seen.Load())
	// Output:
	// 503 X-Should-Retry: false
	// requests the server saw: 4
}

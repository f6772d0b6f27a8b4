package ratelimittest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/headway-go/headway/ratelimittest"
)

// A test server that allows 3 requests a minute and says so in the IETF
// headers; the fourth request is refused with Retry-After. (Its window
// starts at the first request, so that the four fall in one window
// however slowly they run; a window on the clock's minutes could end
// between two of them.)
func ExampleNewServer() {
	srv := ratelimittest.NewServer(nil,
		ratelimittest.WithQuota(ratelimittest.Quota{Name: "api", Limit: 3, Window: time.Minute, Anchor: ratelimittest.AnchorFirstRequest}),
		ratelimittest.WithDialect(ratelimittest.IETF))
	defer srv.Close()

	for range 4 {
		res, err := srv.Client().Get(srv.URL + "/v1/items")
		if err != nil {
			panic(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		fmt.Println(res.StatusCode, res.Header.Get("RateLimit-Policy"), res.Header.Get("Retry-After") != "")
	}
	st := srv.Stats()
	fmt.Println("served", st.Served, "rejected", st.Rejected)
	// Output:
	// 200 "api";q=3;w=60 false
	// 200 "api";q=3;w=60 false
	// 200 "api";q=3;w=60 false
	// 429 "api";q=3;w=60 true
	// served 3 rejected 1
}

// On a ManualClock nothing sleeps: a token bucket of 2 refilling one token
// per 500ms, driven through time by hand.
func ExampleWithClock() {
	clock := ratelimittest.NewManualClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	h, err := ratelimittest.NewHandler(nil, ratelimittest.WithClock(clock),
		ratelimittest.WithQuota(ratelimittest.Quota{Algorithm: ratelimittest.TokenBucket, Limit: 2, Window: time.Second}),
		ratelimittest.WithDialect(ratelimittest.XRateLimit))
	if err != nil {
		panic(err)
	}
	send := func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		fmt.Printf("%s %d remaining=%s retry-after=%q\n", clock.Now().Format("15:04:05.000"), rec.Code,
			rec.Header().Get("X-RateLimit-Remaining"), rec.Header().Get("Retry-After"))
	}
	send()
	send()
	send()
	clock.Advance(500 * time.Millisecond)
	send()
	// Output:
	// 12:00:00.000 200 remaining=1 retry-after=""
	// 12:00:00.000 200 remaining=0 retry-after=""
	// 12:00:00.000 429 remaining=0 retry-after="1"
	// 12:00:00.500 200 remaining=0 retry-after=""
}

// The middleware form wraps an existing handler: here a quota per API key,
// 100 per minute and 1000 per day, in GitHub's headers.
func ExampleNewHandler() {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	h, err := ratelimittest.NewHandler(api,
		ratelimittest.WithPartition(ratelimittest.ByHeader("X-Api-Key")),
		ratelimittest.WithQuota(ratelimittest.Quota{Algorithm: ratelimittest.SlidingLog, Limit: 100, Window: time.Minute}),
		ratelimittest.WithQuota(ratelimittest.Quota{Name: "core", Limit: 1000, Window: 24 * time.Hour}),
		ratelimittest.WithDialect(ratelimittest.GitHub))
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("X-Api-Key", "alice")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	fmt.Print(res.StatusCode, " ", string(body))
	fmt.Println("limit", res.Header.Get("X-RateLimit-Limit"), "remaining", res.Header.Get("X-RateLimit-Remaining"))
	fmt.Println(h)
	// Output:
	// 200 hello
	// limit 100 remaining 99
	// sliding-log 100 requests per 1m0s and fixed-window 1000 requests per 24h0m0s, per key; headers github; rejections 429 with Retry-After seconds
}

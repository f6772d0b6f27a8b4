package headway_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/ratelimit"
	"github.com/headway-go/headway/ratelimittest"
)

// onFakeTime moves clock on whenever the code under test waits on it and
// none of c's requests is on its way, until the returned stop is called:
// the examples below run minutes of an API's time in milliseconds. (A
// request on its way over loopback takes real time; were the fake clock
// to move meanwhile, the server would count it in a later window than the
// one it was sent in.)
func onFakeTime(clock *ratelimittest.ManualClock, c *http.Client) (stop func()) {
	f := &inFlight{next: c.Transport}
	if f.next == nil {
		f.next = http.DefaultTransport
	}
	c.Transport = f
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for clock.BlockUntilWaiting(ctx, 1) == nil {
			runtime.Gosched() // what the last step woke goes first
			if f.n.Load() == 0 {
				clock.Advance(10 * time.Millisecond)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// inFlight counts the requests on their way.
type inFlight struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (f *inFlight) RoundTrip(r *http.Request) (*http.Response, error) {
	f.n.Add(1)
	defer f.n.Add(-1)
	return f.next.RoundTrip(r)
}

// A GitHub-style API with a primary limit (5,000 requests an hour, the
// "core" resource) and a secondary one (here 10 requests a second): headway
// reads both from X-RateLimit-* and the 429s' Retry-After, and 40 parallel
// requests are spread at the secondary limit's pace. Ten a second could be
// a window or a bucket refilling one every tenth of a second, among
// others: until the answers tell, headway tests the faster explanation
// with a request, which this server refuses. How many such tests it takes
// depends on the order in which the goroutines run (one in most runs,
// sometimes two to four); the probe budget keeps them under 1% of a long
// run's requests.
func Example_gitHub() {
	clock := ratelimittest.NewManualClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"login":"octocat"}`) })
	srv := ratelimittest.NewServer(api, ratelimittest.WithClock(clock), ratelimittest.WithDialect(ratelimittest.GitHub),
		ratelimittest.WithQuota(ratelimittest.Quota{Name: "core", Limit: 5000, Window: time.Hour}),
		ratelimittest.WithQuota(ratelimittest.Quota{Name: "secondary", Limit: 10, Window: time.Second}))
	defer srv.Close()
	base := srv.Client()
	defer onFakeTime(clock, base)()

	client := headway.Wrap(base, headway.WithClock(clock))
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get(srv.URL + "/user")
			if err != nil {
				log.Fatal(err)
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()
	st := srv.Stats()
	fmt.Println("served:", st.Served, "refused at most 4:", st.Rejected <= 4)
	// Output: served: 40 refused at most 4: true
}

// An OpenAI-style API counts tokens per minute as well as requests. Each
// request declares what it will cost with ContextWithCost; headway draws it
// from the server's tokens policy and holds requests back until there is
// room, so none is refused although they need 4 minutes' worth of tokens.
func ExampleContextWithCost() {
	clock := ratelimittest.NewManualClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"choices":[]}`) })
	srv := ratelimittest.NewServer(api, ratelimittest.WithClock(clock), ratelimittest.WithDialect(ratelimittest.OpenAI),
		ratelimittest.WithQuota(ratelimittest.Quota{Limit: 500, Window: time.Minute}),
		ratelimittest.WithQuota(ratelimittest.Quota{Unit: ratelimittest.UnitTokens, Limit: 10000, Window: time.Minute,
			Cost: ratelimittest.CostFromHeader("X-Estimated-Tokens", 1)}))
	defer srv.Close()
	base := srv.Client()
	defer onFakeTime(clock, base)()

	client := headway.Wrap(base, headway.WithClock(clock), headway.WithMaxWait(2*time.Minute))
	start := clock.Now()
	for range 20 {
		ctx := headway.ContextWithCost(context.Background(), ratelimit.UnitTokens, 2000)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", nil)
		req.Header.Set("X-Estimated-Tokens", "2000") // what this emulated API charges
		resp, err := client.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}
	st := srv.Stats()
	fmt.Println("served:", st.Served, "refused:", st.Rejected, "minutes:", int(clock.Now().Sub(start).Minutes()))
	// Output: served: 20 refused: 0 minutes: 3
}

// Limits known from an API's documentation are declared per route, before
// any header arrives: here 10 a minute on POST /games and 120 a minute on
// GET /games/{id}, for a server that sends no rate-limit headers at all.
func ExampleWithQuota() {
	clock := ratelimittest.NewManualClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	posts := map[int]int{} // POSTs per minute since the start
	start := clock.Now()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			mu.Lock()
			posts[int(clock.Now().Sub(start).Minutes())]++
			mu.Unlock()
		}
	})
	srv := ratelimittest.NewServer(api, ratelimittest.WithClock(clock), ratelimittest.WithDialect(ratelimittest.None),
		ratelimittest.WithQuota(ratelimittest.Quota{Limit: 1000, Window: time.Minute}))
	defer srv.Close()
	base := srv.Client()
	defer onFakeTime(clock, base)()

	host := "127.0.0.1" // a pattern's host matches without the port
	client := headway.Wrap(base, headway.WithClock(clock), headway.WithMaxWait(5*time.Minute),
		headway.WithQuota("POST "+host+"/games", 10, time.Minute),
		headway.WithQuota("GET "+host+"/games/{id}", 120, time.Minute))
	for i := range 25 {
		resp, err := client.Post(srv.URL+"/games", "application/json", nil)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		resp, err = client.Get(fmt.Sprintf("%s/games/%d", srv.URL, i))
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}
	fmt.Println("POSTs in minutes 0, 1, 2:", posts[0], posts[1], posts[2])
	// Output: POSTs in minutes 0, 1, 2: 10 10 5
}

// A ceiling of the caller's own, as a golang.org/x/time/rate Limiter: here
// 5 requests a second with a burst of 2 on a server that allows far more.
// The limiter runs on headway's clock, so the waits are exact.
func ExampleWithLimiter() {
	clock := ratelimittest.NewManualClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var seen []time.Duration
	start := clock.Now()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, clock.Now().Sub(start).Round(time.Millisecond))
		mu.Unlock()
	})
	srv := ratelimittest.NewServer(api, ratelimittest.WithClock(clock), ratelimittest.WithDialect(ratelimittest.None),
		ratelimittest.WithQuota(ratelimittest.Quota{Limit: 1000, Window: time.Second}))
	defer srv.Close()
	base := srv.Client()
	defer onFakeTime(clock, base)()

	client := headway.Wrap(base, headway.WithClock(clock), headway.WithLimiter(rate.NewLimiter(5, 2)))
	for range 5 {
		resp, err := client.Get(srv.URL + "/items")
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}
	fmt.Println("sent at:", seen)
	// Output: sent at: [0s 0s 200ms 400ms 600ms]
}

// An API that allows 2 requests at once, and refuses a third with a 429:
// WithMaxInFlight keeps 8 goroutines to 2 in flight, and none is refused.
func ExampleWithMaxInFlight() {
	var now, most, refused atomic.Int64
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := now.Add(1)
		defer now.Add(-1)
		if n > 2 {
			refused.Add(1)
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(5 * time.Millisecond) // the work
	})
	srv := httptest.NewServer(api)
	defer srv.Close()

	client := headway.Wrap(srv.Client(), headway.WithMaxInFlight(2))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			resp, err := client.Get(srv.URL + "/render")
			if err != nil {
				log.Fatal(err)
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	fmt.Println("most at once:", most.Load(), "refused:", refused.Load())
	// Output: most at once: 2 refused: 0
}

// Requests someone waits on go before background work that waits for the
// same quota: ContextWithPriority orders the key's line.
func ExampleContextWithPriority() {
	client := headway.New(headway.WithQuota("api.example.com/", 100, time.Minute))

	// A backfill, at low priority.
	batch := headway.ContextWithPriority(context.Background(), headway.PriorityBatch)
	for i := range 500 {
		go func() {
			req, _ := http.NewRequestWithContext(batch, http.MethodGet, fmt.Sprintf("https://api.example.com/items/%d", i), nil)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}

	// A user's request goes at the quota's next opening, before the
	// backfill's.
	ctx := headway.ContextWithPriority(context.Background(), headway.PriorityInteractive)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/items/42", nil)
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
	}
}

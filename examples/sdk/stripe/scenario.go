package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/examples/sdk/internal/sdkrun"
	"github.com/headway-go/headway/ratelimittest"
)

// quota is the emulated API's: Stripe's documented limit for a sandbox
// (25 requests a second; 100 in live mode), as a token bucket. Stripe
// sends no rate-limit counters: a refusal is a bare 429.
var quota = ratelimittest.Quota{Algorithm: ratelimittest.TokenBucket, Limit: 25, Window: time.Second}

// newAPI returns the emulated Stripe API: POST /v1/customers behind quota,
// with no rate-limit headers, refusals written as Stripe writes them (a
// JSON error of code rate_limit, Stripe-Rate-Limited-Reason, no
// Retry-After). A nil clock is the real one.
func newAPI(clock ratelimittest.Clock) *ratelimittest.Handler {
	opts := []ratelimittest.Option{ratelimittest.WithQuota(quota), ratelimittest.WithDialect(ratelimittest.None),
		ratelimittest.WithRetryAfter(ratelimittest.RetryAfterNone)}
	if clock != nil {
		opts = append(opts, ratelimittest.WithClock(clock))
	}
	h, err := ratelimittest.NewHandler(http.HandlerFunc(customers), opts...)
	if err != nil {
		panic(err)
	}
	return h
}

// customers answers POST /v1/customers.
func customers(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/customers" {
		stripeError(w, http.StatusNotFound, "resource_missing", "")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Idempotency-Key", r.Header.Get("Idempotency-Key"))
	io.WriteString(w, `{"id":"cus_1","object":"customer"}`)
}

// stripeError writes a Stripe API error; shouldRetry, when not "", is its
// Stripe-Should-Retry.
func stripeError(w http.ResponseWriter, status int, code, shouldRetry string) {
	if shouldRetry != "" {
		w.Header().Set("Stripe-Should-Retry", shouldRetry)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"type":"invalid_request_error","code":%q,"message":"emulated"}}`, code)
}

// stripeDialect rewrites the emulated limiter's refusals into Stripe's.
func stripeDialect(limiter http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		limiter.ServeHTTP(rec, r)
		if rec.Code == http.StatusTooManyRequests {
			w.Header().Set("Stripe-Rate-Limited-Reason", "global-rate")
			stripeError(w, http.StatusTooManyRequests, "rate_limit", "")
			return
		}
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

// A setup is one way to combine stripe-go with an http.Client over base.
type setup struct {
	name      string
	retries   int64 // stripe-go's MaxNetworkRetries
	transport func(base http.RoundTripper) http.RoundTripper
}

var setups = []setup{
	{name: "stripe-go alone (2 retries)", retries: 2, transport: func(base http.RoundTripper) http.RoundTripper { return base }},
	{name: "stripe-go on headway, limit learnt", transport: func(base http.RoundTripper) http.RoundTripper {
		return headway.NewTransport(base)
	}},
	{name: "stripe-go on headway (README)", transport: readme},
}

// readme is the README's way: stripe-go's own retries are off (its
// MaxNetworkRetries 0) and headway retries: it honours Stripe-Should-Retry,
// and the Idempotency-Key stripe-go puts on every POST makes those safe to
// repeat. Stripe sends no counters, so its documented limit is declared
// (25 a second in a sandbox, 100 in live mode) and nothing is refused.
func readme(base http.RoundTripper) http.RoundTripper {
	return headway.NewTransport(base, headway.WithQuota("/v1/", 25, time.Second))
}

// newClient makes a stripe-go client of the API at baseURL, over rt.
func newClient(rt http.RoundTripper, baseURL string, retries int64) *stripe.Client {
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient:        &http.Client{Transport: rt},
		URL:               stripe.String(baseURL),
		MaxNetworkRetries: stripe.Int64(retries),
		EnableTelemetry:   stripe.Bool(false),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return stripe.NewClient("sk_test_emulated", stripe.WithBackends(backends))
}

// createCustomers makes calls Customers.Create calls from workers
// goroutines through s's client over base, to the API at baseURL served by
// api, each exchange taking rtt.
func createCustomers(s setup, base http.RoundTripper, baseURL string, api *ratelimittest.Handler, calls, workers int, rtt time.Duration) sdkrun.Result {
	sc := newClient(s.transport(base), baseURL, s.retries)
	start := time.Now()
	res := sdkrun.Run(calls, workers, func(i int) sdkrun.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := sc.V1Customers.Create(ctx, &stripe.CustomerCreateParams{Email: stripe.String(fmt.Sprintf("c%d@example.com", i))})
		return sdkrun.Outcome{Err: err}
	})
	res.Name = s.name
	res.Count(api.Stats())
	res.Ideal = sdkrun.Ideal(start, calls, rtt,
		func(c ratelimittest.Clock) http.Handler { return newAPI(c) },
		func(i int) *http.Request {
			req, _ := http.NewRequest(http.MethodPost, "http://api.stripe.test/v1/customers", strings.NewReader("email=x"))
			return req
		})
	return res
}

// verdicts is a backend whose first answer to each operation (each
// Idempotency-Key) is a failure carrying Stripe-Should-Retry: a 409 with
// "true" (a lock timeout: safe to repeat, and headway would not repeat a
// 409 otherwise) for even calls, a 500 with "false" (headway would repeat
// a keyed POST's 500 otherwise) for odd ones. Later attempts succeed. It
// counts the attempts.
type verdicts struct {
	mu   sync.Mutex
	seen map[string]bool
	sent atomic.Int64
}

func (v *verdicts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v.sent.Add(1)
	key := r.Header.Get("Idempotency-Key")
	v.mu.Lock()
	again := v.seen[key]
	v.seen[key] = true
	v.mu.Unlock()
	switch {
	case again:
		customers(w, r)
	case strings.Contains(r.FormValue("email"), "even"):
		stripeError(w, http.StatusConflict, "lock_timeout", "true")
	default:
		stripeError(w, http.StatusInternalServerError, "api_error", "false")
	}
}

// verdictCalls makes calls Customers.Create calls, alternately "even" and
// "odd", to a verdicts backend through stripe-go (with retries of its own)
// over rt, and returns how many succeeded and how many attempts the server
// saw.
func verdictCalls(rt func(http.RoundTripper) http.RoundTripper, retries int64, calls int, rtt time.Duration) (succeeded, sent int) {
	v := &verdicts{seen: map[string]bool{}}
	sc := newClient(rt(sdkrun.Memory{Handler: v, RTT: rtt}), "http://api.stripe.test", retries)
	for i := range calls {
		kind := "odd"
		if i%2 == 0 {
			kind = "even"
		}
		_, err := sc.V1Customers.Create(context.Background(), &stripe.CustomerCreateParams{Email: stripe.String(fmt.Sprintf("%s%d@example.com", kind, i))})
		if err == nil {
			succeeded++
		}
	}
	return succeeded, int(v.sent.Load())
}

package ratelimit_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

func ExampleParseHeaders() {
	// A 429 whose Retry-After is an HTTP-date. The client's clock is an hour
	// ahead of the server's, but the wait is measured against the response's
	// Date header, so it is still the two minutes the server meant.
	h := make(http.Header)
	h.Set("Date", "Wed, 25 Nov 2026 21:00:00 GMT")
	h.Set("Retry-After", "Wed, 25 Nov 2026 21:02:00 GMT")
	h.Set("X-Should-Retry", "true")
	received := time.Date(2026, time.November, 25, 22, 0, 0, 0, time.UTC)

	obs := ratelimit.ParseHeaders(h, http.StatusTooManyRequests, received)
	fmt.Println(obs.Status, obs.HasRetryAfter, obs.RetryAfter, obs.RetryAfterHeader, obs.ShouldRetry)

	// The millisecond variants are more precise and win over Retry-After.
	h.Set("Retry-After-Ms", "1500")
	obs = ratelimit.ParseHeaders(h, http.StatusTooManyRequests, received)
	fmt.Println(obs.RetryAfter, obs.RetryAfterHeader)

	// A response without rate-limit headers says nothing.
	obs = ratelimit.ParseHeaders(http.Header{"Content-Type": {"text/plain"}}, http.StatusOK, received)
	fmt.Println(obs.HasRetryAfter, obs.RetryAfter, obs.ShouldRetry)
	// Output:
	// 429 true 2m0s Retry-After retry
	// 1.5s Retry-After-Ms
	// false 0s none
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, time.November, 25, 21, 0, 0, 0, time.UTC)
	for _, v := range []string{
		"120",                               // delay-seconds
		"2.0",                               // fractional, as Shopify sends it
		"Wed, 25 Nov 2026 21:32:42 GMT",     // IMF-fixdate
		"Wednesday, 25-Nov-26 21:32:42 GMT", // RFC 850
		"Wed Nov 25 21:32:42 2026",          // asctime
		"Wed, 25 Nov 2026 21:32:42 UTC",     // "UTC" instead of "GMT"
		"Sun, 06 Nov 1994 08:49:37 GMT",     // in the past: retry now
		"99999999999",                       // absurd: clamped
		"-1",                                // invalid
	} {
		d, ok := ratelimit.ParseRetryAfter(v, now)
		fmt.Printf("%-35q %v %v\n", v, d, ok)
	}
	// Output:
	// "120"                               2m0s true
	// "2.0"                               2s true
	// "Wed, 25 Nov 2026 21:32:42 GMT"     32m42s true
	// "Wednesday, 25-Nov-26 21:32:42 GMT" 32m42s true
	// "Wed Nov 25 21:32:42 2026"          32m42s true
	// "Wed, 25 Nov 2026 21:32:42 UTC"     32m42s true
	// "Sun, 06 Nov 1994 08:49:37 GMT"     0s true
	// "99999999999"                       876000h0m0s true
	// "-1"                                0s false
}

func ExampleParseHeaders_policies() {
	// A 429 from a server speaking the IETF draft (-08 and later) and the
	// legacy X-RateLimit-* at once. The capture is years old; its resets
	// are measured against its Date, not against today.
	h := http.Header{
		"Date":                  {"Sun, 01 Mar 2009 10:00:00 GMT"},
		"Ratelimit-Policy":      {`"burst";q=100;w=60, "daily";q=1000;w=86400`},
		"Ratelimit":             {`"burst";r=0;t=30, "daily";r=905;t=50000`},
		"X-Ratelimit-Limit":     {"100"},
		"X-Ratelimit-Remaining": {"0"},
		"X-Ratelimit-Reset":     {"1235901630"}, // Unix time: Date + 30 s
		"Retry-After":           {"30"},
	}
	obs := ratelimit.ParseHeaders(h, http.StatusTooManyRequests, time.Now())
	fmt.Println(obs.Dialects, obs.RetryAfter)
	for _, p := range obs.Policies { // X-RateLimit-* repeats "burst": listed once
		fmt.Println(p, p.Exhausted())
	}
	// Output:
	// ietf-draft-08,x-ratelimit 30s
	// "burst" 0 of 100 requests left per 1m0s, resets in 30s true
	// "daily" 905 of 1000 requests left per 24h0m0s, resets in 13h53m20s false
}

func ExampleParseHeaders_vendors() {
	received := time.Date(2041, time.March, 14, 9, 26, 53, 0, time.UTC)
	for _, h := range []http.Header{
		{ // OpenAI: one policy per unit, resets as Go durations.
			"X-Ratelimit-Limit-Requests":     {"5000"},
			"X-Ratelimit-Remaining-Requests": {"4999"},
			"X-Ratelimit-Reset-Requests":     {"12ms"},
			"X-Ratelimit-Limit-Tokens":       {"800000"},
			"X-Ratelimit-Remaining-Tokens":   {"799000"},
			"X-Ratelimit-Reset-Tokens":       {"75ms"},
		},
		{ // GitHub: the resource names the policy; the reset is a Unix time.
			"X-Ratelimit-Limit":     {"5000"},
			"X-Ratelimit-Remaining": {"0"},
			"X-Ratelimit-Used":      {"5000"},
			"X-Ratelimit-Resource":  {"core"},
			"X-Ratelimit-Reset":     {"2246866613"}, // received + 10 min
		},
		{ // Shopify: "used/limit".
			"X-Shopify-Shop-Api-Call-Limit": {"39/40"},
		},
	} {
		obs := ratelimit.ParseHeaders(h, http.StatusOK, received)
		fmt.Println(obs.Dialects, obs.Policies)
	}
	// Output:
	// openai [4999 of 5000 requests left, resets in 12ms 799000 of 800000 tokens left, resets in 75ms]
	// github ["core" 0 of 5000 requests left, resets in 10m0s]
	// shopify [1 of 40 requests left]
}

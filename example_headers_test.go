package headway_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/headway-go/headway"
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

	obs := headway.ParseHeaders(h, http.StatusTooManyRequests, received)
	fmt.Println(obs.Status, obs.HasRetryAfter, obs.RetryAfter, obs.RetryAfterHeader, obs.ShouldRetry)

	// The millisecond variants are more precise and win over Retry-After.
	h.Set("Retry-After-Ms", "1500")
	obs = headway.ParseHeaders(h, http.StatusTooManyRequests, received)
	fmt.Println(obs.RetryAfter, obs.RetryAfterHeader)

	// A response without rate-limit headers says nothing.
	obs = headway.ParseHeaders(http.Header{"Content-Type": {"text/plain"}}, http.StatusOK, received)
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
		d, ok := headway.ParseRetryAfter(v, now)
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

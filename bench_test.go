package headway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	retryablehttp "github.com/hashicorp/go-retryablehttp"
)

// loBenchGet does one GET with do and drains and closes the response.
func loBenchGet(b *testing.B, do func() (*http.Response, error)) {
	resp, err := do()
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// loNewRetryablehttp returns a silent go-retryablehttp client with its default
// policy (RetryMax 4, DefaultRetryPolicy) and no real sleeping.
func loNewRetryablehttp() *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryWaitMin, c.RetryWaitMax = 0, time.Millisecond
	c.Backoff = func(_, _ time.Duration, _ int, _ *http.Response) time.Duration { return 0 }
	return c
}

// BenchmarkHotPath: the cost headway adds when nothing goes wrong, next to a
// plain http.Client and a go-retryablehttp client, each sending GETs to one
// loopback server answering 200 with a small body.
func BenchmarkHotPath(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()

	b.Run("headway", func(b *testing.B) {
		client := New() // its idle connections end with srv.Close
		b.ReportAllocs()
		for b.Loop() {
			loBenchGet(b, func() (*http.Response, error) { return client.Get(srv.URL) })
		}
	})
	b.Run("net-http", func(b *testing.B) {
		base := http.DefaultTransport.(*http.Transport).Clone()
		defer base.CloseIdleConnections()
		client := &http.Client{Transport: base}
		b.ReportAllocs()
		for b.Loop() {
			loBenchGet(b, func() (*http.Response, error) { return client.Get(srv.URL) })
		}
	})
	b.Run("retryablehttp", func(b *testing.B) {
		client := loNewRetryablehttp()
		defer client.HTTPClient.CloseIdleConnections()
		b.ReportAllocs()
		for b.Loop() {
			loBenchGet(b, func() (*http.Response, error) { return client.Get(srv.URL) })
		}
	})
}

// BenchmarkOutage503: attempts per request against a server that answers 503
// to everything. headway's default budget holds it near 1.1;
// go-retryablehttp's defaults make 1+RetryMax attempts. Both sleep 0 (a fake
// auto clock for headway, a zero Backoff for go-retryablehttp).
func BenchmarkOutage503(b *testing.B) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "down")
	}))
	defer srv.Close()

	report := func(b *testing.B, from int64) {
		b.ReportMetric(float64(hits.Load()-from)/float64(b.N), "attempts/req")
	}
	b.Run("headway", func(b *testing.B) {
		base := http.DefaultTransport.(*http.Transport).Clone()
		defer base.CloseIdleConnections()
		client := &http.Client{Transport: NewTransport(base, WithClock(loAutoClock()))}
		from := hits.Load()
		b.ReportAllocs()
		for b.Loop() {
			loBenchGet(b, func() (*http.Response, error) { return client.Get(srv.URL) })
		}
		report(b, from)
	})
	b.Run("headway-no-budget", func(b *testing.B) {
		base := http.DefaultTransport.(*http.Transport).Clone()
		defer base.CloseIdleConnections()
		client := &http.Client{Transport: NewTransport(base, WithClock(loAutoClock()), WithRetryBudget(nil))}
		from := hits.Load()
		b.ReportAllocs()
		for b.Loop() {
			loBenchGet(b, func() (*http.Response, error) { return client.Get(srv.URL) })
		}
		report(b, from)
	})
	b.Run("retryablehttp", func(b *testing.B) {
		client := loNewRetryablehttp()
		defer client.HTTPClient.CloseIdleConnections()
		from := hits.Load()
		b.ReportAllocs()
		for b.Loop() {
			resp, err := client.Get(srv.URL)
			if err == nil { // it gives up with an error after 1+RetryMax attempts
				b.Fatalf("want an error, got %d", resp.StatusCode)
			}
		}
		report(b, from)
	})
}

// staticTransport answers every request with the same 200 and no body: what
// is left in a benchmark over it is the cost of headway's own layers.
type staticTransport struct{ resp *http.Response }

func (s staticTransport) RoundTrip(*http.Request) (*http.Response, error) { return s.resp, nil }

// BenchmarkStackOverhead measures the layers alone on the hot path (a
// request with ample quota): no network; the responses have ordinary
// headers and no rate-limit headers ("plain"), or IETF and X-RateLimit
// headers of a quota ample at this rate ("ratelimit", as bench's
// RateLimitHeader), which the pacing layer reads only when its credit runs
// out (credit.go).
func BenchmarkStackOverhead(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "https://api.test/items", nil)
	for _, hdr := range []struct {
		name string
		h    http.Header
	}{
		{"plain", http.Header{"Content-Type": {"application/json"}, "Date": {"Wed, 25 Nov 2026 21:32:42 GMT"}, "Server": {"x"}}},
		{"ratelimit", http.Header{
			"Content-Type": {"application/json"}, "Date": {"Wed, 25 Nov 2026 21:32:42 GMT"},
			"Ratelimit-Policy": {`"default";q=1000000000;w=60`}, "Ratelimit": {`"default";r=999999999;t=30`},
			"X-Ratelimit-Limit": {"1000000000"}, "X-Ratelimit-Remaining": {"999999999"}, "X-Ratelimit-Reset": {"30"},
		}},
	} {
		base := staticTransport{&http.Response{StatusCode: 200, Body: http.NoBody, Header: hdr.h}}
		for _, tc := range []struct {
			name string
			rt   http.RoundTripper
		}{
			{"base", base},
			{"headway", NewTransport(base)},
			{"headway-retry-only", NewTransport(base, WithoutPacing())},
			{"headway-pacing-only", NewTransport(base, WithoutRetries())},
		} {
			b.Run(hdr.name+"/"+tc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := tc.rt.RoundTrip(req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

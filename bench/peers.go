package bench

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/go-resty/resty/v2"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/headway-go/headway"
)

// URL is where every benchmark request goes; the in-memory Transport never
// resolves it.
const URL = "http://api.example.test/v1/items/42"

// RateLimitHeader is the header of every response in the overhead
// benchmarks: both the IETF draft -08+ fields and X-RateLimit-*, as many
// APIs send during a migration, plus the usual Date and Content-Type.
func RateLimitHeader() http.Header {
	return http.Header{
		"Date":                  {"Wed, 25 Nov 2026 21:32:42 GMT"},
		"Content-Type":          {"application/json"},
		"Ratelimit-Policy":      {`"default";q=1000;w=60`},
		"Ratelimit":             {`"default";r=999;t=30`},
		"X-Ratelimit-Limit":     {"1000"},
		"X-Ratelimit-Remaining": {"999"},
		"X-Ratelimit-Reset":     {"30"},
	}
}

// Retry settings every peer is given, so that their configurations are
// comparable: up to 3 retries (4 attempts) of 429 and 5xx (but 501), with
// exponential backoff from 500 ms to 30 s (headway's defaults). On the
// benchmarks' path every response is a 200, so nothing waits.
const (
	MaxRetries = 3
	WaitMin    = headway.DefaultBaseDelay
	WaitMax    = headway.DefaultMaxDelay
)

// A Client sends one request of a benchmark and consumes its response: it
// drains and closes the body (or, for resty, lets resty read and close it,
// as it always does), and returns the status.
type Client func(method string, body []byte) (int, error)

// A Peer is one HTTP client under comparison.
type Peer struct {
	Name   string
	Module string // the module it comes from, if not the standard library
	// New returns a client sending through rt. wait, when not zero,
	// replaces the backoff bounds (tests use it to retry at once).
	New func(rt http.RoundTripper, wait time.Duration) Client
}

// Peers returns the clients compared, bare net/http first.
func Peers() []Peer {
	return []Peer{
		{"net-http", "", newNetHTTP},
		{"headway", "github.com/headway-go/headway", newHeadway},
		{"go-retryablehttp", "github.com/hashicorp/go-retryablehttp", newRetryablehttp},
		{"failsafe-go", "github.com/failsafe-go/failsafe-go", newFailsafe},
		{"resty", "github.com/go-resty/resty/v2", newResty},
	}
}

// newRequest builds a request as a caller would: http.NewRequest with a
// *bytes.Reader for a body, so that GetBody is set and it can be replayed.
func newRequest(method string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	return http.NewRequest(method, URL, r)
}

// consume drains and closes resp's body.
func consume(resp *http.Response, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	return resp.StatusCode, err
}

func doHTTP(c *http.Client) Client {
	return func(method string, body []byte) (int, error) {
		req, err := newRequest(method, body)
		if err != nil {
			return 0, err
		}
		return consume(c.Do(req))
	}
}

// newNetHTTP is the baseline: an http.Client over rt, nothing else.
func newNetHTTP(rt http.RoundTripper, _ time.Duration) Client {
	return doHTTP(&http.Client{Transport: rt})
}

// newHeadway is headway's recommended stack, NewTransport with no options
// (4 attempts, 500 ms..30 s full-jitter backoff, per-host retry budget,
// pacing layer).
func newHeadway(rt http.RoundTripper, wait time.Duration) Client {
	var opts []headway.Option
	if wait > 0 {
		opts = append(opts, headway.WithBackoffDelays(wait, wait))
	}
	return doHTTP(&http.Client{Transport: headway.NewTransport(rt, opts...)})
}

// newRetryablehttp is go-retryablehttp's Client with its default retry
// policy (429 and 5xx but 501) and backoff, RetryMax 3, and no logger:
// its default logger writes a line per request to stderr, and headway logs
// nothing unless asked.
func newRetryablehttp(rt http.RoundTripper, wait time.Duration) Client {
	c := retryablehttp.NewClient()
	c.HTTPClient.Transport = rt
	c.Logger = nil
	c.RetryMax = MaxRetries
	c.RetryWaitMin, c.RetryWaitMax = WaitMin, WaitMax
	if wait > 0 {
		c.RetryWaitMin, c.RetryWaitMax = wait, wait
	}
	return func(method string, body []byte) (int, error) {
		var b any
		if body != nil {
			b = bytes.NewReader(body)
		}
		req, err := retryablehttp.NewRequest(method, URL, b)
		if err != nil {
			return 0, err
		}
		return consume(c.Do(req))
	}
}

// newFailsafe is an http.Client over failsafehttp.NewRoundTripper with
// failsafehttp's retry policy (429 and 5xx but 501, Retry-After honoured),
// 3 retries and exponential backoff.
func newFailsafe(rt http.RoundTripper, wait time.Duration) Client {
	lo, hi := WaitMin, WaitMax
	if wait > 0 {
		lo, hi = wait, 2*wait
	}
	policy := failsafehttp.NewRetryPolicyBuilder().
		WithMaxRetries(MaxRetries).
		WithBackoff(lo, hi).
		ReturnLastFailure().
		Build()
	return doHTTP(&http.Client{Transport: failsafehttp.NewRoundTripper(rt, policy)})
}

// newResty is a resty.New() client (resty's defaults, cookie jar included)
// over rt, retrying 429 and 5xx but 501 up to 3 times. resty reads each
// response body into memory and closes it itself.
func newResty(rt http.RoundTripper, wait time.Duration) Client {
	c := resty.New().
		SetTransport(rt).
		SetRetryCount(MaxRetries).
		SetRetryWaitTime(WaitMin).
		SetRetryMaxWaitTime(WaitMax).
		AddRetryCondition(func(r *resty.Response, err error) bool {
			if err != nil || r == nil {
				return err != nil
			}
			s := r.StatusCode()
			return s == http.StatusTooManyRequests || s >= 500 && s != http.StatusNotImplemented
		})
	if wait > 0 {
		c.SetRetryWaitTime(wait).SetRetryMaxWaitTime(wait)
	}
	return func(method string, body []byte) (int, error) {
		r := c.R()
		if body != nil {
			r.SetBody(body)
		}
		resp, err := r.Execute(method, URL)
		if err != nil {
			return 0, err
		}
		return resp.StatusCode(), nil
	}
}

package bench

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
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
// APIs send during a migration, plus the usual Date and Content-Type. The
// quota is ample at the benchmarks' own rate (hundreds of thousands of
// requests a second): a billion a minute. (A quota of 1,000 a minute that
// the same loop spends a thousand times over is a server whose headers
// contradict its traffic; headway reads every answer of a client that
// spends more than a quarter of its quota, see pace.State.Credit.)
func RateLimitHeader() http.Header {
	return http.Header{
		"Date":                  {"Wed, 25 Nov 2026 21:32:42 GMT"},
		"Content-Type":          {"application/json"},
		"Ratelimit-Policy":      {`"default";q=1000000000;w=60`},
		"Ratelimit":             {`"default";r=999999999;t=30`},
		"X-Ratelimit-Limit":     {"1000000000"},
		"X-Ratelimit-Remaining": {"999999999"},
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

// A Client sends one request and consumes its response: it drains and
// closes the body (or, for resty, lets resty read and close it, as it
// always does), and returns the status. ctx bounds the whole request,
// retries included.
type Client func(ctx context.Context, method string, body []byte) (int, error)

// A Peer is one HTTP client under comparison.
type Peer struct {
	Name   string
	Module string // the module it comes from, if not the standard library
	// New returns a client sending through rt, configured alike for the
	// overhead benchmarks (see MaxRetries, WaitMin, WaitMax). wait, when
	// not zero, replaces the backoff bounds (tests use it to retry at
	// once).
	New func(rt http.RoundTripper, wait time.Duration) Client
	// User returns a client sending through rt configured as a user of
	// the library would write it, from its documentation: retries of 429
	// and 5xx switched on where they are not by default, everything else
	// the library's defaults. The goodput and outage simulations use it.
	User func(rt http.RoundTripper) Client
	// UserConfig says in a line how User configures the client.
	UserConfig string
}

// Peers returns the clients compared, bare net/http first.
func Peers() []Peer {
	return []Peer{
		{"net-http", "", newNetHTTP, userNetHTTP,
			"`&http.Client{Transport: rt}`: no retries, the baseline"},
		{"headway", "github.com/headway-go/headway", newHeadway, userHeadway,
			"`headway.NewTransport(rt)`: its defaults (4 attempts, 500ms..30s full-jitter backoff, Retry-After obeyed, " +
				"retry budget of 10% + 10 per host, pacing); only its random source is seeded, so runs repeat"},
		{"go-retryablehttp", "github.com/hashicorp/go-retryablehttp", newRetryablehttp, userRetryablehttp,
			"`retryablehttp.NewClient()`: its defaults (RetryMax 4, so 5 attempts; 1s..30s exponential backoff, " +
				"Retry-After obeyed on 429 and 503; retries 429 and 5xx but 501), `Logger = nil`"},
		{"failsafe-go", "github.com/failsafe-go/failsafe-go", newFailsafe, userFailsafe,
			"`failsafehttp.NewRoundTripper(rt, failsafehttp.NewRetryPolicyBuilder().WithBackoff(time.Second, 30*time.Second).WithMaxRetries(3).Build())`, " +
				"as its HTTP documentation writes it (4 attempts; Retry-After obeyed on 429 and 503; retries 429 and 5xx but 501)"},
		{"resty", "github.com/go-resty/resty/v2", newResty, userResty,
			"`resty.New().SetRetryCount(3)` with a retry condition for 429 and 5xx but 501 (resty retries no status by default): " +
				"4 attempts, its default 100ms..2s jittered backoff, Retry-After not read"},
	}
}

// newRequest builds a request as a caller would: http.NewRequest with a
// *bytes.Reader for a body, so that GetBody is set and it can be replayed.
func newRequest(ctx context.Context, method string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	return http.NewRequestWithContext(ctx, method, URL, r)
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
	return func(ctx context.Context, method string, body []byte) (int, error) {
		req, err := newRequest(ctx, method, body)
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
	return doRetryablehttp(c)
}

func doRetryablehttp(c *retryablehttp.Client) Client {
	return func(ctx context.Context, method string, body []byte) (int, error) {
		var b any
		if body != nil {
			b = bytes.NewReader(body)
		}
		req, err := retryablehttp.NewRequestWithContext(ctx, method, URL, b)
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
		AddRetryCondition(restyRetry429And5xx)
	if wait > 0 {
		c.SetRetryWaitTime(wait).SetRetryMaxWaitTime(wait)
	}
	return doResty(c)
}

// restyRetry429And5xx is the retry condition a resty user adds: resty
// retries only some transport errors by default.
func restyRetry429And5xx(r *resty.Response, err error) bool {
	if err != nil || r == nil {
		return err != nil
	}
	s := r.StatusCode()
	return s == http.StatusTooManyRequests || s >= 500 && s != http.StatusNotImplemented
}

func doResty(c *resty.Client) Client {
	return func(ctx context.Context, method string, body []byte) (int, error) {
		r := c.R()
		if ctx != context.Background() {
			// Not for the overhead benchmarks: resty clones the
			// request to set its context.
			r.SetContext(ctx)
		}
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

// The User constructors: each library as its documentation has a user
// write it, for the simulations (see Peer.User and UserConfig).

func userNetHTTP(rt http.RoundTripper) Client { return doHTTP(&http.Client{Transport: rt}) }

func userHeadway(rt http.RoundTripper) Client {
	return doHTTP(&http.Client{Transport: headway.NewTransport(rt, headway.WithRandSource(rand.NewPCG(1, 2)))})
}

func userRetryablehttp(rt http.RoundTripper) Client {
	c := retryablehttp.NewClient()
	c.HTTPClient.Transport = rt
	c.Logger = nil
	return doRetryablehttp(c)
}

func userFailsafe(rt http.RoundTripper) Client {
	policy := failsafehttp.NewRetryPolicyBuilder().
		WithBackoff(time.Second, 30*time.Second).
		WithMaxRetries(3).
		Build()
	return doHTTP(&http.Client{Transport: failsafehttp.NewRoundTripper(rt, policy)})
}

func userResty(rt http.RoundTripper) Client {
	return doResty(resty.New().SetTransport(rt).SetRetryCount(3).AddRetryCondition(restyRetry429And5xx))
}

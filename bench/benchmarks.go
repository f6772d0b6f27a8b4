package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/headway-go/headway/ratelimit"
)

// A Benchmark is one named benchmark. The same list runs under go test
// (bench_test.go) and in-process under cmd/benchreport, so the two cannot
// drift apart.
type Benchmark struct {
	Name string // slash-separated, as go test prints it after "Benchmark"
	Doc  string // what it measures, in a few words
	// Setup prepares the benchmark and returns its operation, run once per
	// iteration, and a check to run after the last one.
	Setup func() (op func() error, check func() error)
}

// Run runs bm as a Go benchmark.
func (bm Benchmark) Run(b *testing.B) {
	op, check := bm.Setup()
	b.ReportAllocs()
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	if err := check(); err != nil {
		b.Fatal(err)
	}
}

func noCheck() error { return nil }

// OverheadBenchmarks returns one benchmark per shape and peer, named
// "Overhead/<shape>/<peer>": a request through the peer over an in-memory
// Transport whose responses carry RateLimitHeader.
func OverheadBenchmarks() []Benchmark {
	var bs []Benchmark
	for _, s := range Shapes() {
		for _, p := range Peers() {
			bs = append(bs, Benchmark{
				Name:  "Overhead/" + s.Name + "/" + p.Name,
				Setup: func() (func() error, func() error) { return overhead(p, s) },
			})
		}
	}
	return bs
}

// overhead sends requests of shape s through p, each checked to end in a
// 200 whose body was drained and closed, with the whole request body sent.
func overhead(p Peer, s Shape) (op, check func() error) {
	rt := NewTransport(RateLimitHeader())
	c := p.New(rt, 0)
	op = func() error {
		status, err := c(context.Background(), s.Method, s.Body)
		if err != nil || status != http.StatusOK {
			return fmt.Errorf("%s %s: status %d, error %v", p.Name, s.Name, status, err)
		}
		return nil
	}
	check = func() error {
		if n := rt.Open(); n != 0 {
			return fmt.Errorf("%s %s: %d response bodies left open", p.Name, s.Name, n)
		}
		if want := int64(len(s.Body)) * rt.Requests(); rt.BodyBytes() != want {
			return fmt.Errorf("%s %s: transport read %d body bytes, want %d", p.Name, s.Name, rt.BodyBytes(), want)
		}
		return nil
	}
	return op, check
}

// Typical response heads for the parsing benchmarks, as a server sends them
// (header names are canonicalised as net/http's reader does).
const (
	// commonHead is what an API response carries besides rate limits.
	commonHead = `Date: Wed, 25 Nov 2026 21:32:42 GMT
Content-Type: application/json; charset=utf-8
Content-Length: 1270
Cache-Control: private, max-age=60
Etag: W/"5f3c9a1e7b2d4c6a8e0f1b3d5c7a9e1f"
Vary: Accept, Authorization, Accept-Encoding
Server: nginx
Strict-Transport-Security: max-age=31536000; includeSubDomains
X-Request-Id: 7d0c2f6e-4b1a-4f8e-9c3d-2a5b6e8f0a1c
`
	ietfHead = commonHead + `RateLimit-Policy: "default";q=1000;w=60
RateLimit: "default";r=999;t=30
`
	xRateLimitHead = commonHead + `X-RateLimit-Limit: 1000
X-RateLimit-Remaining: 999
X-RateLimit-Reset: 1795642392
`
	githubHead = `Date: Wed, 25 Nov 2026 21:32:42 GMT
Content-Type: application/json; charset=utf-8
Cache-Control: private, max-age=60, s-maxage=60
Vary: Accept, Authorization, Cookie, X-GitHub-OTP,Accept-Encoding, Accept, X-Requested-With
Etag: W/"0d4b3f2c6a1e9b8d7c5a4f3e2d1c0b9a8f7e6d5c4b3a29180f7e6d5c4b3a2918"
Last-Modified: Wed, 25 Nov 2026 17:02:41 GMT
X-OAuth-Scopes: repo, read:org
X-Accepted-OAuth-Scopes: repo
X-GitHub-Media-Type: github.v3; format=json
X-GitHub-Api-Version-Selected: 2022-11-28
X-RateLimit-Limit: 5000
X-RateLimit-Remaining: 4987
X-RateLimit-Reset: 1795644579
X-RateLimit-Used: 13
X-RateLimit-Resource: core
Access-Control-Expose-Headers: ETag, Link, Location, Retry-After, X-GitHub-OTP, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Used, X-RateLimit-Resource, X-RateLimit-Reset, X-OAuth-Scopes, X-Accepted-OAuth-Scopes, X-Poll-Interval, X-GitHub-Media-Type, X-GitHub-SSO, X-GitHub-Request-Id, Deprecation, Sunset
Access-Control-Allow-Origin: *
Strict-Transport-Security: max-age=31536000; includeSubdomains; preload
X-Frame-Options: deny
X-Content-Type-Options: nosniff
Referrer-Policy: origin-when-cross-origin, strict-origin-when-cross-origin
Content-Security-Policy: default-src 'none'
Server: github.com
X-GitHub-Request-Id: C5D6:2A1F:1B3E4F:1C2D3E:7A8B9C0D
`
	openaiHead = `Date: Wed, 25 Nov 2026 21:32:42 GMT
Content-Type: application/json
Access-Control-Expose-Headers: X-Request-ID
Openai-Organization: user-k3v9x2q8m1n7b4c6
Openai-Processing-Ms: 412
Openai-Project: proj_Q7w8E9r0T1y2U3i4O5p6A7s8
Openai-Version: 2020-10-01
X-Envoy-Upstream-Service-Time: 418
X-RateLimit-Limit-Requests: 5000
X-RateLimit-Limit-Tokens: 800000
X-RateLimit-Remaining-Requests: 4999
X-RateLimit-Remaining-Tokens: 799975
X-RateLimit-Reset-Requests: 12ms
X-RateLimit-Reset-Tokens: 6m0s
X-Request-Id: req_5b2c8e4f1a9d7c3e6b0a2f8d4c1e9b7a
Strict-Transport-Security: max-age=31536000; includeSubDomains; preload
Cf-Cache-Status: DYNAMIC
X-Content-Type-Options: nosniff
Server: cloudflare
Cf-Ray: 8e7d6c5b4a392817-SJC
Alt-Svc: h3=":443"; ma=86400
`
	retryAfterHead = commonHead + `Retry-After: 30
`
)

// ParseHead reads a response head (header lines, no status line) as
// net/http's reader does. It panics on a malformed head.
func ParseHead(head string) http.Header {
	h, err := textproto.NewReader(bufio.NewReader(strings.NewReader(head + "\n"))).ReadMIMEHeader()
	if err != nil {
		panic(err)
	}
	return http.Header(h)
}

// sinks keep the compiler from dropping the work under measurement.
var (
	sinkObs  ratelimit.Observation
	sinkDur  time.Duration
	sinkList httpsfv.List
)

// ParseBenchmarks returns the header-parsing benchmarks, named
// "Parse/<case>": ratelimit.ParseHeaders on typical responses, and beside
// them the baselines of what peers spend reading headers.
func ParseBenchmarks() []Benchmark {
	received := time.Date(2026, 11, 25, 21, 32, 42, 0, time.UTC)
	parse := func(h http.Header, status int) func() (func() error, func() error) {
		return func() (func() error, func() error) {
			return func() error {
				sinkObs = ratelimit.ParseHeaders(h, status, received)
				return nil
			}, noCheck
		}
	}
	// What go-retryablehttp and failsafe-go read, and only on a 429 or a
	// 503: one Retry-After as integer seconds.
	retryAfterInt := func() (func() error, func() error) {
		h := ParseHead(retryAfterHead)
		return func() error {
			if v := h["Retry-After"]; len(v) > 0 && v[0] != "" {
				if s, err := strconv.ParseInt(v[0], 10, 64); err == nil && s >= 0 {
					sinkDur = time.Duration(s) * time.Second
				}
			}
			return nil
		}, noCheck
	}
	// A general RFC 9651 parser on the two IETF fields, before any
	// interpretation of their members.
	httpsfvIETF := func() (func() error, func() error) {
		h := ParseHead(ietfHead)
		return func() error {
			l1, err := httpsfv.UnmarshalList(h["Ratelimit-Policy"])
			if err != nil {
				return err
			}
			l2, err := httpsfv.UnmarshalList(h["Ratelimit"])
			sinkList = l1
			sinkList = l2
			return err
		}, noCheck
	}
	return []Benchmark{
		{"Parse/headway/none", "ParseHeaders, a 200 without rate-limit headers (9 ordinary headers)",
			parse(ParseHead(commonHead), http.StatusOK)},
		{"Parse/headway/ietf-08", "ParseHeaders, the same plus IETF draft-08 RateLimit-Policy and RateLimit",
			parse(ParseHead(ietfHead), http.StatusOK)},
		{"Parse/headway/x-ratelimit", "ParseHeaders, the same plus X-RateLimit-Limit, -Remaining, -Reset (epoch)",
			parse(ParseHead(xRateLimitHead), http.StatusOK)},
		{"Parse/headway/github", "ParseHeaders, a GitHub REST response (24 headers)",
			parse(ParseHead(githubHead), http.StatusOK)},
		{"Parse/headway/openai", "ParseHeaders, an OpenAI response (21 headers, requests and tokens)",
			parse(ParseHead(openaiHead), http.StatusOK)},
		{"Parse/headway/ietf+x-ratelimit", "ParseHeaders, the overhead benchmarks' response (IETF and X-RateLimit)",
			parse(RateLimitHeader(), http.StatusOK)},
		{"Parse/headway/retry-after-429", "ParseHeaders, a 429 with Retry-After: 30 (9 ordinary headers)",
			parse(ParseHead(retryAfterHead), http.StatusTooManyRequests)},
		{"Parse/baseline/retry-after-int", "baseline: go-retryablehttp and failsafe-go, Retry-After as integer seconds (on a 429/503 only)",
			retryAfterInt},
		{"Parse/baseline/httpsfv-ietf-08", "baseline: httpsfv.UnmarshalList of RateLimit-Policy and RateLimit, no interpretation",
			httpsfvIETF},
	}
}

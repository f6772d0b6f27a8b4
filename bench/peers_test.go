package bench

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

func TestTransport(t *testing.T) {
	rt := NewTransport(RateLimitHeader())
	req, err := http.NewRequest(http.MethodPut, URL, bytes.NewReader(Payload))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Request != req {
		t.Errorf("status %d, request %p; want 200, %p", resp.StatusCode, resp.Request, req)
	}
	for name, want := range RateLimitHeader() {
		if got := resp.Header[name]; len(got) != 1 || got[0] != want[0] {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	if got := rt.BodyBytes(); got != int64(len(Payload)) || len(Payload) != 1024 {
		t.Errorf("read %d request body bytes of %d, want 1024", got, len(Payload))
	}
	if rt.Open() != 1 {
		t.Errorf("open bodies = %d, want 1", rt.Open())
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != ResponseBody || resp.ContentLength != int64(len(b)) {
		t.Errorf("body %q (%v), length %d; want %q", b, err, resp.ContentLength, ResponseBody)
	}
	resp.Body.Close()
	resp.Body.Close()
	if rt.Open() != 0 {
		t.Errorf("open bodies after close = %d, want 0", rt.Open())
	}
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
		t.Error("read after close succeeded")
	}
	// Each response has its own header.
	resp.Header.Set("X-Ratelimit-Remaining", "0")
	resp2, _ := rt.RoundTrip(req)
	if got := resp2.Header.Get("X-Ratelimit-Remaining"); got != "999999999" {
		t.Errorf("second response's header changed with the first: %q", got)
	}
	resp2.Body.Close()

	// What every response says, as headway reads it: the IETF policy.
	obs := ratelimit.ParseHeaders(resp2.Header, resp2.StatusCode, time.Now())
	if len(obs.Policies) == 0 {
		t.Errorf("ParseHeaders found no policy in %v", resp2.Header)
	}
}

func TestTransportFailFirst(t *testing.T) {
	rt := NewTransport(nil).FailFirst(1, http.StatusServiceUnavailable)
	for i, want := range []int{503, 200, 200} {
		req, _ := http.NewRequest(http.MethodGet, URL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.StatusCode != want {
			t.Fatalf("request %d: %v %v, want %d", i, resp, err, want)
		}
		resp.Body.Close()
	}
}

// leaksDiscarded is how many response bodies a peer leaves open when it
// retries once. failsafe-go v0.9.8's failsafehttp never closes the body of a
// response it discards for a retry (with a real transport, that connection
// is lost to the pool). If an upgrade fixes it, set its entry to 0.
var leaksDiscarded = map[string]int64{"failsafe-go": 1}

// TestPeersRetry503 checks that every client compared retries a 503 (once
// here: the second attempt succeeds), replays the PUT's body, and leaves no
// response body open, so that the benchmarks compare clients that do the
// same job. net/http alone is the baseline and does not retry.
func TestPeersRetry503(t *testing.T) {
	for _, p := range Peers() {
		for _, s := range Shapes() {
			t.Run(p.Name+"/"+s.Name, func(t *testing.T) {
				t.Parallel()
				rt := NewTransport(RateLimitHeader()).FailFirst(1, http.StatusServiceUnavailable)
				c := p.New(rt, time.Millisecond)
				status, err := c(context.Background(), s.Method, s.Body)
				wantStatus, wantAttempts := 200, int64(2)
				if p.Name == "net-http" {
					wantStatus, wantAttempts = 503, 1
				}
				if err != nil || status != wantStatus {
					t.Fatalf("status %d, error %v; want %d", status, err, wantStatus)
				}
				if got := rt.Requests(); got != wantAttempts {
					t.Errorf("%d attempts, want %d", got, wantAttempts)
				}
				if got, want := rt.BodyBytes(), wantAttempts*int64(len(s.Body)); got != want {
					t.Errorf("transport read %d body bytes, want %d (the body on every attempt)", got, want)
				}
				if n, want := rt.Open(), leaksDiscarded[p.Name]; n != want {
					t.Errorf("%d response bodies left open, want %d", n, want)
				}
			})
		}
	}
}

// TestPeersGiveUp checks the retry limits are comparable: every peer makes
// 1+MaxRetries attempts against a server that always answers 503.
func TestPeersGiveUp(t *testing.T) {
	for _, p := range Peers()[1:] {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			rt := NewTransport(nil).FailFirst(100, http.StatusServiceUnavailable)
			c := p.New(rt, time.Millisecond)
			c(context.Background(), http.MethodGet, nil) // peers differ: the last 503, or an error
			if got, want := rt.Requests(), int64(1+MaxRetries); got != want {
				t.Errorf("%d attempts, want %d", got, want)
			}
		})
	}
}

package retryableadapter_test

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	retryablehttp "github.com/hashicorp/go-retryablehttp"
	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/ratelimit"
	"github.com/headway-go/headway/retryableadapter"
)

// rhUniform is the float the package draws from a rand.Source, for
// computing exact expected delays from a replica of a seeded source.
func rhUniform(src rand.Source) float64 { return float64(src.Uint64()>>11) / (1 << 53) }

// rhResp builds a synthetic response with header pairs and, when method is
// not empty, a request.
func rhResp(status int, method string, kv ...string) *http.Response {
	h := make(http.Header)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	resp := &http.Response{
		StatusCode: status,
		Status:     http.StatusText(status),
		Header:     h,
		Body:       io.NopCloser(strings.NewReader("slow down")),
	}
	if method != "" {
		resp.Request = httptest.NewRequest(method, "http://api.example/v1/things?token=secret", nil)
	}
	return resp
}

// rhStep is one scripted answer of rhServer.
type rhStep struct {
	status int
	header []string // name, value pairs
	body   string
}

// rhServer answers its i-th request with steps[i] (the last step repeats)
// and counts requests; it also records each request's body.
func rhServer(t *testing.T, steps ...rhStep) (*httptest.Server, *atomic.Int32, func() []string) {
	t.Helper()
	var (
		n      atomic.Int32
		mu     sync.Mutex
		bodies []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		i := int(n.Add(1)) - 1
		s := steps[min(i, len(steps)-1)]
		for j := 0; j+1 < len(s.header); j += 2 {
			w.Header().Set(s.header[j], s.header[j+1])
		}
		w.WriteHeader(s.status)
		io.WriteString(w, s.body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), bodies...)
	}
}

// rhClient is a real retryablehttp client configured by headway, with small
// waits so the suite stays fast.
func rhClient(t *testing.T, opts ...retryableadapter.Option) *retryablehttp.Client {
	t.Helper()
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, 5*time.Millisecond
	retryableadapter.Configure(c, opts...)
	t.Cleanup(c.HTTPClient.CloseIdleConnections)
	return c
}

func rhDo(t *testing.T, c *retryablehttp.Client, method, url, body string, header ...string) (*http.Response, error) {
	t.Helper()
	var raw any
	if body != "" {
		raw = []byte(body)
	}
	// A bound, so that a regression fails instead of sleeping for hours.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, err := retryablehttp.NewRequestWithContext(ctx, method, url, raw)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if resp != nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

// --- Backoff, called directly -------------------------------------------

func TestRetryablehttpBackoffRetryAfterIsTheLeastWait(t *testing.T) {
	b := retryableadapter.Backoff(
		retryableadapter.WithRandSource(rand.NewPCG(1, 2)),
		retryableadapter.WithBackoffDelays(100*time.Millisecond, time.Second))
	replica := rand.NewPCG(1, 2)

	got := b(time.Second, 30*time.Second, 0, rhResp(http.StatusTooManyRequests, http.MethodGet, "Retry-After", "2"))

	jittered := time.Duration(rhUniform(replica) * float64(100*time.Millisecond))
	spread := time.Duration(rhUniform(replica) * float64(200*time.Millisecond)) // a tenth of 2s
	require.Less(t, jittered, 2*time.Second)
	require.Equal(t, 2*time.Second+spread, got)
	require.GreaterOrEqual(t, got, 2*time.Second)
	require.Less(t, got, 2200*time.Millisecond)
}

func TestRetryablehttpBackoffRetryAfterReplacesLongerBackoff(t *testing.T) {
	b := retryableadapter.Backoff(retryableadapter.WithJitter(headway.JitterNone),
		retryableadapter.WithRandSource(rand.NewPCG(3, 4)), retryableadapter.WithBackoffDelays(time.Second, 8*time.Second))
	replica := rand.NewPCG(3, 4)
	// Retry 3 would back off 4s; the server asked for 1s, and knows best.
	got := b(0, 0, 2, rhResp(http.StatusServiceUnavailable, http.MethodGet, "Retry-After", "1"))
	spread := time.Duration(rhUniform(replica) * float64(100*time.Millisecond)) // a tenth of 1s
	require.Equal(t, time.Second+spread, got)
}

func TestRetryablehttpBackoffHTTPDateRelativeToDate(t *testing.T) {
	// Both dates lie decades in the past: measured against the local clock
	// the wait would be 0; measured against the server's Date it is 5s.
	b := retryableadapter.Backoff(retryableadapter.WithJitter(headway.JitterNone),
		retryableadapter.WithBackoffDelays(time.Millisecond, time.Millisecond),
		retryableadapter.WithRandSource(rand.NewPCG(5, 6)))
	replica := rand.NewPCG(5, 6)
	got := b(0, 0, 0, rhResp(http.StatusTooManyRequests, http.MethodGet,
		"Date", "Sun, 06 Nov 1994 08:49:37 GMT",
		"Retry-After", "Sun, 06 Nov 1994 08:49:42 GMT"))
	spread := time.Duration(rhUniform(replica) * float64(500*time.Millisecond))
	require.Equal(t, 5*time.Second+spread, got)
	require.GreaterOrEqual(t, got, 5*time.Second)
}

func TestRetryablehttpBackoffRetryAfterMs(t *testing.T) {
	b := retryableadapter.Backoff(retryableadapter.WithJitter(headway.JitterNone),
		retryableadapter.WithRandSource(rand.NewPCG(7, 8)))
	replica := rand.NewPCG(7, 8)
	got := b(time.Millisecond, time.Millisecond, 0,
		rhResp(http.StatusTooManyRequests, http.MethodPost, "Retry-After-Ms", "1500", "Retry-After", "9"))
	require.Equal(t, 1500*time.Millisecond+time.Duration(rhUniform(replica)*float64(150*time.Millisecond)), got)
}

func TestRetryablehttpBackoff429WithoutUsableRetryAfterWaitsBase(t *testing.T) {
	const base = 100 * time.Millisecond
	for _, kv := range [][]string{
		nil,
		{"Retry-After", "0"},
		{"Retry-After-Ms", "0"},
		{"Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT"}, // in the past
		{"Retry-After", "garbage"},
	} {
		b := retryableadapter.Backoff(retryableadapter.WithRandSource(rand.NewPCG(9, 10)),
			retryableadapter.WithBackoffDelays(base, 10*time.Second))
		for attempt := range 6 {
			got := b(0, 0, attempt, rhResp(http.StatusTooManyRequests, http.MethodGet, kv...))
			require.GreaterOrEqual(t, got, base, "%v, attempt %d", kv, attempt)
		}
		// The first retry's full jitter lies in [0, base]: the floor wins.
		b = retryableadapter.Backoff(retryableadapter.WithRandSource(rand.NewPCG(9, 10)),
			retryableadapter.WithBackoffDelays(base, 10*time.Second))
		require.Equal(t, base, b(0, 0, 0, rhResp(http.StatusTooManyRequests, http.MethodGet, kv...)), "%v", kv)
	}

	// A 503 whose Retry-After is zero or past gets the floor too (no
	// licence to storm); a 503 with no Retry-After gets plain jitter.
	b := retryableadapter.Backoff(retryableadapter.WithRandSource(rand.NewPCG(9, 10)),
		retryableadapter.WithBackoffDelays(base, 10*time.Second))
	require.Equal(t, base, b(0, 0, 0, rhResp(http.StatusServiceUnavailable, http.MethodGet, "Retry-After", "0")))
	b = retryableadapter.Backoff(retryableadapter.WithRandSource(rand.NewPCG(9, 10)),
		retryableadapter.WithBackoffDelays(base, 10*time.Second))
	replica := rand.NewPCG(9, 10)
	require.Equal(t, time.Duration(rhUniform(replica)*float64(base)),
		b(0, 0, 0, rhResp(http.StatusServiceUnavailable, http.MethodGet)))

	// With retryablehttp's min as the base, the floor is min...
	b = retryableadapter.Backoff(retryableadapter.WithRandSource(rand.NewPCG(9, 10)))
	require.Equal(t, 400*time.Millisecond, b(400*time.Millisecond, 4*time.Second, 0, rhResp(http.StatusTooManyRequests, http.MethodGet)))
	// ...but never less than 100 ms, whatever the delays say.
	require.Equal(t, 100*time.Millisecond, b(40*time.Millisecond, time.Second, 0, rhResp(http.StatusTooManyRequests, http.MethodGet)))
	b = retryableadapter.Backoff(retryableadapter.WithBackoffDelays(0, 0))
	require.Equal(t, 100*time.Millisecond, b(0, 0, 0, rhResp(http.StatusTooManyRequests, http.MethodGet, "Retry-After", "0")))
}

func TestRetryablehttpBackoffMinMax(t *testing.T) {
	none := retryableadapter.WithJitter(headway.JitterNone)

	// No delay option: retryablehttp's min and max are the base and cap.
	b := retryableadapter.Backoff(none)
	var got []time.Duration
	for i := range 5 {
		got = append(got, b(10*time.Millisecond, 80*time.Millisecond, i, nil))
	}
	require.Equal(t, []time.Duration{10e6, 20e6, 40e6, 80e6, 80e6}, got)

	// WithBackoffDelays wins over them.
	b = retryableadapter.Backoff(none, retryableadapter.WithBackoffDelays(time.Millisecond, 4*time.Millisecond))
	got = got[:0]
	for i := range 4 {
		got = append(got, b(10*time.Millisecond, 80*time.Millisecond, i, nil))
	}
	require.Equal(t, []time.Duration{1e6, 2e6, 4e6, 4e6}, got)

	// So does WithBackoff.
	b = retryableadapter.Backoff(retryableadapter.WithBackoff(headway.BackoffFunc(func(int, time.Duration) time.Duration {
		return 7 * time.Millisecond
	})))
	require.Equal(t, 7*time.Millisecond, b(time.Second, time.Minute, 3, nil))

	// Unset (zero) min and max: headway's defaults.
	b = retryableadapter.Backoff(none)
	require.Equal(t, headway.DefaultBaseDelay, b(0, 0, 0, nil))
	require.Equal(t, 2*headway.DefaultBaseDelay, b(0, 0, 1, nil))
}

func TestRetryablehttpBackoffBoundedByMaxWait(t *testing.T) {
	b := retryableadapter.Backoff(retryableadapter.WithJitter(headway.JitterNone),
		retryableadapter.WithBackoffDelays(5*time.Second, 5*time.Second), retryableadapter.WithMaxWait(time.Second))
	require.Equal(t, time.Second, b(0, 0, 0, nil))
	require.Equal(t, time.Second, b(0, 0, 0, rhResp(http.StatusServiceUnavailable, http.MethodGet)))
	// A Retry-After beyond max wait is not cut short (CheckRetry refuses it).
	require.Equal(t, 3*time.Second, b(0, 0, 0, rhResp(http.StatusTooManyRequests, http.MethodGet, "Retry-After", "3")))
}

func TestRetryablehttpBackoffFitsRetryAfterBeforeDeadline(t *testing.T) {
	b := retryableadapter.Backoff(retryableadapter.WithJitter(headway.JitterNone),
		retryableadapter.WithBackoffDelays(10*time.Second, 10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp := rhResp(http.StatusTooManyRequests, http.MethodGet, "Retry-After", "2")
	resp.Request = resp.Request.WithContext(ctx)
	// The server's 2s (plus at most a tenth of spread) fits the deadline.
	got := b(0, 0, 0, resp)
	require.GreaterOrEqual(t, got, 2*time.Second)
	require.Less(t, got, 2200*time.Millisecond)
}

func TestRetryablehttpBackoffNeverNegative(t *testing.T) {
	b := retryableadapter.Backoff(retryableadapter.WithRandSource(rand.NewPCG(11, 12)))
	for _, kv := range [][]string{
		{"Retry-After", "-5"},
		{"Retry-After", "99999999999"},
		{"Retry-After", "1e9"},
		{"Retry-After-Ms", "-1"},
		{"Retry-After-Ms", "18446744073709551616"},
		{"Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"},
		{"Date", "garbage", "Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT"},
	} {
		for _, status := range []int{0, 200, 429, 503, 999} {
			for _, attempt := range []int{-1, 0, 1, 62, 63, 64, 1000} {
				for _, minMax := range [][2]time.Duration{{0, 0}, {-time.Second, -time.Second}, {time.Second, 0}, {time.Hour, time.Millisecond}} {
					got := b(minMax[0], minMax[1], attempt, rhResp(status, http.MethodGet, kv...))
					require.GreaterOrEqual(t, got, time.Duration(0), "%v %d %d %v", kv, status, attempt, minMax)
					require.LessOrEqual(t, got, ratelimit.MaxDuration+time.Second)
				}
			}
		}
	}
}

func TestRetryablehttpBackoffDecorrelatedGrows(t *testing.T) {
	const base, cap = 10 * time.Millisecond, 10 * time.Second
	b := retryableadapter.Backoff(retryableadapter.WithJitter(headway.JitterDecorrelated),
		retryableadapter.WithRandSource(rand.NewPCG(13, 14)))
	// retryablehttp keeps no state, yet the delay before retry 10 must be
	// drawn as if the nine before it had happened: the exact chain of a
	// replica shows it.
	replica := headway.NewBackoff(base, cap, headway.JitterDecorrelated, rand.NewPCG(13, 14))
	var sum time.Duration
	const n = 200
	for range n {
		var prev time.Duration
		for i := 1; i <= 10; i++ {
			prev = replica.Delay(i, prev)
		}
		got := b(base, cap, 9, nil)
		require.Equal(t, prev, got)
		sum += got
	}
	// Without the replay every delay would lie in [base, 3*base].
	require.Greater(t, sum/n, 10*base)
}

func TestRetryablehttpBackoffConcurrentSeededSource(t *testing.T) {
	// rand.PCG is not safe for concurrent use; the race detector checks
	// that the Backoff serialises every draw (jitter and spread alike).
	b := retryableadapter.Backoff(retryableadapter.WithRandSource(rand.NewPCG(15, 16)))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				resp := rhResp(http.StatusTooManyRequests, http.MethodGet, "Retry-After", "1")
				got := b(time.Millisecond, time.Second, (g+i)%5, resp)
				if got < time.Second {
					t.Errorf("wait %v < Retry-After", got)
				}
			}
		})
	}
	wg.Wait()
}

// --- CheckRetry, called directly ----------------------------------------

func TestRetryablehttpCheckRetryContextDone(t *testing.T) {
	check := retryableadapter.CheckRetry()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ok, err := check(ctx, rhResp(http.StatusServiceUnavailable, http.MethodGet), nil)
	require.False(t, ok)
	require.ErrorIs(t, err, context.Canceled)
	ok, err = check(ctx, nil, &url.Error{Op: "Get", URL: "http://x", Err: syscall.ECONNRESET})
	require.False(t, ok)
	require.ErrorIs(t, err, context.Canceled)
}

func TestRetryablehttpCheckRetryTransportErrors(t *testing.T) {
	uerr := func(op string, err error) error { return &url.Error{Op: op, URL: "http://api.example/", Err: err} }
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name string
		err  error
		opts []retryableadapter.Option
		want bool
	}{
		{"GET reset", uerr("Get", syscall.ECONNRESET), nil, true},
		{"PUT unexpected EOF", uerr("Put", io.ErrUnexpectedEOF), nil, true},
		{"POST reset", uerr("Post", syscall.ECONNRESET), nil, false},
		{"PATCH EOF", uerr("Patch", io.EOF), nil, false},
		{"POST refused", uerr("Post", dial), nil, true},
		{"POST DNS temporary", uerr("Post", &net.DNSError{Err: "x", IsTemporary: true}), nil, true},
		{"POST DNS not found", uerr("Post", &net.DNSError{Err: "x", IsNotFound: true}), nil, false},
		{"unknown method refused", syscall.ECONNREFUSED, nil, true},
		{"unknown method reset", syscall.ECONNRESET, nil, false},
		{"GET bad certificate", uerr("Get", x509.UnknownAuthorityError{}), nil, false},
		{"GET bad scheme", uerr("Get", errors.New(`unsupported protocol scheme "ftp"`)), nil, false},
		{"GET canceled", uerr("Get", context.Canceled), nil, false},
		{"POST reset, retry all", uerr("Post", syscall.ECONNRESET), []retryableadapter.Option{retryableadapter.WithRetryAllMethods()}, true},
		{"GET reset, no retries", uerr("Get", syscall.ECONNRESET), []retryableadapter.Option{retryableadapter.WithoutRetries()}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := retryableadapter.CheckRetry(tt.opts...)(context.Background(), nil, tt.err)
			require.NoError(t, err) // the request's own error is what Client.Do returns
			require.Equal(t, tt.want, ok)
		})
	}
}

func TestRetryablehttpCheckRetryResponses(t *testing.T) {
	key := []string{"Idempotency-Key", "k1"} // on the request
	tests := []struct {
		name   string
		method string
		status int
		kv     []string
		opts   []retryableadapter.Option
		want   bool
	}{
		{"GET 503", http.MethodGet, 503, nil, nil, true},
		{"DELETE 500", http.MethodDelete, 500, nil, nil, true},
		{"GET 408", http.MethodGet, 408, nil, nil, true},
		{"POST 503", http.MethodPost, 503, nil, nil, false},
		{"POST 408", http.MethodPost, 408, nil, nil, false},
		{"POST 503 with Idempotency-Key", http.MethodPost, 503, key, nil, true},
		{"POST 429", http.MethodPost, 429, nil, nil, true},
		{"PATCH 429", http.MethodPatch, 429, nil, nil, true},
		{"GET 501", http.MethodGet, 501, nil, nil, false},
		{"GET 505", http.MethodGet, 505, nil, nil, false},
		{"GET 404", http.MethodGet, 404, nil, nil, false},
		{"GET 200", http.MethodGet, 200, nil, nil, false},
		{"GET 503 X-Should-Retry false", http.MethodGet, 503, []string{"X-Should-Retry", "false"}, nil, false},
		{"POST 500 X-Should-Retry true", http.MethodPost, 500, []string{"X-Should-Retry", "true"}, nil, true},
		{"GET 409 Stripe-Should-Retry true", http.MethodGet, 409, []string{"Stripe-Should-Retry", "true"}, nil, true},
		{"GET 200 X-Should-Retry true", http.MethodGet, 200, []string{"X-Should-Retry", "true"}, nil, false},
		{"GET 429 not in statuses", http.MethodGet, 429, nil, []retryableadapter.Option{retryableadapter.WithRetryStatuses(503)}, false},
		{"GET 500 not in statuses", http.MethodGet, 500, nil, []retryableadapter.Option{retryableadapter.WithRetryStatuses(503)}, false},
		{"GET 418 in statuses", http.MethodGet, 418, nil, []retryableadapter.Option{retryableadapter.WithRetryStatuses(418)}, true},
		{"POST 503 retry all", http.MethodPost, 503, nil, []retryableadapter.Option{retryableadapter.WithRetryAllMethods()}, true},
		{"GET 503 no retries", http.MethodGet, 503, nil, []retryableadapter.Option{retryableadapter.WithoutRetries()}, false},
		{"no request 503", "", 503, nil, nil, false},
		{"no request 429", "", 429, nil, nil, true},
		{"GET 503 Retry-After within max wait", http.MethodGet, 503, []string{"Retry-After", "30"}, nil, true},
		{"GET 503 Retry-After beyond max wait", http.MethodGet, 503, []string{"Retry-After", "120"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var kv []string
			resp := rhResp(tt.status, tt.method)
			if len(tt.kv) == 2 && tt.kv[0] == "Idempotency-Key" {
				resp.Request.Header.Set(tt.kv[0], tt.kv[1])
			} else {
				kv = tt.kv
			}
			for i := 0; i+1 < len(kv); i += 2 {
				resp.Header.Set(kv[i], kv[i+1])
			}
			ok, err := retryableadapter.CheckRetry(tt.opts...)(context.Background(), resp, nil)
			require.NoError(t, err)
			require.Equal(t, tt.want, ok)
			// A response that is not refused with an error keeps its body.
			b, _ := io.ReadAll(resp.Body)
			require.Equal(t, "slow down", string(b))
		})
	}
}

func TestRetryablehttpCheckRetryRefused429IsTyped(t *testing.T) {
	ctx5s, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		kv     []string
		reason headway.Reason
		limit  time.Duration
	}{
		{"wait too long", context.Background(), []string{"Retry-After", "99999999999"}, headway.ReasonWaitTooLong, 20 * time.Second},
		{"server declined", context.Background(), []string{"Retry-After", "1", "X-Should-Retry", "false"}, headway.ReasonServerDeclined, 0},
		{"deadline", ctx5s, []string{"Retry-After", "10"}, headway.ReasonDeadline, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := retryableadapter.CheckRetry(retryableadapter.WithMaxWait(20 * time.Second))
			resp := rhResp(http.StatusTooManyRequests, http.MethodPost, tt.kv...)
			ok, err := check(tt.ctx, resp, nil)
			require.False(t, ok)
			require.ErrorIs(t, err, headway.ErrRateLimitExceeded)
			var rle *headway.RateLimitError
			require.ErrorAs(t, err, &rle)
			require.Equal(t, tt.reason, rle.Reason)
			require.Equal(t, http.StatusTooManyRequests, rle.StatusCode)
			require.Equal(t, http.MethodPost, rle.Method)
			require.Equal(t, "http://api.example/v1/things", rle.URL) // no query
			require.Equal(t, "slow down", string(rle.Body))
			require.True(t, rle.HasRetryAfter)
			if tt.limit >= 0 {
				require.Equal(t, tt.limit, rle.Bound)
			} else {
				require.Greater(t, rle.Bound, 4*time.Second)
				require.LessOrEqual(t, rle.Bound, 5*time.Second)
			}
			// The body was consumed; asking again (as Client.Do does after
			// a response handler fails) gives the same answer.
			b, _ := io.ReadAll(resp.Body)
			require.Empty(t, b)
			ok, err2 := check(tt.ctx, resp, errors.New("handler failed"))
			require.False(t, ok)
			require.Same(t, err, err2)
		})
	}

	// A 503 with the same Retry-After is returned as it is, no error.
	ok, err := retryableadapter.CheckRetry(retryableadapter.WithMaxWait(20*time.Second))(ctx5s,
		rhResp(http.StatusServiceUnavailable, http.MethodGet, "Retry-After", "10"), nil)
	require.False(t, ok)
	require.NoError(t, err)
}

// --- a real retryablehttp.Client against httptest servers ---------------

func TestRetryablehttpEndToEnd429RetryAfterMs(t *testing.T) {
	srv, n, _ := rhServer(t,
		rhStep{status: 429, header: []string{"Retry-After-Ms", "30"}},
		rhStep{status: 200, body: "ok"})
	c := rhClient(t)
	start := time.Now()
	resp, err := rhDo(t, c, http.MethodGet, srv.URL, "")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, "ok", string(b))
	require.EqualValues(t, 2, n.Load())
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
}

func TestRetryablehttpEndToEndHugeRetryAfterFailsFastTyped(t *testing.T) {
	srv, n, _ := rhServer(t, rhStep{status: 429, header: []string{"Retry-After", "99999999999"}, body: "slow down"})
	c := rhClient(t)
	start := time.Now()
	resp, err := rhDo(t, c, http.MethodGet, srv.URL+"/x?key=secret", "")
	require.Less(t, time.Since(start), time.Second)
	require.Nil(t, resp)
	require.ErrorIs(t, err, headway.ErrRateLimitExceeded)
	var rle *headway.RateLimitError
	require.ErrorAs(t, err, &rle)
	require.Equal(t, headway.ReasonWaitTooLong, rle.Reason)
	require.Equal(t, headway.DefaultMaxWait, rle.Bound)
	require.Equal(t, ratelimit.MaxDuration, rle.RetryAfter)
	require.Equal(t, 1, rle.Attempts)
	require.Equal(t, 429, rle.StatusCode)
	require.Equal(t, "slow down", string(rle.Body))
	require.NotContains(t, err.Error(), "secret")
	require.EqualValues(t, 1, n.Load())
}

func TestRetryablehttpEndToEndRetryAfterDateRelativeToDate(t *testing.T) {
	// The server's clock is decades behind ours. Its Retry-After is one
	// second after its Date: one second, more than max wait allows, so no
	// retry. Read against our clock it would be 0 and retried at once.
	srv, n, _ := rhServer(t, rhStep{status: 429, header: []string{
		"Date", "Sun, 06 Nov 1994 08:49:37 GMT",
		"Retry-After", "Sun, 06 Nov 1994 08:49:38 GMT",
	}})
	c := rhClient(t, retryableadapter.WithMaxWait(500*time.Millisecond))
	_, err := rhDo(t, c, http.MethodGet, srv.URL, "")
	var rle *headway.RateLimitError
	require.ErrorAs(t, err, &rle)
	require.Equal(t, headway.ReasonWaitTooLong, rle.Reason)
	require.Equal(t, time.Second, rle.RetryAfter)
	require.EqualValues(t, 1, n.Load())
}

func TestRetryablehttpEndToEndIdempotency(t *testing.T) {
	t.Run("POST 503 not retried", func(t *testing.T) {
		srv, n, _ := rhServer(t, rhStep{status: 503}, rhStep{status: 200})
		resp, err := rhDo(t, rhClient(t), http.MethodPost, srv.URL, "order=1")
		require.NoError(t, err)
		require.Equal(t, 503, resp.StatusCode)
		require.EqualValues(t, 1, n.Load())
	})
	t.Run("POST 503 with Idempotency-Key retried", func(t *testing.T) {
		srv, n, bodies := rhServer(t, rhStep{status: 503}, rhStep{status: 503}, rhStep{status: 201})
		resp, err := rhDo(t, rhClient(t), http.MethodPost, srv.URL, "order=1", "Idempotency-Key", "abc")
		require.NoError(t, err)
		require.Equal(t, 201, resp.StatusCode)
		require.EqualValues(t, 3, n.Load())
		require.Equal(t, []string{"order=1", "order=1", "order=1"}, bodies())
	})
	t.Run("POST 429 retried", func(t *testing.T) {
		srv, n, bodies := rhServer(t, rhStep{status: 429, header: []string{"Retry-After", "0"}}, rhStep{status: 201})
		resp, err := rhDo(t, rhClient(t), http.MethodPost, srv.URL, "order=1")
		require.NoError(t, err)
		require.Equal(t, 201, resp.StatusCode)
		require.EqualValues(t, 2, n.Load())
		require.Equal(t, []string{"order=1", "order=1"}, bodies())
	})
	t.Run("GET 503 retried", func(t *testing.T) {
		srv, n, _ := rhServer(t, rhStep{status: 503}, rhStep{status: 502}, rhStep{status: 200})
		resp, err := rhDo(t, rhClient(t), http.MethodGet, srv.URL, "")
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		require.EqualValues(t, 3, n.Load())
	})
	t.Run("GET 501 not retried", func(t *testing.T) {
		srv, n, _ := rhServer(t, rhStep{status: 501}, rhStep{status: 200})
		resp, err := rhDo(t, rhClient(t), http.MethodGet, srv.URL, "")
		require.NoError(t, err)
		require.Equal(t, 501, resp.StatusCode)
		require.EqualValues(t, 1, n.Load())
	})
}

func TestRetryablehttpEndToEndShouldRetryHeader(t *testing.T) {
	t.Run("false on 503", func(t *testing.T) {
		srv, n, _ := rhServer(t, rhStep{status: 503, header: []string{"X-Should-Retry", "false"}}, rhStep{status: 200})
		resp, err := rhDo(t, rhClient(t), http.MethodGet, srv.URL, "")
		require.NoError(t, err)
		require.Equal(t, 503, resp.StatusCode)
		require.EqualValues(t, 1, n.Load())
	})
	t.Run("false on 429", func(t *testing.T) {
		srv, n, _ := rhServer(t, rhStep{status: 429, header: []string{"X-Should-Retry", "false"}}, rhStep{status: 200})
		_, err := rhDo(t, rhClient(t), http.MethodGet, srv.URL, "")
		var rle *headway.RateLimitError
		require.ErrorAs(t, err, &rle)
		require.Equal(t, headway.ReasonServerDeclined, rle.Reason)
		require.Equal(t, 1, rle.Attempts)
		require.EqualValues(t, 1, n.Load())
	})
	t.Run("true on POST 500", func(t *testing.T) {
		srv, n, _ := rhServer(t, rhStep{status: 500, header: []string{"Stripe-Should-Retry", "true"}}, rhStep{status: 200})
		resp, err := rhDo(t, rhClient(t), http.MethodPost, srv.URL, "x")
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		require.EqualValues(t, 2, n.Load())
	})
}

func TestRetryablehttpEndToEndAttemptsExhaustedOn429(t *testing.T) {
	srv, n, _ := rhServer(t, rhStep{status: 429, header: []string{"Retry-After", "0"}, body: "quota"})
	c := rhClient(t, retryableadapter.WithMaxAttempts(3))
	require.Equal(t, 2, c.RetryMax)
	start := time.Now()
	_, err := rhDo(t, c, http.MethodGet, srv.URL, "")
	require.ErrorIs(t, err, headway.ErrRateLimitExceeded)
	var rle *headway.RateLimitError
	require.ErrorAs(t, err, &rle)
	require.Equal(t, headway.ReasonAttemptsExhausted, rle.Reason)
	require.Equal(t, 3, rle.Attempts)
	require.Equal(t, "quota", string(rle.Body))
	require.Contains(t, err.Error(), "giving up after 3 attempt(s)")
	require.EqualValues(t, 3, n.Load())
	// Retry-After: 0 is no licence to storm: each retry waited >= min (1ms).
	require.GreaterOrEqual(t, time.Since(start), 2*time.Millisecond)
}

func TestRetryablehttpEndToEndKeepsErrorHandler(t *testing.T) {
	srv, n, _ := rhServer(t, rhStep{status: 429, header: []string{"Retry-After", "0"}})
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, time.Millisecond
	var calls atomic.Int32
	c.ErrorHandler = func(resp *http.Response, err error, tries int) (*http.Response, error) {
		calls.Add(1)
		return retryablehttp.PassthroughErrorHandler(resp, err, tries)
	}
	retryableadapter.Configure(c, retryableadapter.WithMaxAttempts(2))
	resp, err := rhDo(t, c, http.MethodGet, srv.URL, "")
	require.NotNil(t, resp)
	require.Equal(t, 429, resp.StatusCode)
	var rle *headway.RateLimitError
	require.ErrorAs(t, err, &rle)
	require.Equal(t, 2, rle.Attempts)
	require.EqualValues(t, 1, calls.Load())
	require.EqualValues(t, 2, n.Load())
}

func TestRetryablehttpEndToEndResponseHandlerKeepsTypedError(t *testing.T) {
	srv, n, _ := rhServer(t, rhStep{status: 429, header: []string{"Retry-After", "3600"}})
	c := rhClient(t)
	req, err := retryablehttp.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	var handled atomic.Int32
	req.SetResponseHandler(func(resp *http.Response) error {
		handled.Add(1)
		return errors.New("unexpected status")
	})
	_, err = c.Do(req)
	var rle *headway.RateLimitError
	require.ErrorAs(t, err, &rle)
	require.Equal(t, headway.ReasonWaitTooLong, rle.Reason)
	require.EqualValues(t, 1, handled.Load())
	require.EqualValues(t, 1, n.Load())
}

func TestRetryablehttpEndToEndDeadline(t *testing.T) {
	srv, n, _ := rhServer(t, rhStep{status: 429, header: []string{"Retry-After-Ms", "5000"}})
	c := rhClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	start := time.Now()
	_, err = c.Do(req)
	require.Less(t, time.Since(start), time.Second) // no sleep towards the deadline
	var rle *headway.RateLimitError
	require.ErrorAs(t, err, &rle)
	require.Equal(t, headway.ReasonDeadline, rle.Reason)
	require.EqualValues(t, 1, n.Load())
}

// rhCountingTransport counts round trips.
type rhCountingTransport struct {
	next http.RoundTripper
	n    atomic.Int32
}

func (t *rhCountingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(r)
}

func TestRetryablehttpEndToEndConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close() // nothing listens there now

	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			c := retryablehttp.NewClient()
			c.Logger = nil
			c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, 2*time.Millisecond
			ct := &rhCountingTransport{next: http.DefaultTransport.(*http.Transport).Clone()}
			c.HTTPClient = &http.Client{Transport: ct}
			retryableadapter.Configure(c, retryableadapter.WithMaxAttempts(3))
			// A refused connection sent nothing: safe to retry even a POST.
			_, err := rhDo(t, c, method, "http://"+addr+"/", "order=1")
			require.ErrorIs(t, err, syscall.ECONNREFUSED)
			require.Contains(t, err.Error(), "giving up after 3 attempt(s)")
			require.EqualValues(t, 3, ct.n.Load())
		})
	}
}

func TestRetryablehttpEndToEndBrokenConnectionAfterWrite(t *testing.T) {
	// The server reads the whole request, then drops the connection without
	// answering: the request may have been processed.
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.ReadAll(r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)

	tests := []struct {
		method string
		header []string
		want   int32
	}{
		{http.MethodGet, nil, 3},
		{http.MethodPost, nil, 1},
		{http.MethodPost, []string{"Idempotency-Key", "abc"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+strings.Join(tt.header, ":"), func(t *testing.T) {
			n.Store(0)
			c := rhClient(t, retryableadapter.WithMaxAttempts(3))
			_, err := rhDo(t, c, tt.method, srv.URL, "order=1", tt.header...)
			require.Error(t, err)
			require.ErrorIs(t, err, io.EOF)
			var ue *url.Error
			require.ErrorAs(t, err, &ue)
			require.EqualValues(t, tt.want, n.Load())
		})
	}
}

// rhTimeoutTransport fails every attempt with a network timeout, after
// reporting the request as written when written is set.
type rhTimeoutTransport struct {
	written bool
	n       atomic.Int32
}

func (t *rhTimeoutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	if r.Body != nil {
		io.ReadAll(r.Body)
		r.Body.Close()
	}
	if trace := httptrace.ContextClientTrace(r.Context()); t.written && trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}

func TestRetryablehttpEndToEndTimeoutNonIdempotent(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		header  []string
		written bool
		want    int32
	}{
		{"POST written", http.MethodPost, nil, true, 1},
		{"POST not written", http.MethodPost, nil, false, 3},
		{"POST written with Idempotency-Key", http.MethodPost, []string{"Idempotency-Key", "abc"}, true, 3},
		{"PATCH written", http.MethodPatch, nil, true, 1},
		{"GET written", http.MethodGet, nil, true, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := retryablehttp.NewClient()
			c.Logger = nil
			c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, 2*time.Millisecond
			tr := &rhTimeoutTransport{written: tt.written}
			c.HTTPClient = &http.Client{Transport: tr}
			retryableadapter.Configure(c, retryableadapter.WithMaxAttempts(3))
			_, err := rhDo(t, c, tt.method, "http://api.example/", "order=1", tt.header...)
			require.EqualValues(t, tt.want, tr.n.Load())
			// The error still reads as the network's timeout.
			var ue *url.Error
			require.ErrorAs(t, err, &ue)
			require.True(t, ue.Timeout(), "%v", err)
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			var oe *net.OpError
			require.ErrorAs(t, err, &oe)
			require.Contains(t, err.Error(), "read tcp")
		})
	}
}

func TestRetryablehttpConfigure(t *testing.T) {
	shared := &http.Client{Transport: http.DefaultTransport}
	c := retryablehttp.NewClient()
	c.HTTPClient = shared
	retryableadapter.Configure(c)
	require.Same(t, http.DefaultTransport, shared.Transport, "the caller's *http.Client is not modified")
	require.NotSame(t, shared, c.HTTPClient)
	require.Equal(t, headway.DefaultMaxAttempts-1, c.RetryMax)
	require.NotNil(t, c.Backoff)
	require.NotNil(t, c.CheckRetry)
	require.NotNil(t, c.ErrorHandler)

	// CloseIdleConnections still reaches the transport underneath.
	ci := &rhCloseIdleTransport{}
	c = retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: ci}
	retryableadapter.Configure(c)
	c.HTTPClient.CloseIdleConnections()
	require.EqualValues(t, 1, ci.closed.Load())

	c = &retryablehttp.Client{}
	retryableadapter.Configure(c, retryableadapter.WithMaxAttempts(1))
	require.NotNil(t, c.HTTPClient)
	require.Equal(t, 0, c.RetryMax)

	c = retryablehttp.NewClient()
	retryableadapter.Configure(c, retryableadapter.WithMaxAttempts(5), retryableadapter.WithoutRetries())
	require.Equal(t, 0, c.RetryMax)
}

type rhCloseIdleTransport struct{ closed atomic.Int32 }

func (*rhCloseIdleTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("unused")
}
func (t *rhCloseIdleTransport) CloseIdleConnections() { t.closed.Add(1) }

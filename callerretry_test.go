package headway

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// stainlessCall is one call of a Stainless-generated SDK (openai-go v3,
// anthropic-sdk-go v2: internal/requestconfig's Execute), reduced to its
// retry rules: it numbers each attempt in X-Stainless-Retry-Count, retries
// an error, a 408, 409, 429 or 5xx, unless x-should-retry says otherwise,
// up to maxRetries times. Its waits are left out: they change nothing in
// what the server sees. sendCount false is a caller who replaced the SDK's
// default headers, which then sends no count.
func stainlessCall(t *testing.T, h *harness, method string, maxRetries int, sendCount bool) (resp *http.Response, err error, sdkAttempts int) {
	t.Helper()
	for n := 0; n <= maxRetries; n++ {
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"model":"m"}`)
		}
		req, rerr := http.NewRequest(method, apiURL, body)
		require.NoError(t, rerr)
		if sendCount {
			req.Header.Set("X-Stainless-Retry-Count", strconv.Itoa(n))
		}
		sdkAttempts++
		resp, err = h.client.Do(req)
		retry := resp == nil
		if resp != nil {
			switch resp.Header.Get("x-should-retry") {
			case "true":
				retry = true
			case "false":
				retry = false
			default:
				c := resp.StatusCode
				retry = c == 408 || c == 409 || c == 429 || c >= 500
			}
		}
		if !retry || n == maxRetries {
			break
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
	if resp != nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err, sdkAttempts
}

func TestCallerRetryLoopDoesNotMultiplyHeadways(t *testing.T) {
	e503 := reply{status: 503, body: "down"}
	e429 := reply{status: 429, hdr: []string{"Retry-After", "1"}}
	tests := []struct {
		name       string
		replies    []reply
		method     string
		maxRetries int  // the SDK's (Stainless's default is 2)
		noCount    bool // the caller removed the SDK's count header
		opts       []Option
		// what the server saw, what the SDK did, what it got
		wantSent, wantSDK int
		wantStatus        int   // 0: an error
		wantErr           error // with wantStatus 0
	}{
		{name: "5xx on every call", replies: []reply{e503}, method: "GET", maxRetries: 2,
			wantSent: DefaultMaxAttempts, wantSDK: 1, wantStatus: 503},
		{name: "5xx, an SDK told to retry 10 times", replies: []reply{e503}, method: "GET", maxRetries: 10,
			wantSent: DefaultMaxAttempts, wantSDK: 1, wantStatus: 503},
		{name: "5xx, WithMaxAttempts(2)", replies: []reply{e503}, method: "GET", maxRetries: 2, opts: []Option{WithMaxAttempts(2)},
			wantSent: 2, wantSDK: 1, wantStatus: 503},
		// headway does not repeat a POST the server may have processed,
		// and neither does the SDK then.
		{name: "5xx to a POST", replies: []reply{e503}, method: "POST", maxRetries: 2,
			wantSent: 1, wantSDK: 1, wantStatus: 503},
		// A 429 headway gives up on comes back as the response, for the
		// SDK's own error type, rather than as an error it would retry.
		{name: "429 on every call", replies: []reply{e429}, method: "POST", maxRetries: 2,
			wantSent: DefaultMaxAttempts, wantSDK: 1, wantStatus: 429},
		{name: "server says do not retry", replies: []reply{{status: 429, hdr: []string{"X-Should-Retry", "false"}}}, method: "GET", maxRetries: 2,
			wantSent: 1, wantSDK: 1, wantStatus: 429},
		// Errors carry no verdict: the SDK retries them, and headway, which
		// has made its attempts already, does not send those retries.
		{name: "connection reset on every call", replies: []reply{{err: syscall.ECONNRESET}}, method: "GET", maxRetries: 2,
			wantSent: DefaultMaxAttempts, wantSDK: 3, wantErr: ErrRetriedByCaller},
		{name: "409, which headway does not retry", replies: []reply{{status: 409}}, method: "GET", maxRetries: 2,
			wantSent: 1, wantSDK: 1, wantStatus: 409},
		{name: "recovers within headway's loop", replies: []reply{e503, e503, ok200()}, method: "GET", maxRetries: 2,
			wantSent: 3, wantSDK: 1, wantStatus: 200},
		{name: "SDK retries off", replies: []reply{e503}, method: "GET", maxRetries: 0,
			wantSent: DefaultMaxAttempts, wantSDK: 1, wantStatus: 503},
		// Without the count, headway cannot tell, and the loops multiply.
		{name: "no count header", replies: []reply{e503}, method: "GET", maxRetries: 2, noCount: true,
			wantSent: 3 * DefaultMaxAttempts, wantSDK: 3, wantStatus: 503},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.replies, tc.opts...)
			resp, err, sdk := stainlessCall(t, h, tc.method, tc.maxRetries, !tc.noCount)
			require.Equal(t, tc.wantSent, h.script.calls(), "attempts the server saw")
			require.Equal(t, tc.wantSDK, sdk, "attempts the SDK made")
			if tc.wantStatus == 0 {
				require.Nil(t, resp)
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantStatus, resp.StatusCode)
			if tc.wantStatus >= 400 && !tc.noCount {
				require.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
			}
		})
	}
}

func TestCallerRetryIsRefusedWithoutSending(t *testing.T) {
	h := newHarness(t, []reply{ok200()})
	_, err, st := h.do(t, "GET", "", "X-Stainless-Retry-Count", "1")
	require.ErrorIs(t, err, ErrRetriedByCaller)
	var re *RetryError
	require.True(t, errors.As(err, &re))
	require.Equal(t, ReasonAttemptsExhausted, re.Reason)
	require.Zero(t, re.Attempts)
	require.Contains(t, err.Error(), "X-Stainless-Retry-Count: 1")
	require.Zero(t, h.script.calls())
	require.Zero(t, st.Attempts)
}

func TestCallerRetryCountThatIsNoNumberIsIgnored(t *testing.T) {
	for _, v := range []string{"", "x", "-1", "1.5"} {
		h := newHarness(t, []reply{{status: 503}})
		resp, err, _ := h.do(t, "GET", "", "X-Stainless-Retry-Count", v)
		require.NoError(t, err, v)
		require.Equal(t, DefaultMaxAttempts, h.script.calls(), v)
		require.Empty(t, resp.Header.Get("X-Should-Retry"), v)
	}
}

func TestCallerVerdictIsLeftOffSuccesses(t *testing.T) {
	h := newHarness(t, []reply{{status: 200, hdr: []string{"X-Should-Retry", "true"}}})
	resp, err, _ := h.do(t, "GET", "", "X-Stainless-Retry-Count", "0")
	require.NoError(t, err)
	require.Equal(t, "true", resp.Header.Get("X-Should-Retry"), "a success is given back as it came")
}

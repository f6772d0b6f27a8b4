package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/examples/sdk/internal/sdkrun"
	"github.com/headway-go/headway/ratelimit"
	"github.com/headway-go/headway/ratelimittest"
)

// The emulated API's quotas: Anthropic's requests, input tokens and output
// tokens per minute, scaled to a 10-second window so that a run takes
// seconds, each refilling continuously (token buckets). Output tokens are
// counted at max_tokens when the request arrives, as Anthropic estimates
// them. The input tokens bind first.
var (
	requestQuota = ratelimittest.Quota{Name: "requests", Algorithm: ratelimittest.TokenBucket, Limit: 50, Window: 10 * time.Second}
	inputQuota   = ratelimittest.Quota{Name: "input-tokens", Algorithm: ratelimittest.TokenBucket, Limit: 10_000, Window: 10 * time.Second,
		Unit: ratelimittest.UnitInputTokens, Cost: func(r *http.Request) int { in, _ := requestTokens(r); return int(in) }}
	outputQuota = ratelimittest.Quota{Name: "output-tokens", Algorithm: ratelimittest.TokenBucket, Limit: 8_000, Window: 10 * time.Second,
		Unit: ratelimittest.UnitOutputTokens, Cost: func(r *http.Request) int { _, out := requestTokens(r); return int(out) }}
)

// maxTokens is every call's max_tokens.
const maxTokens = 300

// inputTokens is what a prompt counts against the input tokens quota:
// about a token per four characters. The client and the emulated server
// count alike.
func inputTokens(prompt string) int64 { return int64(len(prompt)+3) / 4 }

// prompt is call i's prompt: 2,400 characters, or with vary 400 to 5,180.
func prompt(i int, vary bool) string {
	n := 150
	if vary {
		n = 25 + (i*37)%300
	}
	return strings.Repeat("Summarise this. ", n)
}

// requestTokens is the emulated server's reading of a Messages request:
// its input tokens and its max_tokens.
func requestTokens(r *http.Request) (in, out int64) {
	if r.Body == nil || r.Method != http.MethodPost {
		return 0, 0
	}
	b, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return 0, 0
	}
	costs.Lock()
	defer costs.Unlock()
	if c, ok := costs.m[string(b)]; ok {
		return c[0], c[1]
	}
	defer func() {
		if len(costs.m) < 1000 {
			costs.m[string(b)] = [2]int64{in, out}
		}
	}()
	var body struct {
		MaxTokens int64 `json:"max_tokens"`
		Messages  []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(b, &body) != nil {
		return 0, 0
	}
	var text string
	for _, m := range body.Messages {
		for _, c := range m.Content {
			text += c.Text
		}
	}
	return inputTokens(text), body.MaxTokens
}

// costs remembers requestTokens by body: the ideal's oracle asks for the
// same bodies thousands of times.
var costs = struct {
	sync.Mutex
	m map[string][2]int64
}{m: map[string][2]int64{}}

// newAPI returns the emulated Anthropic API: POST /v1/messages behind the
// three quotas, with anthropic-ratelimit-{requests,input-tokens,
// output-tokens}-{limit,remaining,reset} (resets in RFC 3339, whole
// seconds) on every response. A nil clock is the real one.
func newAPI(clock ratelimittest.Clock) *ratelimittest.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-5-5",`+
			`"content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	})
	opts := []ratelimittest.Option{ratelimittest.WithQuota(requestQuota), ratelimittest.WithQuota(inputQuota),
		ratelimittest.WithQuota(outputQuota), ratelimittest.WithDialect(ratelimittest.Anthropic)}
	if clock != nil {
		opts = append(opts, ratelimittest.WithClock(clock))
	}
	h, err := ratelimittest.NewHandler(mux, opts...)
	if err != nil {
		panic(err)
	}
	return h
}

// A setup is one way to combine anthropic-sdk-go with an http.Client over
// base.
type setup struct {
	name    string
	options func(base http.RoundTripper) []option.RequestOption
	cost    bool // each call declares its input and output tokens
}

var setups = []setup{
	{name: "anthropic-sdk-go alone (2 retries)", options: func(base http.RoundTripper) []option.RequestOption {
		return []option.RequestOption{option.WithHTTPClient(&http.Client{Transport: base})}
	}},
	{name: "anthropic-sdk-go on headway, no cost", options: func(base http.RoundTripper) []option.RequestOption {
		return []option.RequestOption{option.WithHTTPClient(&http.Client{Transport: headway.NewTransport(base)})}
	}},
	{name: "anthropic-sdk-go on headway (README)", options: readme, cost: true},
}

// readme is the README's way: headway paces and retries, the SDK's own
// retries are off, and each call declares its input and output tokens
// (see message).
func readme(base http.RoundTripper) []option.RequestOption {
	return []option.RequestOption{
		option.WithHTTPClient(&http.Client{Transport: headway.NewTransport(base)}),
		option.WithMaxRetries(0),
	}
}

// message sends one Messages request with call i's prompt; with cost, its
// context declares its input tokens (from the prompt's size) and its output
// tokens (max_tokens), so that headway waits until both quotas have room.
func message(client anthropic.Client, i int, cost, vary bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := prompt(i, vary)
	if cost {
		ctx = headway.ContextWithCost(ctx, ratelimit.UnitInputTokens, inputTokens(p))
		ctx = headway.ContextWithCost(ctx, ratelimit.UnitOutputTokens, maxTokens)
	}
	_, err := client.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeHaiku5_5,
		MaxTokens: maxTokens,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(p))},
	})
	return err
}

// messages makes calls Messages requests from workers goroutines through
// s's client over base, to the API at baseURL served by api, each exchange
// taking rtt; vary gives the prompts different sizes.
func messages(s setup, base http.RoundTripper, baseURL string, api *ratelimittest.Handler, calls, workers int, rtt time.Duration, vary bool) sdkrun.Result {
	opts := append([]option.RequestOption{option.WithAPIKey("sk-ant-test"), option.WithBaseURL(baseURL + "/")}, s.options(base)...)
	client := anthropic.NewClient(opts...)
	start := time.Now()
	res := sdkrun.Run(calls, workers, func(i int) sdkrun.Outcome {
		return sdkrun.Outcome{Err: message(client, i, s.cost, vary)}
	})
	res.Name = s.name
	res.Count(api.Stats())
	res.Ideal = sdkrun.Ideal(start, calls, rtt,
		func(c ratelimittest.Clock) http.Handler { return newAPI(c) },
		func(i int) *http.Request {
			body, _ := json.Marshal(map[string]any{"model": "claude-haiku-5-5", "max_tokens": maxTokens,
				"messages": []map[string]any{{"role": "user", "content": []map[string]string{{"type": "text", "text": prompt(i, vary)}}}}})
			req, _ := http.NewRequest(http.MethodPost, "http://api.anthropic.test/v1/messages", bytes.NewReader(body))
			return req
		})
	return res
}

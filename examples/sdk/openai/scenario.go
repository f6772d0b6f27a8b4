package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/examples/sdk/internal/sdkrun"
	"github.com/headway-go/headway/ratelimit"
	"github.com/headway-go/headway/ratelimittest"
)

// The emulated API's quotas: OpenAI's requests per minute and tokens per
// minute, scaled to a 10-second window so that a run takes seconds. Both
// refill continuously (token buckets), as OpenAI's do; the tokens bind
// first: a call costs 300 to 1,495 tokens.
var (
	requestQuota = ratelimittest.Quota{Name: "requests", Algorithm: ratelimittest.TokenBucket, Limit: 60, Window: 10 * time.Second}
	tokenQuota   = ratelimittest.Quota{Name: "tokens", Algorithm: ratelimittest.TokenBucket, Limit: 12_000, Window: 10 * time.Second,
		Unit: ratelimittest.UnitTokens, Cost: requestTokens}
)

// maxTokens is every call's max_completion_tokens.
const maxTokens = 200

// estimate is what a chat completion with this prompt counts against a
// tokens-per-minute quota, as OpenAI estimates it before running the
// model: about a token per four characters of the prompt, plus the most
// the completion may use. The client and the emulated server count alike.
func estimate(prompt string, maxTokens int64) int64 {
	return int64(len(prompt)+3)/4 + maxTokens
}

// prompt is call i's prompt: 2,400 characters when all are of one size,
// else 400 to 5,180 characters.
func prompt(i int, vary bool) string {
	n := 150
	if vary {
		n = 25 + (i*37)%300
	}
	return strings.Repeat("Summarise this. ", n)
}

// requestTokens is the emulated server's reading of a request's cost in
// tokens: estimate of its body's messages and max_completion_tokens.
func requestTokens(r *http.Request) int {
	if r.Body == nil || r.Method != http.MethodPost {
		return 0
	}
	b, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return 0
	}
	costs.Lock()
	defer costs.Unlock()
	if n, ok := costs.m[string(b)]; ok {
		return n
	}
	var body struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
		MaxCompletionTokens int64 `json:"max_completion_tokens"`
	}
	if json.Unmarshal(b, &body) != nil {
		return 0
	}
	var text string
	for _, m := range body.Messages {
		text += m.Content
	}
	n := int(estimate(text, body.MaxCompletionTokens))
	if len(costs.m) < 1000 {
		costs.m[string(b)] = n
	}
	return n
}

// costs remembers requestTokens by body: the ideal's oracle asks for the
// same bodies thousands of times.
var costs = struct {
	sync.Mutex
	m map[string]int
}{m: map[string]int{}}

// newAPI returns the emulated OpenAI API: POST /v1/chat/completions and
// GET /v1/models/{id}, behind requestQuota and tokenQuota, with OpenAI's
// x-ratelimit-{limit,remaining,reset}-{requests,tokens} on every response.
// extra adds options (faults); a nil clock is the real one.
func newAPI(clock ratelimittest.Clock, extra ...ratelimittest.Option) *ratelimittest.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":0,"model":"gpt-4o-mini",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Done."},"finish_reason":"stop"}]}`)
	})
	mux.HandleFunc("GET /v1/models/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"object":"model","created":0,"owned_by":"openai"}`, r.PathValue("id"))
	})
	opts := []ratelimittest.Option{ratelimittest.WithQuota(requestQuota), ratelimittest.WithQuota(tokenQuota),
		ratelimittest.WithDialect(ratelimittest.OpenAI)}
	if clock != nil {
		opts = append(opts, ratelimittest.WithClock(clock))
	}
	h, err := ratelimittest.NewHandler(mux, append(opts, extra...)...)
	if err != nil {
		panic(err)
	}
	return h
}

// A setup is one way to combine openai-go with an http.Client over base.
type setup struct {
	name string
	// options make the client; cost says whether each call declares its
	// tokens to headway (ContextWithCost).
	options func(base http.RoundTripper) []option.RequestOption
	cost    bool
}

var setups = []setup{
	{name: "openai-go alone (2 retries)", options: func(base http.RoundTripper) []option.RequestOption {
		return []option.RequestOption{option.WithHTTPClient(&http.Client{Transport: base})}
	}},
	{name: "openai-go on headway, no cost declared", options: func(base http.RoundTripper) []option.RequestOption {
		return []option.RequestOption{option.WithHTTPClient(&http.Client{Transport: headway.NewTransport(base)})}
	}},
	{name: "openai-go on headway (README)", options: readme, cost: true},
}

// readme is the README's way: headway paces and retries, openai-go's own
// retries are off (left on, they would be recognised and not multiply
// headway's, but one loop is simpler to reason about), and each call
// declares its tokens (see chat).
func readme(base http.RoundTripper) []option.RequestOption {
	return []option.RequestOption{
		option.WithHTTPClient(&http.Client{Transport: headway.NewTransport(base)}),
		option.WithMaxRetries(0),
	}
}

// newClient makes s's client of the API at baseURL.
func newClient(s setup, base http.RoundTripper, baseURL string) openai.Client {
	opts := append([]option.RequestOption{option.WithAPIKey("sk-test"), option.WithBaseURL(baseURL + "/v1/")}, s.options(base)...)
	return openai.NewClient(opts...)
}

// chat makes one chat completion with call i's prompt; with cost, its
// context declares the estimate of its tokens, so that headway waits until
// the tokens quota has room for it, not only the requests quota.
func chat(client openai.Client, i int, cost, vary bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := prompt(i, vary)
	if cost {
		ctx = headway.ContextWithCost(ctx, ratelimit.UnitTokens, estimate(p, maxTokens))
	}
	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:               openai.ChatModelGPT4oMini,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage(p)},
		MaxCompletionTokens: openai.Int(maxTokens),
	})
	return err
}

// chats makes calls chat completions from workers goroutines through s's
// client over base, to the API at baseURL served by api, each exchange
// taking rtt; vary gives the prompts different sizes.
func chats(s setup, base http.RoundTripper, baseURL string, api *ratelimittest.Handler, calls, workers int, rtt time.Duration, vary bool) sdkrun.Result {
	client := newClient(s, base, baseURL)
	start := time.Now()
	res := sdkrun.Run(calls, workers, func(i int) sdkrun.Outcome {
		return sdkrun.Outcome{Err: chat(client, i, s.cost, vary)}
	})
	res.Name = s.name
	res.Count(api.Stats())
	res.Ideal = sdkrun.Ideal(start, calls, rtt,
		func(c ratelimittest.Clock) http.Handler { return newAPI(c) },
		func(i int) *http.Request {
			body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "max_completion_tokens": maxTokens,
				"messages": []map[string]string{{"role": "user", "content": prompt(i, vary)}}})
			req, _ := http.NewRequest(http.MethodPost, "http://api.openai.test/v1/chat/completions", bytes.NewReader(body))
			return req
		})
	return res
}

// failing is a backend that fails every call: each admitted request is
// answered 500 (or, with drop, its connection is closed unanswered).
func failing(clock ratelimittest.Clock, drop bool) *ratelimittest.Handler {
	if drop {
		return newAPI(clock, ratelimittest.WithDroppedConnections(1))
	}
	return newAPI(clock, ratelimittest.WithServerErrors(ratelimittest.ServerErrors{Every: 1, Burst: 1, Status: http.StatusInternalServerError}))
}

// attemptsPerCall makes calls calls of one kind (GET /models/{id}, or a
// chat completion, a POST) through client and returns how many requests
// the server saw per call.
func attemptsPerCall(client openai.Client, api *ratelimittest.Handler, calls int, post bool) float64 {
	var failed atomic.Int64
	for i := range calls {
		var err error
		if post {
			err = chat(client, i, false, false)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_, err = client.Models.Get(ctx, "gpt-4o-mini")
			cancel()
		}
		if err != nil {
			failed.Add(1)
		}
	}
	if failed.Load() != int64(calls) {
		panic(errors.New("a call to a backend that fails every call succeeded"))
	}
	st := api.Stats()
	return float64(st.Served+st.Rejected) / float64(calls)
}

// A failure is one run against a failing backend.
type failure struct {
	name string
	// headway puts openai-go (with its default two retries) on headway;
	// noCount removes the header in which openai-go numbers its attempts.
	headway, noCount, post, drop bool
}

var failures = []failure{
	{name: "GET, 500s: openai-go alone"},
	{name: "GET, 500s: openai-go on headway", headway: true},
	{name: "GET, 500s: openai-go on headway, its count header removed", headway: true, noCount: true},
	{name: "POST, 500s: openai-go alone", post: true},
	{name: "POST, 500s: openai-go on headway", headway: true, post: true},
	{name: "GET, connections dropped: openai-go alone", drop: true},
	{name: "GET, connections dropped: openai-go on headway", headway: true, drop: true},
}

// newFailClient makes f's client (openai-go's default retries) over base.
func newFailClient(f failure, base http.RoundTripper, baseURL string) openai.Client {
	rt := base
	if f.headway {
		rt = headway.NewTransport(base)
	}
	opts := []option.RequestOption{option.WithAPIKey("sk-test"), option.WithBaseURL(baseURL + "/v1/"),
		option.WithHTTPClient(&http.Client{Transport: rt})}
	if f.noCount {
		opts = append(opts, option.WithHeaderDel("X-Stainless-Retry-Count"))
	}
	return openai.NewClient(opts...)
}

// Package headway makes any http.Client a good citizen of rate-limited APIs.
//
// headway is a stack of http.RoundTrippers. Wrap a client once and every
// request through it is paced before it is sent and retried when that is
// safe and useful:
//
//	client := headway.New()                       // or headway.Wrap(existing)
//	resp, err := client.Get("https://api.example.com/items")
//	var rle *headway.RateLimitError
//	if errors.As(err, &rle) { /* the server kept saying 429: rle says why we stopped */ }
//
// # The model
//
// A server that limits its clients says so in its headers: a 429 or 503 with
// Retry-After, and often counters. ParseHeaders turns one response's headers
// into an Observation, once per response. Both layers act on its
// Retry-After and on the server's verdict; its quotas go into
// RateLimitError.
//
// An Observation holds the server's Retry-After, its verdict on retrying,
// and the Policies it announced: for each quota its name, limit, remaining,
// window, time until reset and unit (requests, tokens, ...). Every dialect
// in use is read into that one model (see Dialect): the IETF RateLimit
// fields in each of their drafts, X-RateLimit-* and the vendors that give
// it their own meaning (GitHub, Bitbucket, Discord, Reddit, Envoy, Jira),
// GitLab, OpenAI and its imitators, Anthropic, Kong, Linear, Azure,
// Zendesk, Shopify, HubSpot, Salesforce, X and Okta, Stripe. Header names
// are matched whatever their case. Absolute times are measured against the
// response's Date header, so a client whose clock is off still reads the
// wait the server meant; where a dialect does not say whether a number is a
// delay or a time, a documented rule decides. Bad values never give a
// negative or unbounded duration. A response without rate-limit headers
// costs no allocation; `ratecurl -explain` shows what headway reads in a
// captured response.
//
// The retry layer (outer) decides, after each attempt, whether another one
// is safe and useful, and how long to wait first:
//
//   - What is retried: 429, 408, 500, 502, 503 and 504 (WithRetryStatuses),
//     and transport errors that a retry can cure (connection refused, reset
//     or cut short, network timeouts, WithAttemptTimeout). Never a cancelled
//     or expired context, an invalid URL, or a certificate that does not
//     verify. A server's Stripe-Should-Retry or X-Should-Retry wins.
//   - Nothing happens twice by headway's hand: a 429 means the request was
//     not processed, so it is retried for any method; after a 5xx or a broken
//     connection only idempotent methods (GET, HEAD, OPTIONS, TRACE, PUT,
//     DELETE) and requests with an Idempotency-Key are sent again
//     (WithIdempotencyKeys adds keys; WithRetryAllMethods is the dangerous
//     escape hatch). Bodies are rewound with Request.GetBody, never read
//     whole into memory unless WithBodyBuffering allows it.
//   - How long to wait: what the server's Retry-After says, plus a small
//     positive spread (at most a tenth, at most a second) so that clients
//     told the same instant do not return together. Retry-After is law:
//     never sooner, in every form (delay-seconds, fractional, HTTP-dates
//     measured against the response's Date, retry-after-ms). Without one,
//     or when it is zero or in the past (no licence to storm), jittered
//     exponential backoff decides, and a 429 waits at least the base delay.
//     See Backoff and Jitter.
//   - When to give up at once, without sleeping: the server asks for more
//     than WithMaxWait, or the wait would end after the context's deadline.
//     A 429 then becomes a *RateLimitError; a 5xx is returned as it came.
//   - A retry budget per key (WithRetryBudget) bounds retries of failures to
//     about 10% of requests, so an outage is not multiplied by retries.
//
// The pacing layer (inner, so every attempt is paced) holds requests back
// before they are sent when the server has said they would be refused: after
// a 429 with Retry-After, every request to the same key waits for the same
// instant instead of earning its own 429. The retry layer's wait and the
// pacing layer's pause are measured from the same instant, so they never
// add up.
//
// # Observing
//
// ContextWithStats tells, per request, how many attempts it took and how long
// it waited; WithOnRetry and WithLogger report each decision. headway has no
// global state: two transports share nothing.
//
// # Testing
//
// Every wait goes through a Clock (WithClock) and all randomness through one
// source (WithRandSource), so retry schedules can be tested on fake time with
// exact delays.
package headway

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
// Retry-After, and often counters of its quotas. Package ratelimit reads
// every dialect in use into one model, an Observation, once per response;
// both layers act on it. Package ratelimittest emulates rate-limited APIs
// for tests, on a fake clock that a headway client can share, and package
// retryableadapter gives a go-retryablehttp client headway's retry
// decisions.
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
//     exponential backoff decides, and a 429 waits at least the base delay
//     and never less than 100 ms. Draining the discarded response is part
//     of the wait, not added to it.
//     See Backoff and Jitter.
//   - When to give up at once, without sleeping: the server asks for more
//     than WithMaxWait, or the wait would end after the context's deadline.
//     A 429 then becomes a *RateLimitError; a 5xx is returned as it came. A
//     context that ends during a wait gives a *RateLimitError (after a 429)
//     or a *RetryError that keeps what the attempts learnt and wraps the
//     context's error.
//   - A retry budget per key (WithRetryBudget) bounds retries of failures to
//     about 10% of requests, so an outage is not multiplied by retries.
//   - When most attempts to a key fail, the overload throttle
//     (WithOverloadThrottle) holds first attempts back too, sending about
//     twice what the backend accepts (10% at least, so that its recovery
//     is seen); those held back fail at once with ErrOverloaded.
//
// Wrapping a client twice does not stack the layers: NewTransport recognises
// its own transport and replaces it.
//
// The pacing layer (inner, so every attempt is paced) holds requests back
// before they are sent, so that the server does not have to refuse them.
// Package pace decides; per key (the host, or WithKey's):
//
//   - Every response's quotas are tracked: ample quota is spent at full
//     speed, a request waits only when a quota has nothing left, and then
//     until it returns. Requests in flight count against what is left, so
//     sixteen workers do not all fire on "remaining: 5"; a late response
//     with an older, larger count does not inflate it. While a client
//     spends at most a quarter of a quota, half of what is left is lent as
//     credit: those requests go without the model, their headers unread
//     unless the status is 400 or more, and are booked in batches (the hot
//     path costs a few hundred nanoseconds; see pace.State.Credit).
//   - A key that has never answered lets its first request go alone and
//     waits for its answer, so a thousand goroutines that start together
//     do not send a thousand requests into a quota of fifty.
//   - Fixed windows (the quota returns whole at the reset) and refilling
//     quotas (token and leaky buckets, GCRA) are told apart by what the
//     first answer after a reset says; a refill rate is measured from how
//     remaining evolves, not taken from the server's coarse numbers, and a
//     reset in whole seconds is sharpened with the server's Date.
//   - A 429 or 503 pauses the key until its Retry-After (or the reset of
//     the quota it says ran out); a pause longer than WithMaxWait is kept
//     too, so later requests fail at once instead of each earning a 429,
//     for at most a day (pace.DefaultMaxPause), so that a misread value
//     cannot block a host for years. After a pause one request goes first.
//   - Without any rate-limit headers, only the window on requests in
//     flight holds requests back until the first 429 (it grows from two by
//     an eighth a round trip); from then on the server is identified from what it admitted and
//     refused (a sliding log, a fixed window or a bucket, of the windows
//     and rates limiters are configured with) and paced at the limit it
//     has proven, with a few probes (see package pace).
//   - Limits known from an API's documentation are declared per route
//     (WithQuota), and what a request costs in tokens with ContextWithCost.
//     WithMaxInFlight caps the requests in flight at once, for an API that
//     limits concurrency; a key whose answers name no quota learns such a
//     cap from its 429s, with that window.
//   - The requests of a key wait in line: by priority (ContextWithPriority),
//     in the order they came within one, and only the first asks the
//     state. A request of a higher priority takes the place of a lower one
//     waiting for the quota; none is passed for longer than
//     WithPriorityAging.
//   - A wait longer than WithMaxWait, or past the context's deadline, fails
//     at once with a *RateLimitError saying how long and why (StatusCode
//     0: nothing was sent). WithOnWait and WithLogger say why each wait
//     happens.
//
// The retry layer's wait and the pacing layer's pause are measured from the
// same instant, so they never add up. A key's state lives in a pace.Store
// (WithStore): in this process by default, or shared by several processes
// that spend one quota. Idle keys are forgotten.
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
// exact delays. ratelimittest.ManualClock is such a clock, and an emulated
// API can run on the same one (see the example of WithClock).
package headway

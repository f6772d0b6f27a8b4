// Package ratelimittest emulates rate-limited HTTP APIs, the way
// net/http/httptest emulates servers: a test starts a Server (or wraps its
// own handler in a Handler) that enforces a quota as a real API does, writes
// the rate-limit headers a real API writes, and counts what it admitted.
//
// # The model
//
// A Quota is what the server enforces: Limit units per Window under an Algorithm (fixed
// window, sliding log, sliding counter, token bucket, leaky bucket as a
// meter, or GCRA), plus a Burst for the bucket algorithms. A unit is a
// request unless the policy counts tokens, whose cost a request states (see
// CostFromHeader). Several policies apply at once: a request is admitted only
// if every policy admits it, and only then is it charged to all of them.
// Each policy keeps one state per partition key: one shared quota by
// default, or one per API key (ByHeader) or per client address
// (ByClientAddr). A fixed window is aligned to the clock unless its
// Quota.Anchor is AnchorFirstRequest: then each key's window starts at its
// first request, as a Redis INCR+EXPIRE counter's does, and its resets count
// to the end of that window; or AnchorStart: then the windows follow on from
// a key's first request, busy or idle, as sethvargo/go-limiter's do.
//
// Every algorithm is exact: times are integer nanoseconds and rates are kept
// as reduced fractions, so "3 per second" admits exactly 3 in every second,
// forever, and the wait a rejection reports is the exact time until the
// request would be admitted. The state of a key is guarded by its own mutex,
// so concurrent requests for different keys never wait for each other.
//
// # Time
//
// The algorithms read a Clock once per request. WithClock(NewManualClock(t))
// makes a test deterministic: send a burst, Advance past a window, send
// again; nothing sleeps. (The latency fault waits on the clock's own Sleep
// when it has one, see Sleeper, and on the real clock otherwise.)
//
// # What a response says
//
// Every response carries a Date and the headers of the chosen dialects (IETF
// draft-08+, draft-07, draft-06, X-RateLimit, GitHub, OpenAI, Anthropic,
// Discord, Shopify, or None). The headers are written from each format's own
// definition and never from headway's parser, so the two check each other.
// A rejection is 429 with Retry-After as delay-seconds, as an HTTP-date, or
// absent; both forms round up, so a client that waits as told is admitted.
// A reset counts to when the key's quota is fully restored. Every delay and
// absolute time a header writes rounds up, to whole seconds except in the
// dialects that carry milliseconds (OpenAI, Discord), so even a GCRA of 50
// per second, whose true wait is 20ms, says Retry-After: 1 and t=1.
//
// # Faults and quirks
//
// Real APIs misbehave, and clients must survive it: WithServerErrors (bursts
// of 5xx), WithDroppedConnections, WithLatency, WithMisleadingHeaders (only
// the looser of stacked policies is described), WithMissingHeaders and
// WithDateSkew switch each misbehaviour on. Others are quirks of real
// servers' headers, which leave admission as it is:
// WithRetryAfterFullWindow (Retry-After is the refusing policy's whole
// window, as go-chi/httprate sends), WithTruncatedRetryAfter (its seconds
// rounded down, 0 for a window under a second, as httprate writes them
// too), WithCoarseResets (whole seconds in the millisecond dialects too)
// and WithResetAlwaysOne (every reset says one second). Quota.Anchor,
// above, is the quirk of windows that start at a client's first request,
// and WithChargeRefused that of servers that count a refused request as if
// it had been admitted, so that a client that keeps sending stays refused
// longer.
//
// # Counting
//
// Stats counts served, rejected, failed and dropped requests, in total and
// per key; Admissions lists the time and key of every admitted request, for
// asserting what a client actually sent. Handler.Fits asks whether a request
// would be admitted now, and the exact wait if not, without spending or
// counting anything: an oracle that knows the server.
//
// The package imports nothing from headway, and headway does not import it.
// examples/apisim serves it on an address for manual and black-box testing.
package ratelimittest

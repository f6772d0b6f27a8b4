// Package pace decides when a request to a rate-limited API may be sent so
// that the server does not have to refuse it. It is headway's pacing layer
// as pure logic on explicit instants, in the style of golang.org/x/time/rate:
// no net/http, no clock reads, no goroutines.
//
// # The model
//
// Requests are grouped by key (a host, an API key). A key's State is a plain
// value: what the server said about each of its quotas (ratelimit.Policy,
// with the window phase or the refill rate inferred from how remaining
// evolves), the requests sent but not yet answered, any pause the server
// asked for, the rate adapted from 429s when the server sends no headers,
// and the user's declared quotas. Everything that decides is a method of
// State that takes the time:
//
//	d := st.Reserve(now, req, cfg) // may req be sent at now?
//	if !d.OK { /* ask again at d.At, or sooner if the state changes */ }
//	// ... send, then report what the response said:
//	st.Complete(now, d.Lease, pace.Answer{Obs: obs, Date: date}, cfg)
//	// or, when the request never left:
//	st.Cancel(d.Lease, cfg)
//
// A Lease is the unit: taken before sending, it counts as in flight against
// every quota until it is completed, cancelled, or expires (Config.LeaseTTL),
// so an abandoned request cannot hold quota forever.
//
// # What it gets right
//
//   - Ample quota is spent at full speed; a request waits only when a
//     quota would refuse it, and then until the instant it returns.
//   - Requests in flight count against remaining, so sixteen workers do not
//     all fire on "remaining: 5"; a late response with an older, larger
//     remaining does not inflate the budget.
//   - A key that has never answered lets its first request go alone and
//     waits for the answer before releasing the rest.
//   - Fixed windows (the whole quota returns at the reset) and refilling
//     servers (token bucket, GCRA, leaky bucket, sliding windows) are told
//     apart by what the first response after a reset says, and a refill
//     rate is measured from the remaining of successive responses rather
//     than trusted from the server's coarse numbers. Resets in whole
//     seconds are sharpened with every response and the window's period.
//   - A 429 or 503 pauses the key until the server's Retry-After, or the
//     exhausted quota's reset; after a pause one request goes first.
//   - Without any headers, the rate adapts to 429s (CUBIC, as the AWS SDK's
//     adaptive retry mode), unlimited until the first one.
//
// # Stores
//
// The State of each key lives in a Store, which only has to load a key's
// state and replace it atomically (compare-and-swap on its Version); the
// algorithm lives here, once. NewMemoryStore is the in-process default;
// package pacetest checks any Store against the contract.
package pace

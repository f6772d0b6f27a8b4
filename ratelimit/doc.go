// Package ratelimit reads what HTTP servers say about their rate limits.
// It is not a limiter: it turns the headers of one response into an
// Observation, the model that headway's retry and pacing layers act on, and
// that any client may use on its own.
//
//	obs := ratelimit.ParseHeaders(resp.Header, resp.StatusCode, time.Now())
//	if obs.HasRetryAfter { /* wait obs.RetryAfter */ }
//	for _, p := range obs.Policies { /* p.Remaining of p.Limit per p.Window, resets in p.Reset */ }
//
// # The model
//
// An Observation holds the server's Retry-After, its verdict on retrying
// (Stripe-Should-Retry, X-Should-Retry), and the Policies it announced: for
// each quota its name, limit, remaining, window, time until reset, unit
// (requests, tokens, ...), scope and partition. Durations are relative to
// when the server sent the response, never absolute, so they can be used
// without reading a clock. ParseHeaders is pure: no I/O, no clock reads, no
// state.
//
// # Dialects
//
// Every dialect in use is read into that one model (see Dialect): the IETF
// RateLimit fields in each of their drafts (-00 to -11, and Cloudflare's),
// X-RateLimit-* and the vendors that give it their own meaning (GitHub,
// Bitbucket, Discord, Reddit, Envoy, Jira, Kong, Linear), X-Rate-Limit-* (X,
// Okta, tollbooth, AspNetCoreRateLimit), GitLab, OpenAI and its imitators
// (Azure OpenAI, Groq, Mistral, Cerebras, Fireworks, Together), Anthropic,
// Azure Resource Manager and Resource Graph, Zendesk, Shopify, HubSpot,
// Salesforce, Fastly, Akamai and Stripe, with Retry-After in every form and
// its stand-ins (Retry-After-Ms, X-Ms-Retry-After-Ms, Bucket4j's
// X-Rate-Limit-Retry-After-Seconds, Traefik 1's X-Retry-In).
//
// Header names are matched whatever their case. Absolute times are measured
// against the response's Date header, so a client whose clock is off still
// reads the wait the server meant; where a dialect does not say whether a
// number is a delay or a time, a documented rule decides (see Dialect). Bad
// values never give a negative or unbounded duration: every duration is at
// most MaxDuration. A response without rate-limit headers costs no
// allocation.
//
// To see what this package reads in a captured response, feed its head to
// `go run github.com/headway-go/headway/examples/ratecurl -explain`. To
// produce every dialect from a server under your control, see package
// ratelimittest, which writes them from their own definitions.
package ratelimit

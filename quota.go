package headway

import (
	"context"
	"fmt"
	"time"

	"github.com/headway-go/headway/pace"
	"github.com/headway-go/headway/ratelimit"
)

// WithQuota declares a limit known from an API's documentation: at most
// limit requests per window to the routes that pattern matches, enforced
// before any header arrives, whatever the server's windows' phase (it never
// lets more than limit go in any window). An optional burst (0 < burst <
// limit) allows at most burst at once, spacing the rest at limit per
// window. Declare as many as the API documents; a request waits until each
// quota that matches it, and every quota the server announces, has room:
//
//	headway.New(
//		headway.WithQuota("POST api.example.com/games", 10, time.Minute),
//		headway.WithQuota("GET api.example.com/games/", 120, time.Minute),
//	)
//
// pattern is an http.ServeMux pattern (Go 1.22): "[METHOD ][HOST]/[PATH]",
// with {wildcards} and a trailing slash for a subtree; a host matches the
// request's host without its port, as in ServeMux. A declared quota is
// counted per key (WithKey: per host by default). WithQuota panics on an
// invalid pattern, a limit < 1 or a window <= 0, as http.ServeMux.Handle
// does on invalid patterns: they are programming errors.
func WithQuota(pattern string, limit int, window time.Duration, burst ...int) Option {
	q := quotaRoute{quota: pace.Quota{Limit: limit, Window: window}}
	if len(burst) > 0 {
		q.quota.Burst = burst[0]
	}
	if limit < 1 || window <= 0 || len(burst) > 1 {
		panic(fmt.Sprintf("headway: WithQuota(%q, %d, %v, %v): want a limit >= 1, a window > 0 and at most one burst", pattern, limit, window, burst))
	}
	q.routes = newRoutes(pattern) // panics on an invalid pattern
	return func(c *config) { c.quotas = append(c.quotas, q) }
}

// quotaRoute is a declared quota and the routes it governs.
type quotaRoute struct {
	quota pace.Quota
	routes
}

type costKey struct{}

// ContextWithCost returns a context that declares what a request made with
// it costs in unit, in addition to the one request it is: the tokens of an
// OpenAI-style tokens-per-minute quota, say. The pacing layer then waits
// until the server's policies in that unit have that much left, and counts
// it against them while the request is in flight. Declaring several units
// takes several calls.
//
//	ctx = headway.ContextWithCost(ctx, ratelimit.UnitTokens, 1500)
func ContextWithCost(ctx context.Context, unit ratelimit.Unit, n int64) context.Context {
	prev := costFrom(ctx)
	cost := make([]pace.Amount, len(prev), len(prev)+1)
	copy(cost, prev)
	cost = append(cost, pace.Amount{Unit: unit, N: max(n, 0)})
	return context.WithValue(ctx, costKey{}, cost)
}

// costFrom returns the costs declared on ctx.
func costFrom(ctx context.Context) []pace.Amount {
	c, _ := ctx.Value(costKey{}).([]pace.Amount)
	return c
}

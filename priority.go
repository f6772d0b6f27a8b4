package headway

import (
	"context"
	"time"
)

// Priorities for ContextWithPriority. Any int is a priority; these name
// the usual ones.
const (
	// PriorityBatch is for work nobody waits on: backfills, syncs.
	PriorityBatch = -10
	// PriorityNormal is a request's priority unless its context says
	// otherwise.
	PriorityNormal = 0
	// PriorityInteractive is for a request someone is waiting on.
	PriorityInteractive = 10
)

// DefaultPriorityAging is how long a request waits at most before requests
// of higher priority no longer pass it (WithPriorityAging).
const DefaultPriorityAging = 30 * time.Second

type priorityKey struct{}

// ContextWithPriority returns a context that gives the requests made with
// it priority prio in their key's line (PriorityNormal, 0, by default):
// when a key's quota is spent and requests wait for it, a request of a
// higher priority goes before those of lower priorities that wait with it,
// and one of the same priority after those that came before it. A request
// that arrives while one of a lower priority is waiting for the quota takes
// its place at once, so that it is sent at the key's next opening. Priority
// orders a line only; it never lets a request exceed a quota, and a request
// that has waited WithPriorityAging (DefaultPriorityAging) is no longer
// passed by any priority: the longest waiting among such requests goes
// first.
//
//	ctx = headway.ContextWithPriority(ctx, headway.PriorityInteractive)
func ContextWithPriority(ctx context.Context, prio int) context.Context {
	return context.WithValue(ctx, priorityKey{}, prio)
}

// priorityFrom returns the priority ctx gives, PriorityNormal by default.
func priorityFrom(ctx context.Context) int {
	p, _ := ctx.Value(priorityKey{}).(int)
	return p
}

// WithPriorityAging bounds how long requests of higher priority may pass a
// waiting request (ContextWithPriority): once it has waited d, it goes
// before every request that has waited less, whatever their priorities, so
// that a steady stream of interactive requests cannot hold batch requests
// back for ever. d <= 0 keeps DefaultPriorityAging.
func WithPriorityAging(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.aging = d
		}
	}
}

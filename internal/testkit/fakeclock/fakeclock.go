// Package fakeclock is a deterministic clock for headway's tests: time moves
// only when a test (or, in auto mode, a sleeper) moves it. It is
// ratelimittest.ManualClock, the clock a user's own tests share between a
// headway client and an emulated API, plus an auto mode and a record of
// every Sleep.
package fakeclock

import (
	"context"
	"sync"
	"time"

	"github.com/headway-go/headway/ratelimittest"
)

// Clock is a fake headway.Clock. In auto mode (New(start, true)) every Sleep
// advances time by its duration at once and returns, so code under test runs
// without waiting while its waits are recorded exactly. In manual mode
// sleepers and timers wait until Advance moves time past their deadline.
type Clock struct {
	*ratelimittest.ManualClock
	auto   bool
	mu     sync.Mutex
	sleeps []time.Duration
}

// New returns a fake clock reading start.
func New(start time.Time, auto bool) *Clock {
	return &Clock{ManualClock: ratelimittest.NewManualClock(start), auto: auto}
}

// Sleeps returns every duration passed to Sleep so far, in call order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// Sleep records d; in auto mode it advances time by d and returns, in manual
// mode it waits for Advance or for ctx.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.mu.Unlock()
	if !c.auto || d <= 0 {
		return c.ManualClock.Sleep(ctx, d)
	}
	c.Advance(d)
	return nil
}

// Pending returns how many sleepers and timers wait for time to move.
func (c *Clock) Pending() int { return c.Waiting() }

// WaitForPending blocks until at least n sleepers or timers are pending or
// ctx is done, so a test can advance time only once the code under test is
// actually waiting.
func (c *Clock) WaitForPending(ctx context.Context, n int) error { return c.BlockUntilWaiting(ctx, n) }

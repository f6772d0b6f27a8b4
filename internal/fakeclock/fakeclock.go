// Package fakeclock is a deterministic clock for headway's tests: time moves
// only when a test (or, in auto mode, a sleeper) moves it.
package fakeclock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock is a fake headway.Clock. In auto mode (New(start, true)) every Sleep
// advances time by its duration at once and returns, so code under test runs
// without waiting while its waits are recorded exactly. In manual mode
// sleepers and timers wait until Advance moves time past their deadline.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	auto    bool
	waiters []*waiter
	sleeps  []time.Duration
	changed chan struct{} // closed and replaced whenever a waiter is added
}

type waiter struct {
	at   time.Time
	f    func()
	done bool
}

// New returns a fake clock reading start.
func New(start time.Time, auto bool) *Clock {
	return &Clock{now: start, auto: auto, changed: make(chan struct{})}
}

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
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
	if d <= 0 {
		c.mu.Unlock()
		return nil
	}
	if c.auto {
		c.mu.Unlock()
		c.Advance(d)
		return nil
	}
	ch := make(chan struct{})
	w := &waiter{at: c.now.Add(d), f: func() { close(ch) }}
	c.addLocked(w)
	c.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		w.done = true
		c.mu.Unlock()
		return ctx.Err()
	}
}

// AfterFunc runs f in a goroutine once the fake time reaches now+d.
func (c *Clock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	w := &waiter{at: c.now.Add(d), f: func() { go f() }}
	c.addLocked(w)
	c.mu.Unlock()
	if d <= 0 {
		c.Advance(0)
	}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if w.done {
			return false
		}
		w.done = true
		return true
	}
}

func (c *Clock) addLocked(w *waiter) {
	c.waiters = append(c.waiters, w)
	close(c.changed)
	c.changed = make(chan struct{})
}

// Advance moves time forward by d and fires every timer and sleeper due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*waiter
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		switch {
		case w.done:
		case !w.at.After(c.now):
			w.done = true
			due = append(due, w)
		default:
			kept = append(kept, w)
		}
	}
	c.waiters = kept
	c.mu.Unlock()
	sort.SliceStable(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, w := range due {
		w.f()
	}
}

// Pending returns how many sleepers and timers wait for time to move.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, w := range c.waiters {
		if !w.done {
			n++
		}
	}
	return n
}

// WaitForPending blocks until at least n sleepers or timers are pending or
// ctx is done, so a test can advance time only once the code under test is
// actually waiting.
func (c *Clock) WaitForPending(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		ch := c.changed
		pending := 0
		for _, w := range c.waiters {
			if !w.done {
				pending++
			}
		}
		c.mu.Unlock()
		if pending >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

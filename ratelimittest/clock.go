package ratelimittest

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Clock is the server's source of time. The algorithms read it once per
// request; the real clock is used unless WithClock gives another.
type Clock interface {
	Now() time.Time
}

// Sleeper is an optional Clock method that the latency fault uses to wait,
// so that a fake clock can make latency instant. Without it the latency
// fault waits on the real clock.
type Sleeper interface {
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that moves only when told to, for deterministic
// tests: admit a burst, Advance past a window, assert again. It is safe for
// concurrent use.
//
// It is also a complete clock for the client side: its Sleep and AfterFunc
// wait until Advance moves time past their deadline, so that one
// ManualClock given to both a ratelimittest server (WithClock) and a headway
// client (headway.WithClock) runs the two on the same fake time, with no
// real sleeps. A test advances time once the code under test is waiting:
//
//	clock.BlockUntilWaiting(ctx, 1) // the client sleeps on the clock
//	clock.Advance(time.Second)      // and wakes a second later
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*waiter
	changed chan struct{} // closed and replaced whenever a waiter is added
}

// waiter is a pending Sleep or AfterFunc.
type waiter struct {
	at   time.Time
	fire func() // called once the deadline has passed, outside the lock
	done bool   // fired or stopped
}

// NewManualClock returns a ManualClock reading start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start, changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and wakes every Sleep and AfterFunc
// whose deadline it reaches, earliest first. A negative d is ignored: the
// server's time never runs backwards; Advance(0) only wakes what is due.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
	c.fireLocked()
}

// Set moves the clock to t if t is later than its time, waking what is due.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.fireLocked()
}

// fireLocked takes the due waiters out, unlocks, and fires them in order.
func (c *ManualClock) fireLocked() {
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
	clear(c.waiters[len(kept):])
	c.waiters = kept
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *waiter) int { return a.at.Compare(b.at) })
	for _, w := range due {
		w.fire()
	}
}

// add registers a waiter due d from now; d <= 0 fires it at once.
func (c *ManualClock) add(d time.Duration, fire func()) *waiter {
	c.mu.Lock()
	w := &waiter{at: c.now.Add(d), fire: fire}
	c.waiters = append(c.waiters, w)
	close(c.changed)
	c.changed = make(chan struct{})
	if d <= 0 {
		c.fireLocked()
	} else {
		c.mu.Unlock()
	}
	return w
}

// stop cancels w, reporting whether it had not fired yet.
func (c *ManualClock) stop(w *waiter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.done {
		return false
	}
	w.done = true
	return true
}

// Sleep waits until the clock has been advanced by d, or until ctx is done,
// in which case it returns ctx.Err(). A d <= 0 returns at once (ctx.Err()).
func (c *ManualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	ch := make(chan struct{})
	w := c.add(d, func() { close(ch) })
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		if !c.stop(w) {
			return nil // woken as ctx ended: the sleep was complete
		}
		return ctx.Err()
	}
}

// AfterFunc calls f in its own goroutine once the clock has been advanced by
// d (at once for d <= 0). stop prevents the call if it has not started,
// reporting whether it did so.
func (c *ManualClock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	w := c.add(d, func() { go f() })
	return func() bool { return c.stop(w) }
}

// Waiting returns how many Sleep calls and AfterFunc timers wait for the
// clock to move.
func (c *ManualClock) Waiting() int {
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

// BlockUntilWaiting returns once at least n Sleep calls and AfterFunc
// timers wait for the clock to move, or with ctx.Err() when ctx is done
// first, so that a test advances time only when the code under test waits.
func (c *ManualClock) BlockUntilWaiting(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		ch := c.changed
		c.mu.Unlock()
		if c.Waiting() >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sleep waits d on clock, honouring ctx.
func sleep(ctx context.Context, clock Clock, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if s, ok := clock.(Sleeper); ok {
		return s.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// timeline turns clock readings into int64 nanoseconds since the Unix
// epoch. It measures from a reading taken at construction, so a real clock's
// monotonic reading keeps the count steady when the wall clock is stepped.
// It saturates about 292 years after that reading.
type timeline struct {
	origin   time.Time
	originNs int64
}

func newTimeline(c Clock) timeline {
	o := c.Now()
	if y := o.Year(); y > 1678 && y < 2262 {
		return timeline{origin: o, originNs: int64(o.Sub(time.Unix(0, 0)))}
	}
	// Beyond what int64 nanoseconds since 1970 can hold (a zero
	// time.Time, say): count from the start of o's UTC day instead, which
	// keeps windows that divide a day aligned as they would be.
	return timeline{origin: o, originNs: int64(o.Sub(o.Truncate(24 * time.Hour)))}
}

func (t timeline) ns(now time.Time) int64 {
	d := int64(now.Sub(t.origin))
	switch {
	case d > 0 && t.originNs > maxInt64-d:
		return maxInt64
	case d < 0 && t.originNs < -maxInt64-d:
		return -maxInt64
	}
	return t.originNs + d
}

// time converts back, for the absolute times the headers carry.
func (t timeline) time(ns int64) time.Time {
	return t.origin.Add(time.Duration(ns - t.originNs)).Round(0)
}

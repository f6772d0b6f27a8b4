package ratelimittest

import (
	"context"
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
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a ManualClock reading start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (a negative d is ignored: the
// server's time never runs backwards).
func (c *ManualClock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t if t is later than its time.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
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

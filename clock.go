package headway

import (
	"context"
	"time"
)

// Clock is headway's only source of time. Every wait in every layer goes
// through it, so tests can run on fake time (see WithClock). Implementations
// must be safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d, or until ctx is done, in which case it returns
	// ctx.Err() at once. A d <= 0 returns immediately (with ctx.Err()).
	Sleep(ctx context.Context, d time.Duration) error
	// AfterFunc calls f in its own goroutine once d has elapsed. stop
	// prevents the call if it has not started, reporting whether it did so.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// SystemClock is the Clock of the real world, backed by package time.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits for d or until ctx is done.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
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

// AfterFunc is time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

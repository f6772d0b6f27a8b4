package ratelimittest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	rlt "github.com/headway-go/headway/ratelimittest"
)

var clockStart = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func TestManualClockSleepWakesOnAdvance(t *testing.T) {
	clock := rlt.NewManualClock(clockStart)
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(context.Background(), time.Second) }()
	require.NoError(t, clock.BlockUntilWaiting(context.Background(), 1))
	clock.Advance(999 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("woke before its deadline")
	default:
	}
	require.Equal(t, 1, clock.Waiting())
	clock.Advance(time.Millisecond)
	require.NoError(t, <-done)
	require.Zero(t, clock.Waiting())
	require.Equal(t, clockStart.Add(time.Second), clock.Now())
}

func TestManualClockSleepEndsWithItsContext(t *testing.T) {
	clock := rlt.NewManualClock(clockStart)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(ctx, time.Hour) }()
	require.NoError(t, clock.BlockUntilWaiting(context.Background(), 1))
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Zero(t, clock.Waiting(), "a cancelled sleep stops waiting")
	require.ErrorIs(t, clock.Sleep(ctx, time.Second), context.Canceled)
	require.NoError(t, clock.Sleep(context.Background(), 0))
	require.NoError(t, clock.Sleep(context.Background(), -time.Second))
}

func TestManualClockAfterFunc(t *testing.T) {
	clock := rlt.NewManualClock(clockStart)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	fire := func(i int) func() {
		wg.Add(1)
		return func() {
			defer wg.Done()
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}
	}
	clock.AfterFunc(2*time.Second, fire(2))
	clock.AfterFunc(time.Second, fire(1))
	stop := clock.AfterFunc(1500*time.Millisecond, func() { t.Error("a stopped timer fired") })
	require.Equal(t, 3, clock.Waiting())
	require.True(t, stop())
	require.False(t, stop(), "stopping twice")
	clock.Advance(5 * time.Second)
	wg.Wait()
	require.ElementsMatch(t, []int{1, 2}, order)
	require.Zero(t, clock.Waiting())

	// A timer due now fires at once; stopping it afterwards reports false.
	wg.Add(1)
	stop = clock.AfterFunc(0, wg.Done)
	wg.Wait()
	require.False(t, stop())
}

func TestManualClockSetAndNegativeAdvance(t *testing.T) {
	clock := rlt.NewManualClock(clockStart)
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(context.Background(), time.Minute) }()
	require.NoError(t, clock.BlockUntilWaiting(context.Background(), 1))
	clock.Advance(-time.Hour)
	require.Equal(t, clockStart, clock.Now(), "time never runs backwards")
	clock.Set(clockStart.Add(-time.Hour))
	require.Equal(t, clockStart, clock.Now())
	clock.Set(clockStart.Add(time.Minute))
	require.NoError(t, <-done)
}

func TestManualClockBlockUntilWaitingEndsWithItsContext(t *testing.T) {
	clock := rlt.NewManualClock(clockStart)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, clock.BlockUntilWaiting(ctx, 1), context.Canceled)
	require.NoError(t, clock.BlockUntilWaiting(ctx, 0))
}

// TestManualClockManySleepers: concurrent sleepers and advances stay
// consistent under -race; every sleeper wakes exactly once.
func TestManualClockManySleepers(t *testing.T) {
	clock := rlt.NewManualClock(clockStart)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, clock.Sleep(context.Background(), time.Duration(i%10+1)*time.Millisecond))
		}()
	}
	require.NoError(t, clock.BlockUntilWaiting(context.Background(), 200))
	for range 10 {
		clock.Advance(time.Millisecond)
	}
	wg.Wait()
	require.Zero(t, clock.Waiting())
}

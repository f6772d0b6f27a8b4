package headway

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/headway-go/headway/internal/testkit/fakeclock"
)

// TestWithLimiter: the caller's own rate.Limiter is a ceiling on top of the
// pacing layer, driven on headway's clock: three GETs through a limiter of
// 10 a second with a burst of 1 are sent 100 ms apart, the waits counted in
// Stats; a pattern limits only what it matches.
func TestWithLimiter(t *testing.T) {
	lim := rate.NewLimiter(10, 1)
	h := newHarness(t, []reply{ok200(), ok200(), ok200(), ok200()}, WithLimiter(lim))
	var waited time.Duration
	for range 3 {
		_, err, st := h.do(t, "GET", "")
		require.NoError(t, err)
		waited += st.Waited
	}
	require.Equal(t, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond}, h.clk.Sleeps())
	require.Equal(t, 200*time.Millisecond, waited)

	// A pattern: POSTs are limited, GETs are not.
	lim = rate.NewLimiter(10, 1)
	h = newHarness(t, []reply{ok200(), ok200(), ok200(), ok200()}, WithLimiter(lim, "POST api.test/v1/"))
	for range 3 {
		_, err, _ := h.do(t, "GET", "")
		require.NoError(t, err)
	}
	require.Empty(t, h.clk.Sleeps(), "GETs are not limited")
	_, err, _ := h.do(t, "POST", "x", "Idempotency-Key", "a")
	require.NoError(t, err)
	require.Empty(t, h.clk.Sleeps(), "the first POST has its token")
}

// TestWithLimiterRefusesWhatCannotFit: a wait the caller's limiter asks for
// that exceeds WithMaxWait fails at once with a *RateLimitError, and the
// token is given back; a request whose context ends while it waits gives
// its token back too and fails with ReasonCanceled.
func TestWithLimiterRefusesWhatCannotFit(t *testing.T) {
	lim := rate.NewLimiter(rate.Every(time.Minute), 1)
	h := newHarness(t, []reply{ok200(), ok200()}, WithLimiter(lim), WithMaxWait(10*time.Second))
	_, err, _ := h.do(t, "GET", "")
	require.NoError(t, err)
	_, err, _ = h.do(t, "GET", "")
	var rle *RateLimitError
	require.ErrorAs(t, err, &rle)
	require.Equal(t, ReasonWaitTooLong, rle.Reason)
	require.Zero(t, rle.StatusCode)
	require.Equal(t, time.Minute, rle.Wait)
	require.Contains(t, rle.Error(), "WithLimiter's rate.Limiter")
	require.Equal(t, 1, h.script.calls(), "the second was not sent")
	require.Empty(t, h.clk.Sleeps())
	// The token was given back: the limiter is where the first request left it.
	require.InDelta(t, 0, lim.TokensAt(h.clk.Now()), 1e-9)

	clk := fakeclock.New(start, false)
	lim = rate.NewLimiter(1, 1)
	h = newHarness(t, []reply{ok200(), ok200()}, WithLimiter(lim), WithClock(clk))
	h.clk = clk
	_, err, _ = h.do(t, "GET", "")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() { _, err, _ := h.doCtx(t, ctx, "GET", ""); errs <- err }()
	require.NoError(t, clk.WaitForPending(context.Background(), 1))
	clk.Advance(400 * time.Millisecond)
	cancel()
	err = <-errs
	require.ErrorAs(t, err, &rle)
	require.Equal(t, ReasonCanceled, rle.Reason)
	require.True(t, errors.Is(err, context.Canceled))
	require.Equal(t, 600*time.Millisecond, rle.Wait, "what was left of the limiter's wait")
	require.Equal(t, 1, h.script.calls())
	require.InDelta(t, 0.4, lim.TokensAt(clk.Now()), 1e-9, "the reserved token is given back")
}

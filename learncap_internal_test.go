package headway

import "testing"

// TestLearntCapPeak: a long request while 40 short ones go one after
// another beside it (never more than 2 in flight). Its peak was taken to
// be the window (16) once more requests than the ring holds went during
// its life, so a rate limiter's 429 of it was taken for a cap's, hidden
// from the state, and a second one with 2 in flight set the window to 1.
// The peak is now what the ring shows (an underestimate at worst), and a
// 429 in an episode with fewer in flight than the window is a rate's.
func TestLearntCapPeak(t *testing.T) {
	kw := &keyWaiters{}
	kw.lc = &learntCap{window: 16}
	long := kw.enterWindow(true)
	for range 40 {
		s := kw.enterWindow(true)
		kw.windowAnswer(s, 200, false, false)
	}
	c := kw.lc
	t.Logf("window %d, peak of the long request %d (at most 2 were ever in flight)", c.window, c.peak(long))
	if cap := kw.windowAnswer(long, 429, false, false); cap {
		t.Errorf("a 429 with at most 2 in flight, window %d, taken for a cap's: ceiling %d, window now %d", 16, c.ceiling, c.window)
	}
	// A second 429 of the rate limiter, two in flight.
	a := kw.enterWindow(true)
	b := kw.enterWindow(true)
	kw.windowAnswer(b, 429, false, false) // a 429 comes back at once
	kw.windowAnswer(a, 200, false, false)
	t.Logf("after a second 429 with 2 in flight: off %v, ceiling %d, window %d", kw.lc == nil, c.ceiling, c.window)
	n := 0
	for kw.lc != nil && c.window == 1 {
		s := kw.enterWindow(true)
		kw.windowAnswer(s, 200, false, false)
		n++
	}
	t.Logf("requests sent one at a time before the window grows again: %d", n)
}

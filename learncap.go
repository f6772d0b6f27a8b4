package headway

import (
	"math"
	"net/http"
	"time"
)

// A server may limit how many requests it serves at once rather than how
// many it serves per window: it refuses a request that finds too many in
// flight, whatever the rate, and its answers say nothing of it. Pacing by
// rate alone then sends a burst the server refuses most of, and learns from
// those refusals a rate far below what the server allows. So a key whose
// answers name no quota (no rate-limit headers: pacing knows nothing of
// its limits) keeps a window on its requests in flight, learnt as TCP
// learns a congestion window, but slowly from the start, so that learning
// a cap costs a refusal or two rather than a burst's worth:
//
//   - The window opens with the key's first answer that names nothing, at
//     two requests once one was admitted (the key's first request goes
//     alone anyway: pace's first lease). It grows each time as many
//     requests as it holds are answered that were sent with it more than
//     half full, by an eighth of itself (at least one): by that much a
//     round trip while it binds (capGrowth). Any answer but a 429 counts:
//     a failing backend is no cap on requests in flight. A window that
//     stays full for windowStall with no answer grows all the same: the
//     requests in it (long polls) were taken, as a cap's 429 comes at once.
//   - A request takes its place once granted; one told to wait holds none.
//   - A request's peak is the most requests in flight, itself included,
//     while it was: the server's count when it arrived was at most that
//     (answers on their way back count here, not there), so a cap's 429
//     comes only with a peak above the cap.
//   - A 429 with a peak of more than one that filled the window (or one
//     short of it, which may have grown meanwhile) is taken for a cap's:
//     the peak is the cap's ceiling, and the window goes one below it. A
//     429 with a Retry-After is a rate's: the server says when to come
//     back, and the pacing state pauses the key.
//   - A cap's 429 is not told to the pacing state, which models rates: it
//     is no news of one. But a rate's 429s come with any count, and a
//     window running out of quota refuses every request in flight: so a
//     429 taken for a cap's opens an episode, which an admission of a
//     request granted after it closes (the cap holds). In the episode, a
//     429 with a lower peak, still filling the window, lowers the ceiling
//     to it; but one with fewer in flight than the window, or more of them
//     than one past the window's last step (by which it passed the cap),
//     or one with a Retry-After, shows a rate's doing instead: the window
//     is dropped for good, and that 429 and those after it are told to the
//     pacing state (all but the first one or two of a burst).
//   - A cap refuses again only when the window tries its ceiling: a 429
//     taken for a cap's within capEpisodeGap admissions of the last
//     episode is a rate's (a sliding counter refuses one request at a time,
//     with the window full), and the key's window is dropped for good.
//   - Under a ceiling the window grows up to one below it, and tries it
//     again every capProbeEvery admissions (a refusal each time, should the
//     cap hold); as many admissions as the ceiling, sent with at least the
//     ceiling in flight, clear it.
//
// Once an answer names a quota, the key's limits are the pacing state's to
// model and the window is dropped. A request that a cap of the caller's
// governs (WithMaxInFlight) does not count in it: the caller said how many
// the server takes. The window lives with the key's waiters: a key idle
// long enough for them to be swept opens a new one with its next answer.
type learntCap struct {
	off      bool   // its 429s are a rate's: drop the window
	inFlight int    // counted requests: granted, not yet answered nor given back
	window   int    // the most in flight
	full     int    // answers to requests sent with the window more than half full, since it last grew
	ceiling  int    // the least count of a 429 taken for a cap's; 0: none
	atCeil   int    // admissions sent with at least the ceiling in flight, since it was set
	probe    int    // admissions at one below the ceiling since it was last tried
	granted  uint64 // requests counted so far
	// recent holds the count in flight when each of the last len(recent)
	// requests was granted, by number, for their peaks.
	recent [32]int16
	// episodes is how many have opened; sinceEpisode, the admissions
	// since the last one opened.
	episodes, sinceEpisode int

	// The episode opened by a 429 taken for a cap's (see above).
	episode    bool
	epGranted  uint64 // granted when it opened
	epRefusals int    // 429s taken for a cap's in it
	epMax      int    // the 429s it may take for a cap's: the window's last step, by which it passed the cap
	step       int    // the window's last growth
}

// A slot is a request's place in its key's window: the count in flight
// when it was granted, itself included (0: not counted), and its number.
type slot struct {
	n   int
	seq uint64
}

// capEpisodeGap is how many admissions must separate two episodes for
// both to be a cap's (see above): the window tries its ceiling every
// capProbeEvery.
const capEpisodeGap = 50

// capGrowth sets how fast the window grows while it binds: by a
// capGrowth-th of itself (at least one) a round trip, so that a window
// past a cap holds a capGrowth-th more than it (one request past a cap of
// 4 or 8), and one that binds nowhere reaches 256 in about 37 round trips.
const capGrowth = 8

// capProbeEvery is how many admissions at one below a learnt ceiling pass
// before the window tries the ceiling again: about one refusal in that many
// while the server's cap holds.
const capProbeEvery = 200

// whyLearntCap is why a request waits for the window of a key that says
// nothing of its limits.
const whyLearntCap = "waiting for requests in flight to finish (the server's answers say nothing of its limits: headway learns how many it takes at once)"

// windowRoom reports whether kw's window has room for one more request.
// A key has no window until an answer that names nothing comes
// (learntCap): its first request goes alone anyway (pace's first lease),
// and one whose waiters were swept is known to its pacing state.
func (kw *keyWaiters) windowRoom() bool {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	c := kw.lc
	return c == nil || c.inFlight < c.window
}

// enterWindow counts a request just granted in kw's window (when count:
// a request that a cap of the caller's governs does not count), and
// returns its place. The window had room a moment before (windowRoom); a
// request granted meanwhile may take it one past, rarely.
func (kw *keyWaiters) enterWindow(count bool) slot {
	if !count {
		return slot{}
	}
	kw.mu.Lock()
	defer kw.mu.Unlock()
	if kw.lc == nil {
		return slot{}
	}
	return kw.countInWindow()
}

// countInWindow counts a request in kw's window (kw.lc, not nil) and
// returns its place; kw.mu is held.
func (kw *keyWaiters) countInWindow() slot {
	c := kw.lc
	c.inFlight++
	c.granted++
	c.recent[c.granted%uint64(len(c.recent))] = int16(min(c.inFlight, math.MaxInt16))
	kw.flying++ // a key with requests in flight is not swept
	return slot{n: c.inFlight, seq: c.granted}
}

// enterWindowIfRoom counts a request on credit in kw's window while the
// window is at most half full with it, and returns its place; false
// otherwise: the request takes the slow path, where the window binds
// (requests there wait for room, and those sent with the window more than
// half full grow it).
func (kw *keyWaiters) enterWindowIfRoom() (slot, bool) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	c := kw.lc
	if c == nil {
		return slot{}, true
	}
	if 2*(c.inFlight+1) > c.window {
		return slot{}, false
	}
	return kw.countInWindow(), true
}

// windowStall is how long a request waits for a full window while no
// answer comes before the window grows all the same: requests that stay
// long in flight (long polls, slow reports) were taken by the server, and
// a cap's 429 would have come at once.
const windowStall = 250 * time.Millisecond

// stallWindow grows kw's window, as an answer would, when it is still full
// and has not changed since version (no answer came for windowStall).
func (kw *keyWaiters) stallWindow(version uint64) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	if c := kw.lc; c != nil && kw.changes.Load() == version && c.inFlight >= c.window {
		c.grow()
		kw.wake()
	}
}

// windowAnswer counts the answer to the request of slot s: its status (0:
// none came, or it was given back), whether it named a quota, and whether
// it said when to come back (a Retry-After: a 429 that does is a rate's,
// told to the pacing state, whose pause it is). It reports whether the
// answer is a cap's 429, which the pacing state is not told. The caller
// wakes the key's waiters after (finish).
func (kw *keyWaiters) windowAnswer(s slot, status int, named, retryAfter bool) (capRefusal bool) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	if s.n > 0 {
		kw.flying--
	}
	if named {
		kw.dropWindow()
	}
	if kw.noWindow || status == 0 {
		if c := kw.lc; c != nil && s.n > 0 {
			c.inFlight--
		}
		return false
	}
	c := kw.lc
	if c == nil {
		// The first answer that names nothing: the window opens, at
		// two once one request was admitted.
		c = &learntCap{window: 1}
		if status != http.StatusTooManyRequests {
			c.window = 2
		}
		kw.lc = c
		kw.windowed.Store(true)
		return false
	}
	if s.n == 0 {
		return false
	}
	c.inFlight--
	switch {
	case status == http.StatusTooManyRequests && retryAfter:
		c.rateRefusal()
	case status == http.StatusTooManyRequests:
		capRefusal = c.refused(c.peak(s))
	default:
		c.admitted(s)
	}
	if c.off {
		kw.dropWindow()
	}
	return capRefusal
}

// dropWindow forgets kw's window for good (an answer named a quota, or its
// 429s are a rate's); kw.mu is held.
func (kw *keyWaiters) dropWindow() {
	kw.noWindow, kw.lc = true, nil
	kw.windowed.Store(false)
}

// peak returns the most requests in flight while the request of slot s
// was: the count when it was granted and when each granted after it was
// (the last len(recent) of them: with more, the peak may be
// underestimated, which takes a cap's 429 for a rate's, never the
// reverse).
func (c *learntCap) peak(s slot) int {
	p, from := s.n, s.seq+1
	if n := uint64(len(c.recent)); c.granted-s.seq >= n {
		from = c.granted - n + 1
	}
	for seq := from; seq <= c.granted; seq++ {
		p = max(p, int(c.recent[seq%uint64(len(c.recent))]))
	}
	return p
}

// refused counts a 429 of a request whose peak was peak, and reports
// whether it is taken for a cap's.
func (c *learntCap) refused(peak int) bool {
	if c.episode {
		if peak < 2 || peak < c.window || c.epRefusals >= c.epMax {
			// A rate's doing after all: the key's refusals are the
			// pacing state's from now on (off drops the window).
			c.off = true
			return false
		}
		c.epRefusals++
		if peak < c.ceiling {
			c.ceiling = peak // the cap is lower than the first one showed
			c.window = min(c.window, peak-1)
		}
		return true
	}
	if peak < 2 || peak+1 < c.window {
		return false // the window was not full: a rate's
	}
	if c.episodes > 0 && c.sinceEpisode < capEpisodeGap {
		c.off = true // refused again so soon: a rate's, not a cap's
		return false
	}
	c.episodes++
	c.sinceEpisode = 0
	c.episode, c.epGranted, c.epRefusals = true, c.granted, 1
	c.epMax = max(c.step, 1) + 1
	if c.ceiling == 0 || peak < c.ceiling {
		c.ceiling = peak
	}
	c.window, c.full, c.atCeil, c.probe = c.ceiling-1, 0, 0, 0
	return true
}

// grow grows the window by a step (capGrowth), up to one below the
// ceiling.
func (c *learntCap) grow() {
	if c.ceiling > 0 && c.window+1 >= c.ceiling {
		return
	}
	c.step = max(c.window/capGrowth, 1)
	if c.ceiling > 0 {
		c.step = min(c.step, c.ceiling-1-c.window)
	}
	c.full, c.window = 0, c.window+c.step
}

// rateRefusal counts a 429 that says when to come back: a rate's. In an
// episode, it shows that the episode's 429s were a rate's too.
func (c *learntCap) rateRefusal() {
	if c.episode {
		c.off = true
	}
}

// admitted counts an answer other than a 429 to the request of slot s.
func (c *learntCap) admitted(s slot) {
	c.sinceEpisode++
	if c.episode && s.seq > c.epGranted {
		c.episode = false // granted after the 429 and taken: the story holds
	}
	if c.ceiling > 0 && s.n >= c.ceiling {
		if c.atCeil++; c.atCeil >= c.ceiling {
			c.ceiling, c.atCeil = 0, 0 // the server takes as many after all
		}
	}
	if 2*s.n <= c.window {
		return // sent with room: the window did not bind
	}
	if c.ceiling == 0 || c.window+1 < c.ceiling {
		if c.full++; c.full >= c.window {
			c.grow()
		}
		return
	}
	if c.probe++; c.probe >= capProbeEvery {
		c.probe = 0
		c.window = c.ceiling
	}
}

// finish releases the in-flight caps (WithMaxInFlight) of a request that
// ended, and wakes the requests that wait.
func (kw *keyWaiters) finish(caps []int) {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	kw.releaseLocked(caps)
	kw.wake()
}

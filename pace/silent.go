package pace

import (
	"math"
	"time"
)

// silent is the rate of a key whose server sends no rate-limit headers,
// learnt from its 429s as the AWS SDK's adaptive retry mode does (CUBIC):
// unlimited until the first 429; then 0.7 times the measured sending rate,
// growing back along a cubic curve towards, and past, the rate at which the
// server refused, until the next 429. Requests are spaced by a token bucket
// filling at that rate (golang.org/x/time/rate's model, as a plain value).
type silent struct {
	// On reports that a 429 without headers was seen: the rate applies.
	on bool
	// Max is the rate at the last 429 (CUBIC's W_max) and Throttled its
	// instant, in requests per second.
	max       float64
	throttled time.Time
	// Tokens and Filled are the token bucket: Tokens at Filled.
	tokens float64
	filled time.Time
	// Measured is the smoothed rate of requests the server accepted;
	// Count were accepted in the interval that began at Since.
	measured float64
	count    int
	since    time.Time
	// Cut is the instant of the last 429 that cut the rate: answers to
	// requests sent before it are part of the same refusal.
	cut time.Time
	// Accepted counts the answers accepted since First, the first send,
	// until the first 429.
	admitted int
	first    time.Time
	// Streak counts the key's 429s without headers since the last answer
	// it accepted (those to requests sent after the one before), the
	// last of which arrived at Backed.
	streak int
	backed time.Time
}

// backOff returns how long the key pauses after a 429 without rate-limit
// headers or Retry-After, to a request sent at sent, received at now: none
// for the first since the last answer accepted (the rate's cut may be
// enough) nor for a request in flight before the last (the same refusal);
// then a request's interval at the learnt rate (10 to 100 ms), doubled
// with each further refusal, up to maxBackOff. A fixed window that a rate cannot see
// refuses everything until it rolls: paced requests would each earn a 429
// until then; with the pause, and one request first after it (the key's
// probe), a few do.
func (a *silent) backOff(now, sent time.Time) time.Duration {
	if a.streak > 0 && sent.Before(a.backed) {
		return 0 // in flight before the last refusal: the same refusal
	}
	a.streak++
	a.backed = now
	if a.streak == 1 {
		return 0 // the first: the rate's cut may be enough
	}
	step := time.Duration(float64(time.Second) / a.Rate(now))
	step = min(max(step, minBackOff), firstBackOff)
	return min(step<<min(a.streak-2, 16), maxBackOff)
}

// The bounds of the first pause after a 429 without headers, and the
// longest.
const (
	minBackOff   = 10 * time.Millisecond
	firstBackOff = 100 * time.Millisecond
	maxBackOff   = 8 * time.Second
)

// cutCooldown is the least time between two cuts of the rate.
const cutCooldown = 500 * time.Millisecond

// The CUBIC constants of the AWS SDK's adaptive mode.
const (
	cubicC        = 0.4
	cubicBeta     = 0.7
	measureWindow = 500 * time.Millisecond
	measureSmooth = 0.8
	minRate       = 0.5 // requests per second
)

// Rate returns the rate at now, in requests per second (+Inf when off).
func (a *silent) Rate(now time.Time) float64 {
	if !a.on {
		return math.Inf(1)
	}
	t := seconds(now.Sub(a.throttled))
	k := math.Cbrt(a.max * (1 - cubicBeta) / cubicC)
	r := cubicC*math.Pow(t-k, 3) + a.max
	if a.measured > 0 {
		r = min(r, max(2*a.measured, a.max))
	}
	return max(r, minRate)
}

// burst is the bucket's capacity at rate r: a tenth of a second's worth,
// at least one request.
func burst(r float64) float64 { return max(1, r/10) }

// fill brings the bucket to now.
func (a *silent) fill(now time.Time) {
	r := a.Rate(now)
	if now.After(a.filled) {
		a.tokens = min(burst(r), a.tokens+r*seconds(now.Sub(a.filled)))
		a.filled = now
	}
}

// hold reports whether a request may go at t, and if not, until when it
// waits.
func (a *silent) hold(t int64) (int64, bool) {
	if !a.on {
		return 0, true
	}
	now := time.Unix(0, t)
	a.fill(now)
	if a.tokens >= 1 {
		return 0, true
	}
	return after(t, (1-a.tokens)/a.Rate(now)), false
}

// sent records a request sent at now.
func (a *silent) sent(now time.Time) {
	if a.since.IsZero() {
		a.since = now
	}
	if a.first.IsZero() {
		a.first = now
	}
	if a.on {
		a.fill(now)
		a.tokens--
	}
}

// accepted records an answer the server did not refuse, at now: the rate
// the server accepts is what a refusal cuts from.
func (a *silent) accepted(now time.Time) {
	if a.since.IsZero() {
		a.since = now
	}
	if el := now.Sub(a.since); el >= measureWindow {
		rate := float64(a.count) / seconds(el)
		a.measured = measureSmooth*rate + (1-measureSmooth)*a.measured
		a.count, a.since = 0, now
	}
	a.count++
	if !a.on {
		a.admitted++
	}
	a.streak = 0
}

// refund gives back the token of a request that never left.
func (a *silent) refund() {
	if a.on {
		a.tokens++
	}
}

// throttle takes in a 429 at now, to a request sent at sent. A request sent
// before the last 429 says nothing about the rate since: it is ignored, so
// that one burst refused at once cuts the rate once.
func (a *silent) throttle(now, sent time.Time, retryAfter time.Duration) {
	if a.on && (sent.Before(a.cut) || now.Sub(a.cut) < cutCooldown) {
		// Part of the refusal already taken in: a window that refuses
		// until it rolls says so to every request in it, whatever the
		// rate since.
		return
	}
	if !a.on && a.admitted == 0 && retryAfter > 0 {
		// Nothing accepted yet: no rate to learn; the pause will do.
		return
	}
	rate := a.measured
	if !a.on && retryAfter > 0 && !a.first.IsZero() {
		// The first refusal: what was accepted until now, and the wait
		// the server asks for before more, bound the rate it allows.
		// Start on the curve's plateau, at that rate: a measured rate, not
		// one to cut from.
		a.max = max(float64(a.admitted)/seconds(now.Sub(a.first)+retryAfter), minRate)
		k := math.Cbrt(a.max * (1 - cubicBeta) / cubicC)
		a.throttled, a.on, a.cut = now.Add(-time.Duration(k*float64(time.Second))), true, now
		a.tokens, a.filled = min(1, burst(a.Rate(now))), now
		return
	}
	if a.count > 0 {
		rate = max(rate, float64(a.count)/max(seconds(now.Sub(a.since)), seconds(measureWindow)))
	}
	if a.on {
		a.fill(now)
		rate = min(rate, a.Rate(now))
	} else {
		// The request that was refused may be retried at once by the
		// rate's measure; its retry's own backoff spaces it.
		a.tokens = 1
	}
	a.max = max(rate, minRate)
	a.throttled, a.cut = now, now
	a.on = true
	a.tokens, a.filled = min(a.tokens, burst(a.Rate(now))), now
}

// seconds returns d in seconds.
func seconds(d time.Duration) float64 { return d.Seconds() }

package pace

import (
	"fmt"
	"math"
	"time"
)

// Adaptive is the rate of a key whose server sends no rate-limit headers,
// learnt from its 429s as the AWS SDK's adaptive retry mode does (CUBIC):
// unlimited until the first 429; then 0.7 times the measured sending rate,
// growing back along a cubic curve towards, and past, the rate at which the
// server refused, until the next 429. Requests are spaced by a token bucket
// filling at that rate (golang.org/x/time/rate's model, as a plain value).
type Adaptive struct {
	// On reports that a 429 without headers was seen: the rate applies.
	On bool `json:"on,omitempty"`
	// Max is the rate at the last 429 (CUBIC's W_max) and Throttled its
	// instant, in requests per second.
	Max       float64   `json:"max,omitempty"`
	Throttled time.Time `json:"throttled,omitempty"`
	// Tokens and Filled are the token bucket: Tokens at Filled.
	Tokens float64   `json:"tokens,omitempty"`
	Filled time.Time `json:"filled,omitempty"`
	// Measured is the smoothed rate of requests the server accepted;
	// Count were accepted in the interval that began at Since.
	Measured float64   `json:"measured,omitempty"`
	Count    int       `json:"count,omitempty"`
	Since    time.Time `json:"since,omitempty"`
	// Cut is the instant of the last 429 that cut the rate: answers to
	// requests sent before it are part of the same refusal.
	Cut time.Time `json:"cut,omitempty"`
	// Accepted counts the answers accepted since First, the first send,
	// until the first 429.
	Accepted int       `json:"accepted,omitempty"`
	First    time.Time `json:"first,omitempty"`
	// Streak counts the key's 429s without headers since the last answer
	// it accepted (those to requests sent after the one before), the
	// last of which arrived at Backed.
	Streak int       `json:"streak,omitempty"`
	Backed time.Time `json:"backed,omitempty"`
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
func (a *Adaptive) backOff(now, sent time.Time) time.Duration {
	if a.Streak > 0 && sent.Before(a.Backed) {
		return 0 // in flight before the last refusal: the same refusal
	}
	a.Streak++
	a.Backed = now
	if a.Streak == 1 {
		return 0 // the first: the rate's cut may be enough
	}
	step := time.Duration(float64(time.Second) / a.Rate(now))
	step = min(max(step, minBackOff), firstBackOff)
	return min(step<<min(a.Streak-2, 16), maxBackOff)
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
func (a *Adaptive) Rate(now time.Time) float64 {
	if !a.On {
		return math.Inf(1)
	}
	t := seconds(now.Sub(a.Throttled))
	k := math.Cbrt(a.Max * (1 - cubicBeta) / cubicC)
	r := cubicC*math.Pow(t-k, 3) + a.Max
	if a.Measured > 0 {
		r = min(r, max(2*a.Measured, a.Max))
	}
	return max(r, minRate)
}

// burst is the bucket's capacity at rate r: a tenth of a second's worth,
// at least one request.
func burst(r float64) float64 { return max(1, r/10) }

// fill brings the bucket to now.
func (a *Adaptive) fill(now time.Time) {
	r := a.Rate(now)
	if now.After(a.Filled) {
		a.Tokens = min(burst(r), a.Tokens+r*seconds(now.Sub(a.Filled)))
		a.Filled = now
	}
}

// hold reports whether a request may go at now.
func (a *Adaptive) hold(now time.Time) (Decision, bool) {
	if !a.On {
		return Decision{}, true
	}
	a.fill(now)
	if a.Tokens >= 1 {
		return Decision{}, true
	}
	r := a.Rate(now)
	return Decision{At: after(now, (1-a.Tokens)/r), Definite: true, Why: WhyAdaptive, Detail: fmt.Sprintf("%.3g requests/s", r)}, false
}

// sent records a request sent at now.
func (a *Adaptive) sent(now time.Time) {
	if a.Since.IsZero() {
		a.Since = now
	}
	if a.First.IsZero() {
		a.First = now
	}
	if a.On {
		a.fill(now)
		a.Tokens--
	}
}

// accepted records an answer the server did not refuse, at now: the rate
// the server accepts is what a refusal cuts from.
func (a *Adaptive) accepted(now time.Time) {
	if a.Since.IsZero() {
		a.Since = now
	}
	if el := now.Sub(a.Since); el >= measureWindow {
		rate := float64(a.Count) / seconds(el)
		a.Measured = measureSmooth*rate + (1-measureSmooth)*a.Measured
		a.Count, a.Since = 0, now
	}
	a.Count++
	if !a.On {
		a.Accepted++
	}
	a.Streak = 0
}

// refund gives back the token of a request that never left.
func (a *Adaptive) refund() {
	if a.On {
		a.Tokens++
	}
}

// throttle takes in a 429 at now, to a request sent at sent. A request sent
// before the last 429 says nothing about the rate since: it is ignored, so
// that one burst refused at once cuts the rate once.
func (a *Adaptive) throttle(now, sent time.Time, retryAfter time.Duration) {
	if a.On && (sent.Before(a.Cut) || now.Sub(a.Cut) < cutCooldown) {
		// Part of the refusal already taken in: a window that refuses
		// until it rolls says so to every request in it, whatever the
		// rate since.
		return
	}
	if !a.On && a.Accepted == 0 && retryAfter > 0 {
		// Nothing accepted yet: no rate to learn; the pause will do.
		return
	}
	rate := a.Measured
	if !a.On && retryAfter > 0 && !a.First.IsZero() {
		// The first refusal: what was accepted until now, and the wait
		// the server asks for before more, bound the rate it allows.
		// Start on the curve's plateau, at that rate: a measured rate, not
		// one to cut from.
		a.Max = max(float64(a.Accepted)/seconds(now.Sub(a.First)+retryAfter), minRate)
		k := math.Cbrt(a.Max * (1 - cubicBeta) / cubicC)
		a.Throttled, a.On, a.Cut = now.Add(-time.Duration(k*float64(time.Second))), true, now
		a.Tokens, a.Filled = min(1, burst(a.Rate(now))), now
		return
	}
	if a.Count > 0 {
		rate = max(rate, float64(a.Count)/max(seconds(now.Sub(a.Since)), seconds(measureWindow)))
	}
	if a.On {
		a.fill(now)
		rate = min(rate, a.Rate(now))
	} else {
		// The request that was refused may be retried at once by the
		// rate's measure; its retry's own backoff spaces it.
		a.Tokens = 1
	}
	a.Max = max(rate, minRate)
	a.Throttled, a.Cut = now, now
	a.On = true
	a.Tokens, a.Filled = min(a.Tokens, burst(a.Rate(now))), now
}

package pace

import (
	"fmt"
	"math"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// used returns the cost in p's unit granted since the base response.
func (p *Policy) used(s *State) int64 { return s.spentIn(p.Bucket, p.Unit) - p.BaseSpent }

// capacity returns the most the quota can hold, +Inf when unknown.
func (p *Policy) capacity() float64 {
	if p.Limit > 0 {
		return float64(p.Limit)
	}
	return math.Inf(1)
}

// available returns what is left at now, by the inferred model. A quota
// that says nothing of when it returns (no reset, no known rate) lets one
// request go once a unit could have returned, to find out.
func (p *Policy) available(s *State, now time.Time) float64 {
	base := float64(p.Remaining)
	if p.Model == ModelRefill && p.Refill > 0 && now.After(p.BaseAt) {
		base = min(p.capacity(), base+p.rate()*seconds(now.Sub(p.BaseAt)))
	}
	avail := base - float64(p.used(s))
	if avail > 0 {
		// Others spend too: keep back what they may spend while a request
		// of ours is on its way.
		avail -= p.keptBack(s)
	}
	return avail
}

// keptBack is what available keeps back of a quota with room for others
// who spend it (another process, another client): what they may spend
// while a request of ours is on its way. It is bounded, whatever the
// measures say (a round trip of hours, a rate above the quota's), so that
// a full quota always has room for a request: by a round trip of at most
// maxKeptBackRTT, and by all but one unit of the quota's capacity.
func (p *Policy) keptBack(s *State) float64 {
	if p.Foreign <= 0 {
		return 0
	}
	return min(p.Foreign*seconds(min(s.RTT, maxKeptBackRTT)), max(p.capacity()-1, 0))
}

// maxKeptBackRTT bounds the round trip over which keptBack counts what
// others spend.
const maxKeptBackRTT = 10 * time.Second

// probeOK reports whether one request may go to find out what p's quota
// holds, whatever it costs: the first after a reset whose effect is not
// known, or, for a quota that says nothing of when it returns (no reset,
// no known rate), once a unit could have returned.
func (p *Policy) probeOK(s *State, now time.Time) bool {
	if p.probing(s) {
		return false
	}
	if !p.Rolled.IsZero() && !p.Settled && p.Remaining == 0 && p.BaseSpent == s.spentIn(p.Bucket, p.Unit) && p.ResetAt.IsZero() {
		return true
	}
	return p.ResetAt.IsZero() && (p.Model != ModelRefill || p.Refill <= 0) && !p.BaseAt.IsZero() &&
		!now.Before(p.BaseAt.Add(p.guessStep()))
}

// roll applies a reset that now has reached: a window's quota returns
// whole; a quota whose behaviour at its reset is unknown lets one request
// go first, whose answer tells.
func (p *Policy) roll(s *State, now time.Time) {
	if p.ResetAt.IsZero() || now.Before(p.ResetAt) {
		return
	}
	if p.Model == ModelRefill && p.Refill > 0 {
		// The refill governs; the reset says nothing it does not.
		p.ResetAt = time.Time{}
		return
	}
	p.RolledDate = p.DateReset
	guessed := p.Guessed // cleared by the answer that confirms it
	if p.Model == ModelWindow && p.Limit > 0 && !guessed && (p.RolledDate.IsZero() || p.DateTrusted) {
		// Requests still in flight may be counted in the new window.
		p.Remaining = p.Limit
		p.BaseSpent = s.spentIn(p.Bucket, p.Unit) - s.inFlightIn(p.Bucket, p.Unit)
		p.BaseAt = p.ResetAt
		p.Rolled = p.ResetAt
		p.Settled = false
		p.ResetAt = p.nextReset(now)
		return
	}
	// What the reset brings back is not known (or the quota refills, and
	// the reset says when it is full; or the reset was derived from the
	// server's Date and not yet confirmed): one request goes first, and its
	// answer tells; a refill keeps adding meanwhile.
	p.Remaining = 0
	p.BaseSpent = s.spentIn(p.Bucket, p.Unit)
	p.BaseAt = p.ResetAt
	p.Rolled = p.ResetAt
	p.Settled = false
	p.ResetAt = time.Time{}
	if p.Model == ModelWindow && p.RolledDate.IsZero() && !guessed {
		p.Model = ModelUnknown
	}
}

// guessAnchored infers the reset of a window that the answer to l, the
// first request after the last reset, shows fresh, when the server writes
// its reset in whole seconds rounded up (an epoch second, as
// express-rate-limit's X-RateLimit-Reset) and starts a window at a
// client's first request after the last one ended: waiting for the
// rounded second costs up to a second per window (1.9x the ideal on a 1 s
// window). A window that began with l, sent early in a second, whose
// rounded reset lies over half a second past a whole number of seconds
// after l, is taken to last that whole number of seconds, less the second
// the rounding added: it ends then, and one request goes first to confirm
// it. When the window's length is known, the guess must match it (else the
// window is aligned to the clock, not to l); when it is not, a window
// aligned to the clock can be taken for one that is not, once: a guess
// that comes too early (a refusal) ends the guessing for the policy.
func (p *Policy) guessAnchored(s *State, l *Lease, o *ratelimit.Policy, date time.Time) {
	if p.GuessRefuted || p.Model != ModelWindow || date.IsZero() || !s.Clock.Known || o.Reset%time.Second != 0 || o.Reset < 2*time.Second || !absoluteResets(o.Dialect) {
		return
	}
	// The rounded reset in this clock's time (the clocks taken to agree
	// unless the Date bounds say otherwise), and its distance from the
	// window's first request: w plus what the rounding added, less the
	// part of a second that request was sent into.
	reset := date.Add(o.Reset).Add(min(max(0, s.Clock.Lo), s.Clock.Hi))
	span := reset.Sub(l.At)
	frac := span - span.Truncate(time.Second)
	if frac > anchorSlack || frac <= anchorSlack/10 {
		// Sent into the first half of a second (or so near a whole
		// second that the clocks blur it): the rounding cost over half a
		// second, and the window's length is span rounded, less 1 s.
		w := span.Round(time.Second) - time.Second
		if known := max(p.Window, p.Period); known > 0 && w != known {
			// A window of known length: a reset at its end from the
			// request is not rounded up; it is aligned to the clock.
			return
		}
		if w >= time.Second {
			p.ResetAt, p.Guessed = l.At.Add(w+anchorMargin), true
		}
	}
}

// absoluteResets reports whether d's servers write a reset as an instant
// (a Unix second, a date), which rounds up to a whole second of the clock;
// a delay (IETF's, OpenAI's) rounds up from the instant it was written.
func absoluteResets(d ratelimit.Dialect) bool {
	switch d {
	case ratelimit.DialectXRateLimit, ratelimit.DialectXRateLimitHyphenated, ratelimit.DialectGitHub,
		ratelimit.DialectGitLab, ratelimit.DialectAnthropic:
		return true
	}
	return false
}

// anchorSlack is the least rounding in a reset bound that guessAnchored
// takes for a whole second's rounding up, and anchorMargin what it adds to
// the guessed end of a window.
const (
	anchorSlack  = 500 * time.Millisecond
	anchorMargin = 5 * time.Millisecond
)

// nextReset returns the first reset after now of a window whose last reset
// was p.ResetAt, or zero when the period is unknown.
func (p *Policy) nextReset(now time.Time) time.Time {
	period := p.Period
	if period <= 0 {
		period = p.Window
	}
	if period <= 0 {
		return time.Time{}
	}
	next := p.ResetAt.Add(period)
	if !next.After(now) {
		n := now.Sub(p.ResetAt)/period + 1
		next = p.ResetAt.Add(n * period)
	}
	return next
}

// hold reports whether a request costing cost (in p's unit) may go at now,
// and if not, until when it waits.
func (p *Policy) hold(s *State, now time.Time, cost int64) (d Decision, ok, probe bool) {
	avail := p.available(s, now)
	need := float64(max(cost, 1))
	if p.Unit != ratelimit.UnitRequests && cost == 0 {
		need = 1 // an unknown cost waits only for an exhausted quota
	}
	if avail >= need {
		return Decision{}, true, false
	}
	if p.probeOK(s, now) {
		return Decision{}, true, true
	}
	d = Decision{Definite: true, Why: WhyQuota, Detail: p.describe(s, now)}
	switch {
	case !p.Rolled.IsZero() && !p.Settled && p.ResetAt.IsZero() && p.probing(s):
		// The request that went first after the reset is out: its answer
		// says what the reset brought back.
		d.Why, d.Definite, d.At = WhyProbe, false, now.Add(pollStep)
	case p.Model == ModelRefill && p.Refill > 0:
		d.Why = WhyRefill
		// Including what others spending the quota keep back (see
		// available, which keeps it back only of a quota with room), so
		// that the request goes when it is asked again.
		short := need - avail
		if avail <= 0 {
			short += p.keptBack(s)
		}
		d.At = maxTime(after(now, short/p.rate()), now)
		if !p.ResetAt.IsZero() && p.ResetAt.Before(d.At) {
			// The server said the quota returns, at least in part, at
			// its reset: look again then (which also bounds the wait).
			d.At, d.Why = p.ResetAt, WhyQuota
		}
	case !p.ResetAt.IsZero():
		d.At = p.ResetAt
	default:
		// Nothing says when it returns (no reset, no rate yet): once a
		// unit could have returned, one request goes to find out (see
		// available); an answer in flight may tell sooner.
		d.At = maxTime(p.BaseAt.Add(p.guessStep()), now)
		d.Definite = !p.probing(s)
		if d.Definite {
			d.Why = WhyProbe
			d.Detail = p.describe(s, now) + "; nothing says when it returns"
		}
	}
	// Bounded like a pause: absurd numbers (a remaining of minus a
	// billion, a window of a century) must not hold a key for years.
	d.At = minTime(d.At, now.Add(DefaultMaxPause))
	return d, false, false
}

// probing reports whether a request granted since p's base answer is in
// flight: its answer will say more.
func (p *Policy) probing(s *State) bool {
	for i := range s.Leases {
		if s.Leases[i].Bucket == p.Bucket && s.Leases[i].spentAt(p.Unit) > p.BaseSpent {
			return true
		}
	}
	return false
}

// guessStep is how long to wait for a unit of a quota that says nothing
// about its reset: the time one unit takes at Limit per Window, or a second.
func (p *Policy) guessStep() time.Duration {
	if p.Limit > 0 && p.Window > 0 {
		return min(max(p.Window/time.Duration(p.Limit), 10*time.Millisecond), time.Minute)
	}
	return time.Second
}

// describe says what the quota holds, for the reason of a wait.
func (p *Policy) describe(s *State, now time.Time) string {
	name := p.Name
	if name == "" {
		name = string(p.Unit)
	}
	avail := max(p.available(s, now), 0)
	var limit string
	if p.Limit > 0 {
		limit = fmt.Sprintf(" of %d", p.Limit)
	}
	var per string
	if p.Window > 0 {
		per = fmt.Sprintf(" per %v", p.Window)
	}
	switch {
	case p.Model == ModelRefill && p.Refill > 0:
		return fmt.Sprintf("%q %d%s %s left%s, refilling %.3g/s", name, int64(avail), limit, p.Unit, per, p.Refill)
	case !p.ResetAt.IsZero():
		return fmt.Sprintf("%q %d%s %s left%s, resets in %v", name, int64(avail), limit, p.Unit, per, p.ResetAt.Sub(now).Round(time.Millisecond))
	default:
		return fmt.Sprintf("%q %d%s %s left%s", name, int64(avail), limit, p.Unit, per)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// observe takes in what a response to lease l, granted at l.At and answered
// at now, says of p's quota (o), its reset bound being resetAt (zero when
// unknown) and the response's Date date (zero when none).
func (p *Policy) observe(s *State, now time.Time, l *Lease, o *ratelimit.Policy, resetAt, date time.Time, refused bool) {
	if o.HasLimit {
		p.Limit = o.Limit
	}
	if o.Window > 0 {
		p.Window = o.Window
	}
	if l.At.Before(p.Rolled) {
		// Granted before the last reset: the answer may describe the
		// window before it, and says nothing reliable about this one.
		return
	}
	if !o.HasRemaining {
		if !resetAt.IsZero() && (p.ResetAt.IsZero() || resetAt.Before(p.ResetAt)) {
			p.ResetAt = resetAt
		}
		return
	}
	// What the answer says is left now: what it counted, less what is
	// still in flight (the server may not have counted those yet).
	inflight := s.inFlightIn(p.Bucket, p.Unit)
	cand := o.Remaining - inflight
	cur := p.available(s, now)
	fresh := p.BaseAt.IsZero() // nothing known yet
	// A refusal right after a reset says the reset came too early, not
	// what it brought back: the next reset (the pause's end) will tell.
	newWindow := !p.Rolled.IsZero() && !p.Settled && !refused
	adopt := true
	switch {
	case fresh:
		p.Model = ModelUnknown
	case newWindow:
		// The first answer from after a reset: it says what the reset
		// brought back.
		p.Guessed = false // confirmed, if it was a guess
		p.learnReset(s, o.Remaining)
		p.Settled = true
		defer p.guessAnchored(s, l, o, date)
	case l.At.After(p.BaseAt) || l.At.Equal(p.BaseAt) && l.spentAt(p.Unit) > p.BaseSpent:
		// Sent after the base answer arrived: the server counted it after
		// the base, so it is newer. (At the very instant, as on a coarse
		// clock, only if it was granted after the base was taken in.)
	case o.Remaining < p.BaseR:
		// Sent before the base answer arrived, and counted after it (it
		// found less left): newer too. (Answers to requests in flight
		// together arrive in any order; the least remaining is the last
		// counted.)
	default:
		// Counted before the base (an older, larger count, such as a late
		// answer carries): nothing new, except that the base, which
		// counted it as in flight, counted it twice. Sharpen the reset.
		adopt = false
		if l.spentAt(p.Unit) <= p.BaseSpent {
			p.Remaining += costIn(l.Cost, p.Unit)
		}
		if !resetAt.IsZero() && (p.ResetAt.IsZero() || resetAt.Before(p.ResetAt)) {
			p.ResetAt = resetAt
		}
	}
	// Answers about one window's reset agree to within their precision:
	// whole seconds, or the time the answers took.
	slack := 2*s.RTT + 10*time.Millisecond
	if o.Reset%time.Second == 0 {
		slack += time.Second
	}
	if adopt && p.Model == ModelWindow && !resetAt.IsZero() && !p.ResetAt.IsZero() &&
		resetAt.After(p.ResetAt.Add(slack)) {
		// A newer answer puts the reset well after the window's: the
		// quota is not a window after all (a bucket whose reset is the
		// time until full, say). Its reset stands, and what it brings is
		// to be learnt again.
		p.Model, p.ResetAt, p.Period = ModelUnknown, resetAt, 0
	}
	if adopt {
		if !fresh && !newWindow && !l.At.Before(p.BaseAt) {
			// Beyond what ours in flight may blur, what ours do not explain is others..
			p.learnForeign(cur-float64(cand)-float64(inflight), now)
		}
		p.Remaining, p.BaseR, p.BaseSpent, p.BaseAt = cand, o.Remaining, s.spentIn(p.Bucket, p.Unit), now
		if !resetAt.IsZero() && (p.ResetAt.IsZero() || resetAt.Before(p.ResetAt) || !p.ResetAt.After(now) || newWindow || p.Model == ModelUnknown && p.Settled) {
			p.ResetAt = resetAt
		}
	}
	if p.Model != ModelWindow {
		full := p.Limit > 0 && o.Remaining >= p.Limit-1
		// Requests in flight blur the level by their number: measure only
		// from answers with few in flight (as when pacing to the rate).
		if adopt && inflight <= maxBlur && !refused {
			p.sampleRefill(l, float64(cand+s.spentIn(p.Bucket, p.Unit)), full, now)
		}
	}
}

// rate is the refill rate paced to: the measured one, less a margin for
// the measure's noise (a rate measured a little high would earn a 429 now
// and then).
func (p *Policy) rate() float64 { return refillSafety * p.Refill }

// refillSafety is the share of a measured refill rate that is spent.
const refillSafety = 0.97

// maxBlur is the most units in flight with which an answer is used to
// measure a refill rate.
const maxBlur = 2

// minRefillSpan is the least time over which a refill rate is measured: over
// less, the counts' granularity swamps it.
const minRefillSpan = 250 * time.Millisecond

// sampleRefill measures the refill rate from level, the quota's cumulative
// level at the answer to l (what is left, plus everything ever granted: it
// grows only as the quota returns), against an earlier answer's: the anchor.
// A quota that is full does not refill, so it restarts the measure.
func (p *Policy) sampleRefill(l *Lease, level float64, full bool, now time.Time) {
	switch {
	case full:
		p.AnchorAt = time.Time{}
		return
	case p.AnchorAt.IsZero():
		p.AnchorAt, p.AnchorLevel = now, level
		return
	case l.At.Before(p.AnchorAt):
		return // processed before the anchor, maybe: not comparable
	}
	dt := now.Sub(p.AnchorAt)
	if dt < minRefillSpan {
		return
	}
	rate := max(level-p.AnchorLevel, 0) / seconds(dt)
	p.AnchorAt, p.AnchorLevel = now, level
	if p.Refill > 0 {
		rate = (p.Refill + rate) / 2
	}
	if limit := p.maxRefill(); rate > limit {
		rate = limit
	}
	if p.RefillCap > 0 && rate > p.RefillCap {
		rate = p.RefillCap
	}
	p.Refill = rate
	switch {
	case rate >= p.minRefill():
		p.Model = ModelRefill
	case p.Model == ModelRefill:
		p.Model = ModelUnknown
	}
}

// refuted takes in a refusal of a request granted while p was paced to its
// refill rate: the rate is too high. It is cut, to at most the quota's
// average rate (its limit per window) and a tenth below the rate that was
// refused, and no later measure raises it above that (for as long as the
// key's state lives). The quota is paced by its resets again until
// answers measure the refill anew: a sliding log, whose returns come a
// window after its spending, looks like a refill when measured over a
// short span, and is not one.
func (p *Policy) refuted(now time.Time) {
	rate := p.Refill
	if p.Limit > 0 && p.Window > 0 {
		rate = min(rate, float64(p.Limit)/seconds(p.Window))
	}
	rate = max(0.9*rate, p.minRefill())
	p.Refill, p.RefillCap, p.RefutedAt = rate, rate, now
	p.Model = ModelUnknown
	p.AnchorAt = time.Time{} // measure again from the next answer
}

// maxRefill bounds a measured rate: twice the quota's average rate.
func (p *Policy) maxRefill() float64 {
	if p.Limit > 0 && p.Window > 0 {
		return 2 * float64(p.Limit) / seconds(p.Window)
	}
	return math.Inf(1)
}

// learnReset infers the model from the first answer after a reset: its
// remaining, out of a window in which the server may have served, at most,
// every request granted since the roll.
func (p *Policy) learnReset(s *State, remaining int64) {
	ours := s.spentIn(p.Bucket, p.Unit) - p.BaseSpent + s.inFlightBefore(p)
	if p.Limit > 0 && remaining+ours >= p.Limit-1 && !p.NoWindow {
		p.Model = ModelWindow
		if p.Window > 0 {
			p.Period = p.Window
		}
		if !p.RolledDate.IsZero() {
			p.DateTrusted, p.Misses = true, 0
		}
		return
	}
	// Only part of the quota came back: it refills, at a rate the next
	// answers measure; until then, its average when known.
	if p.Refill <= 0 && p.Limit > 0 && p.Window > 0 {
		p.Refill = float64(p.Limit) / seconds(p.Window)
	}
	if p.Refill > 0 {
		p.Model = ModelRefill
	} else {
		p.Model = ModelUnknown
	}
}

// learnForeign takes in that an answer, newer than the base, found drop
// units fewer than inferred: others (another process, another client with
// the same quota) spent them since the base answer.
func (p *Policy) learnForeign(drop float64, now time.Time) {
	dt := seconds(now.Sub(p.BaseAt))
	if dt <= 0 {
		return
	}
	sample := max(drop, 0) / max(dt, 0.05)
	if limit := p.maxRefill(); sample > limit {
		sample = limit
	}
	p.Foreign = 0.7*p.Foreign + 0.3*sample
	if p.Foreign < 0.01 {
		p.Foreign = 0
	}
}

// minRefill is the least rate taken for a refill: a twentieth of the
// quota's average rate, or a unit a minute when that is unknown.
func (p *Policy) minRefill() float64 {
	if p.Limit > 0 && p.Window > 0 {
		return float64(p.Limit) / seconds(p.Window) / 20
	}
	return 1.0 / 60
}

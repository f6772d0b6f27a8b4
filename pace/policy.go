package pace

import (
	"fmt"
	"math"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// used returns the cost in p's unit granted since the base response.
func (p *Policy) used(s *State) int64 { return s.spent(p.Unit) - p.BaseSpent }

// capacity returns the most the quota can hold, +Inf when unknown.
func (p *Policy) capacity() float64 {
	if p.Limit > 0 {
		return float64(p.Limit)
	}
	return math.Inf(1)
}

// available returns what is left at now, by the inferred model.
func (p *Policy) available(s *State, now time.Time) float64 {
	base := float64(p.Remaining)
	if p.Model == ModelRefill && p.Refill > 0 && now.After(p.BaseAt) {
		base = min(p.capacity(), base+p.Refill*seconds(now.Sub(p.BaseAt)))
	}
	return base - float64(p.used(s))
}

// roll applies a reset that now has reached: a window's quota returns
// whole; a quota whose behaviour at its reset is unknown lets one request
// go first, whose answer tells.
func (p *Policy) roll(s *State, now time.Time) {
	if p.ResetAt.IsZero() || now.Before(p.ResetAt) {
		return
	}
	switch p.Model {
	case ModelWindow:
		if p.Limit <= 0 {
			p.Model = ModelUnknown
			p.roll(s, now)
			return
		}
		// Requests still in flight may be counted in the new window.
		p.Remaining = p.Limit
		p.BaseSpent = s.spent(p.Unit) - s.inFlight(p.Unit)
		p.BaseAt = p.ResetAt
		p.Rolled = p.ResetAt
		p.Settled = false
		p.ResetAt = p.nextReset(now)
	case ModelRefill:
		// The refill rate governs; the reset adds nothing it does not say.
		p.ResetAt = time.Time{}
	default:
		p.Remaining = 1
		p.BaseSpent = s.spent(p.Unit)
		p.BaseAt = p.ResetAt
		p.Rolled = p.ResetAt
		p.Settled = false
		p.ResetAt = time.Time{}
	}
}

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
func (p *Policy) hold(s *State, now time.Time, cost int64) (Decision, bool) {
	avail := p.available(s, now)
	need := float64(max(cost, 1))
	if p.Unit != ratelimit.UnitRequests && cost == 0 {
		need = 1 // an unknown cost waits only for an exhausted quota
	}
	if avail >= need {
		return Decision{}, true
	}
	d := Decision{Definite: true, Why: WhyQuota, Detail: p.describe(s, now)}
	switch {
	case p.Model == ModelRefill && p.Refill > 0:
		d.Why = WhyRefill
		d.At = after(p.BaseAt, (need+float64(p.used(s))-float64(p.Remaining))/p.Refill)
		d.At = maxTime(d.At, now)
	case !p.ResetAt.IsZero():
		d.At = p.ResetAt
	default:
		// Nothing says when it returns: ask again once a unit could
		// have returned, or when an answer in flight says more.
		d.Definite = false
		d.At = now.Add(p.guessStep())
		for i := range s.Leases {
			if s.Leases[i].At.After(p.BaseAt) || s.Leases[i].Seq > uint64(p.BaseSpent) {
				d.At = minTime(d.At, s.Leases[i].Expires)
				break
			}
		}
		if s.probeLease() == nil && p.Remaining <= 0 && len(s.Leases) == 0 {
			// Nothing in flight will tell: probe once the guess is up.
			d.Definite = true
		}
	}
	return d, false
}

// guessStep is how long to wait for a unit of a quota that says nothing
// about its reset: the time one unit takes at Limit per Window, or a second.
func (p *Policy) guessStep() time.Duration {
	if p.Limit > 0 && p.Window > 0 {
		return max(p.Window/time.Duration(p.Limit), 10*time.Millisecond)
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
// unknown).
func (p *Policy) observe(s *State, now time.Time, l *Lease, o *ratelimit.Policy, resetAt time.Time) {
	if o.HasLimit {
		p.Limit = o.Limit
	}
	if o.Window > 0 {
		p.Window = o.Window
	}
	if !o.HasRemaining {
		if !resetAt.IsZero() && (p.ResetAt.IsZero() || resetAt.Before(p.ResetAt)) && !l.At.Before(p.Rolled) {
			p.ResetAt = resetAt
		}
		return
	}
	spentAt := l.spentAt(p.Unit)
	cand := float64(o.Remaining) - float64(s.spent(p.Unit)-spentAt)
	fresh := p.BaseAt.IsZero() // nothing known yet
	newWindow := !p.Rolled.IsZero() && !l.At.Before(p.Rolled) && !p.Settled
	cur := p.available(s, now)
	switch {
	case fresh:
		p.adopt(s, l, o, now, resetAt)
		p.Model = ModelUnknown
	case newWindow:
		// The first answer from after a reset: it says what the reset
		// brought back.
		p.learnReset(s, l, o, now)
		p.adopt(s, l, o, now, resetAt)
		p.Settled = true
	case cand < cur-0.5:
		// Tighter than what was inferred: take it. If the quota was
		// thought to refill, it refills less than that.
		if p.Model == ModelRefill {
			p.learnRefill(s, l, o, now)
		}
		p.adopt(s, l, o, now, resetAt)
	case cand > cur+0.5 && !l.At.Before(p.BaseAt):
		// More than inferred, from a request sent after the base answer
		// arrived: the quota returned some. (A late answer to a request
		// sent earlier may carry an older, larger count; it is ignored.)
		if p.Model != ModelWindow || p.ResetAt.IsZero() || l.At.Before(p.ResetAt) {
			p.learnRefill(s, l, o, now)
		}
		p.adopt(s, l, o, now, resetAt)
	default:
		// Agrees with what was inferred: keep the base, sharpen the reset.
		if !resetAt.IsZero() && (p.ResetAt.IsZero() || resetAt.Before(p.ResetAt)) {
			p.ResetAt = resetAt
		}
	}
}

// adopt makes the answer to l the base of p.
func (p *Policy) adopt(s *State, l *Lease, o *ratelimit.Policy, now, resetAt time.Time) {
	p.Remaining = o.Remaining
	p.BaseSpent = l.spentAt(p.Unit)
	p.BaseAt = now
	if !resetAt.IsZero() {
		if p.ResetAt.IsZero() || resetAt.Before(p.ResetAt) || !p.ResetAt.After(now) || p.Model == ModelUnknown && p.Settled {
			p.ResetAt = resetAt
		}
	}
}

// learnReset infers the model from the first answer after a reset.
func (p *Policy) learnReset(s *State, l *Lease, o *ratelimit.Policy, now time.Time) {
	// How many units the new window has served by this answer, ours
	// among them: those granted since the roll, up to this lease.
	ours := float64(l.spentAt(p.Unit) - p.BaseSpent + 1)
	if p.Limit > 0 && float64(o.Remaining)+ours >= float64(p.Limit)-0.5 {
		p.Model = ModelWindow
		if prev := p.Rolled; !prev.IsZero() && p.Window > 0 {
			p.Period = p.Window
		}
		return
	}
	// Only part of the quota came back: it refills.
	p.learnRefill(s, l, o, now)
}

// learnRefill measures the refill rate between the base answer and the
// answer to l: what came back, over the longest the interval can be.
func (p *Policy) learnRefill(s *State, l *Lease, o *ratelimit.Policy, now time.Time) {
	dt := seconds(now.Sub(p.BaseAt))
	if dt <= 0 {
		return
	}
	used := float64(l.spentAt(p.Unit) - p.BaseSpent)
	gained := float64(o.Remaining) + used - float64(p.Remaining)
	rate := max(gained, 0) / dt
	if p.Limit > 0 && p.Window > 0 {
		rate = min(rate, 2*float64(p.Limit)/seconds(p.Window))
	}
	if rate <= 0 {
		if p.Model == ModelRefill {
			p.Refill /= 2
		}
		return
	}
	p.Model = ModelRefill
	p.Refill = rate
}

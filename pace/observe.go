package pace

import (
	"net/http"
	"slices"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// Answer is what came back for a lease.
type Answer struct {
	// Obs is what the response's headers said (ratelimit.ParseHeaders);
	// its Status is 0 when the request failed without a response.
	Obs ratelimit.Observation
	// Date is the response's Date header, zero when it had none.
	Date time.Time
}

// Complete takes in the answer to lease l, received at now: the lease
// stops counting as in flight, and what the server said updates the key.
// A lease that has expired meanwhile is completed all the same.
func (s *State) Complete(now time.Time, l Lease, a Answer, cfg *Config) {
	s.remove(l.Seq)
	obs := &a.Obs
	if obs.Status == 0 {
		// No response: nothing was learnt. A request that went first
		// and failed lets another go first.
		s.touch(now, cfg)
		return
	}
	s.Answered = true
	s.Clock.observe(l.At, now, a.Date)
	if rtt := now.Sub(l.At); rtt > 0 {
		if s.RTT == 0 {
			s.RTT = rtt
		} else {
			s.RTT = (7*s.RTT + rtt) / 8
		}
	}

	bucket := l.Bucket
	if len(obs.Policies) > 0 {
		bucket = BucketOf(&obs.Policies[0])
		s.learnRoute(l.Route, bucket)
	}
	for i := range obs.Policies {
		o := &obs.Policies[i]
		p := s.policy(BucketOf(o), o)
		p.roll(s, now)
		l := l
		if l.Bucket != p.Bucket {
			// Counted in another bucket than expected (a route seen for
			// the first time): take it as the bucket's latest grant.
			l.Bucket, l.Spent = p.Bucket, s.spentAll(p.Bucket)
		}
		p.observe(s, now, &l, o, s.resetBound(p, o, l.At, now, a.Date, cfg.maxPause(), obs.Status == http.StatusTooManyRequests), a.Date, obs.Status == http.StatusTooManyRequests)
	}
	if !s.ProbeAfter.IsZero() && !l.At.Before(s.ProbeAfter) {
		s.ProbeAfter = time.Time{}
	}

	refused := obs.Status == http.StatusTooManyRequests
	if refused || obs.Status == http.StatusServiceUnavailable && obs.HasRetryAfter {
		s.refused(now, &l, obs, bucket, refused, cfg)
	} else {
		s.Adaptive.accepted(now)
	}
	s.touch(now, cfg)
}

// refused takes in a 429 (or a 503 with Retry-After): the key pauses until
// the server's Retry-After, or the reset of the quota that ran out; with
// neither, a 429 slows the adaptive rate.
func (s *State) refused(now time.Time, l *Lease, obs *ratelimit.Observation, bucket string, throttled bool, cfg *Config) {
	var pause time.Duration
	why := "Retry-After"
	maxPause := cfg.maxPause()
	if obs.HasRetryAfter && obs.RetryAfter > 0 {
		pause = obs.RetryAfter
	} else {
		for i := range obs.Policies {
			o := &obs.Policies[i]
			if o.HasReset && (o.Exhausted() || !o.HasRemaining) && min(o.Reset, maxPause) > pause {
				pause, why = min(o.Reset, maxPause), "reset of "+policyName(o)
			}
		}
	}
	var hadRoom []int // policies that had room when the server refused
	if throttled {
		// The server refused although the model said there was room:
		// every quota of the bucket is spent as of this answer, and what
		// its next reset brings back is to be learnt again.
		for i := range s.Policies {
			p := &s.Policies[i]
			if p.Bucket != bucket || p.Unit != ratelimit.UnitRequests {
				continue
			}
			p.missed(s, l)
			if p.Model == ModelWindow && !p.Rolled.IsZero() && !l.At.Before(p.Rolled) && l.At.Sub(p.Rolled) <= max(2*s.RTT, 50*time.Millisecond) {
				// The quota a reset restored whole was refused at once:
				// not a window (a sliding one, say).
				p.NoWindow, p.Model = true, ModelUnknown
			}
			if p.Guessed && !l.At.Before(p.Rolled) {
				// The window's end was guessed too early.
				p.Guessed, p.GuessRefuted = false, true
			}
			if p.Model == ModelRefill && p.Refill > 0 && l.At.After(p.RefutedAt) {
				// Granted at the rate (and after the last cut): the
				// rate is too high.
				p.refuted(now)
			}
			if p.available(s, now) >= 1 {
				p.Remaining, p.BaseSpent, p.BaseAt = 0, l.spentAt(p.Unit), now
				if p.Model == ModelWindow {
					p.Model = ModelUnknown
				}
				hadRoom = append(hadRoom, i)
			}
		}
		if len(obs.Policies) == 0 && len(s.Policies) == 0 {
			// Nothing says how much is allowed: learn the rate from the
			// refusals (and still honour a Retry-After).
			var ra time.Duration
			if obs.HasRetryAfter {
				ra = obs.RetryAfter
			}
			s.Adaptive.throttle(now, l.At, ra)
			if pause <= 0 {
				pause, why = s.Adaptive.backOff(now, l.At), "429 without rate-limit headers"
			}
		}
	}
	if pause <= 0 {
		return
	}
	until := now.Add(min(pause, cfg.maxPause()))
	if until.After(s.PauseUntil) {
		s.PauseUntil, s.PauseWhy = until, why
		s.ProbeAfter = until
	}
	if throttled {
		// The quotas return, at the earliest, when the pause ends: that is
		// their reset, and the first answer after it says what came back.
		// A quota that still had room (a server's other limit refused,
		// such as GitHub's secondary limits) returns then too.
		// A quota the server's Retry-After says returns sooner than its
		// reset does (a reset that counts to the end of a sliding window,
		// or that misleads) returns then too, in part: one request goes
		// first when the pause ends, and its answer tells.
		for i := range s.Policies {
			p := &s.Policies[i]
			if p.Bucket != bucket || p.Unit != ratelimit.UnitRequests {
				continue
			}
			switch {
			case p.ResetAt.IsZero() || p.ResetAt.Before(until) || slices.Contains(hadRoom, i):
				p.ResetAt = until
			case why == "Retry-After" && p.ResetAt.After(until):
				p.ResetAt = until
				if p.Model == ModelWindow {
					p.Model = ModelUnknown
				}
			}
		}
	}
}

func policyName(o *ratelimit.Policy) string {
	if o.Name != "" {
		return `"` + o.Name + `"`
	}
	return string(o.Unit) + " quota"
}

// Cancel takes back lease l, whose request never left: it stops counting
// against every quota.
func (s *State) Cancel(l Lease, cfg *Config) {
	if !s.remove(l.Seq) {
		return
	}
	for i := range s.Policies {
		p := &s.Policies[i]
		switch {
		case p.Bucket != l.Bucket:
		case l.spentAt(p.Unit) > p.BaseSpent:
			p.BaseSpent += costIn(l.Cost, p.Unit)
		default:
			// The base counted it as in flight: give it back there.
			p.Remaining += costIn(l.Cost, p.Unit)
		}
	}
	s.Adaptive.refund()
	for _, qi := range l.Quotas {
		if qi >= 0 && qi < len(s.Quotas) && qi < len(cfgQuotas(cfg)) {
			s.Quotas[qi].refund(l.At, cfg.Quotas[qi])
		}
	}
}

// remove drops the lease numbered seq, reporting whether it was there.
func (s *State) remove(seq uint64) bool {
	n := len(s.Leases)
	s.Leases = slices.DeleteFunc(s.Leases, func(l Lease) bool { return l.Seq == seq })
	return len(s.Leases) != n
}

// BucketOf returns the server-named bucket a policy belongs to: its
// partition (an IETF pk, Discord's bucket), or the resource that GitHub and
// Bitbucket name it after; "" for the key's own.
func BucketOf(o *ratelimit.Policy) string {
	switch {
	case o.Partition != "":
		return o.Partition
	case o.Dialect == ratelimit.DialectGitHub || o.Dialect == ratelimit.DialectBitbucket:
		return o.Name
	}
	return ""
}

// policy returns the key's policy that o describes, adding it if new.
func (s *State) policy(bucket string, o *ratelimit.Policy) *Policy {
	unit := o.Unit
	if unit == "" {
		unit = ratelimit.UnitRequests
	}
	for i := range s.Policies {
		p := &s.Policies[i]
		if p.Bucket == bucket && p.Name == o.Name && p.Unit == unit && (p.Window == o.Window || o.Window == 0 || p.Window == 0) {
			return p
		}
	}
	s.Policies = append(s.Policies, Policy{Bucket: bucket, Name: o.Name, Unit: unit})
	return &s.Policies[len(s.Policies)-1]
}

// resetBound returns the latest instant at which o's quota returns: the
// answer's arrival plus its reset. For a server whose windows are aligned
// to its clock's seconds (most are: a window is the current time truncated
// to its length), the reset is exactly the server's Date plus the reset, in
// the server's time; with the clocks' offset that is much sharper, so it is
// used while it has not proved wrong (see missed).
func (s *State) resetBound(p *Policy, o *ratelimit.Policy, sent, recv, date time.Time, maxPause time.Duration, refused bool) time.Time {
	if !o.HasReset {
		return time.Time{}
	}
	reset := o.Reset
	if reset < time.Second && reset%time.Second == 0 {
		// A reset of 0 in whole seconds (an epoch second equal to the
		// Date's, a reset already past): within the second, not now.
		// Taken as now, every answer would restore the quota again.
		if refused && p.LateReset.After(recv) && p.LateReset.Before(recv.Add(time.Second)) {
			// Refused: the window has not rolled, and an earlier
			// answer's bound (its arrival plus its reset) says when
			// within the second it does (a server that rounds its reset
			// down, or whose windows are not on its clock's seconds).
			return p.LateReset
		}
		reset = time.Second
	}
	late := recv.Add(min(reset, maxPause))
	if o.Reset > 0 && (!p.LateReset.After(recv) || late.Before(p.LateReset)) {
		p.LateReset = late
	}
	p.DateReset = time.Time{}
	if date.IsZero() || !s.Clock.Known || p.Unaligned || s.Clock.Lo >= s.Clock.Hi || o.Reset%time.Second != 0 || p.Model == ModelRefill {
		// A reset finer than whole seconds is its own precision; and only
		// a quota seen to return whole at its reset has windows to align.
		return late
	}
	// Clocks are usually in sync: take no offset unless the bounds say
	// otherwise, plus a little, so as to land after the instant.
	off := min(max(0, s.Clock.Lo), s.Clock.Hi) + dateMargin
	server := date.Add(o.Reset)
	if t := server.Add(off); t.Before(late) && t.After(sent) {
		p.DateReset = server
		return t
	}
	return late
}

// dateMargin is added to a reset derived from the server's Date.
const dateMargin = 2 * time.Millisecond

// missed takes in that the answer to l, granted after p's last reset,
// shows the quota had not returned (a refusal): if that reset was derived
// from the server's Date, the server's windows are not aligned to its
// clock's seconds after all (a sliding log, or windows that start at a
// client's first request), and its Date is no longer used for p.
func (p *Policy) missed(s *State, l *Lease) {
	if p.RolledDate.IsZero() || l.At.Before(p.Rolled) {
		return
	}
	p.Misses++
	p.DateTrusted = false
	p.Unaligned = true
}

// observe narrows the offset bounds with one answer: the server wrote its
// Date (whole seconds) between the request's sending and the answer's
// arrival.
func (c *Offset) observe(sent, recv, date time.Time) {
	if date.IsZero() || recv.Before(sent) {
		return
	}
	lo, hi := sent.Sub(date)-time.Second, recv.Sub(date)
	if !c.Known || lo > c.Hi || hi <= c.Lo {
		// First, or inconsistent (another server, a clock step): restart.
		c.Lo, c.Hi, c.Known = lo, hi, true
		return
	}
	c.Lo, c.Hi = max(c.Lo, lo), min(c.Hi, hi)
}

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

	bucket := l.Bucket
	if len(obs.Policies) > 0 {
		bucket = BucketOf(&obs.Policies[0])
		s.learnRoute(l.Route, bucket)
	}
	for i := range obs.Policies {
		o := &obs.Policies[i]
		p := s.policy(BucketOf(o), o)
		p.observe(s, now, &l, o, s.resetBound(p, o, l.At, now, a.Date))
	}
	if !s.ProbeAfter.IsZero() && !l.At.Before(s.ProbeAfter) {
		s.ProbeAfter = time.Time{}
	}

	refused := obs.Status == http.StatusTooManyRequests
	if refused || obs.Status == http.StatusServiceUnavailable && obs.HasRetryAfter {
		s.refused(now, &l, obs, bucket, refused, cfg)
	}
	s.touch(now, cfg)
}

// refused takes in a 429 (or a 503 with Retry-After): the key pauses until
// the server's Retry-After, or the reset of the quota that ran out; with
// neither, a 429 slows the adaptive rate.
func (s *State) refused(now time.Time, l *Lease, obs *ratelimit.Observation, bucket string, throttled bool, cfg *Config) {
	var pause time.Duration
	why := "Retry-After"
	if obs.HasRetryAfter && obs.RetryAfter > 0 {
		pause = obs.RetryAfter
	} else {
		for i := range obs.Policies {
			o := &obs.Policies[i]
			if o.HasReset && (o.Exhausted() || !o.HasRemaining) && o.Reset > pause {
				pause, why = o.Reset, "reset of "+policyName(o)
			}
		}
	}
	if throttled {
		// The server refused although the model said there was room:
		// every quota of the bucket is spent as of this answer, and what
		// its next reset brings back is to be learnt again.
		for i := range s.Policies {
			p := &s.Policies[i]
			if p.Bucket != bucket || p.Unit != ratelimit.UnitRequests {
				continue
			}
			if p.FromDate && !l.At.Before(p.Rolled) {
				p.Unaligned = true
			}
			if p.available(s, now) >= 1 {
				p.Remaining, p.BaseSpent, p.BaseAt = 0, l.spentAt(p.Unit), now
				if p.Model == ModelWindow && !p.ResetAt.IsZero() {
					p.Model = ModelUnknown
				}
			}
		}
		if pause <= 0 && len(obs.Policies) == 0 {
			s.Adaptive.throttle(now)
			return
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
}

func policyName(o *ratelimit.Policy) string {
	if o.Name != "" {
		return `"` + o.Name + `"`
	}
	return string(o.Unit) + " quota"
}

// Cancel takes back lease l, whose request never left: it stops counting
// against every quota.
func (s *State) Cancel(l Lease) {
	if !s.remove(l.Seq) {
		return
	}
	for i := range s.Policies {
		p := &s.Policies[i]
		if l.spentAt(p.Unit) > p.BaseSpent {
			p.BaseSpent += costIn(l.Cost, p.Unit)
		}
	}
	s.Adaptive.refund()
	for _, qi := range l.Quotas {
		if qi >= 0 && qi < len(s.Quotas) {
			s.Quotas[qi].refund(l.At)
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
// answer's arrival plus its reset, or, for a server whose windows are
// aligned to its clock's seconds, its Date plus the reset in the client's
// time, when that is sooner.
func (s *State) resetBound(p *Policy, o *ratelimit.Policy, sent, recv, date time.Time) time.Time {
	if !o.HasReset {
		return time.Time{}
	}
	late := recv.Add(o.Reset)
	p.FromDate = false
	if !date.IsZero() && s.Clock.Known && !p.Unaligned {
		if t := date.Add(o.Reset + s.Clock.Hi); t.Before(late) && t.After(sent) {
			p.FromDate = true
			return t
		}
	}
	return late
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

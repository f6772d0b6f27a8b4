package pace

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// Config is what the decisions depend on besides a key's State.
type Config struct {
	// Quotas are the limits declared by the user, known before any header
	// arrives; Request.Quotas says which apply to a request.
	Quotas []Quota
	// LeaseTTL is how long a lease counts as in flight if it is neither
	// completed nor cancelled (default DefaultLeaseTTL).
	LeaseTTL time.Duration
	// MaxPause bounds a pause recorded from one response (default
	// DefaultMaxPause), so that a misread value cannot block a key for
	// years.
	MaxPause time.Duration
	// IdleTTL is how long a key's state is kept once nothing it holds
	// matters any more (default DefaultIdleTTL).
	IdleTTL time.Duration
}

// minStep is the least time a request that must wait is asked to wait, and
// pollStep the most a request waiting for an answer waits before it asks
// again.
const (
	minStep  = time.Millisecond
	pollStep = 25 * time.Millisecond
)

// Defaults of Config.
const (
	DefaultLeaseTTL = time.Minute
	DefaultMaxPause = 24 * time.Hour
	DefaultIdleTTL  = 10 * time.Minute
)

func (c *Config) leaseTTL() time.Duration {
	if c == nil || c.LeaseTTL <= 0 {
		return DefaultLeaseTTL
	}
	return c.LeaseTTL
}

func (c *Config) maxPause() time.Duration {
	if c == nil || c.MaxPause <= 0 {
		return DefaultMaxPause
	}
	return c.MaxPause
}

func (c *Config) idleTTL() time.Duration {
	if c == nil || c.IdleTTL <= 0 {
		return DefaultIdleTTL
	}
	return c.IdleTTL
}

// Request describes a request about to be sent.
type Request struct {
	// Route identifies what the request asks for ("GET /repos/x/issues"),
	// so that the server-named bucket it is counted in can be remembered.
	Route string
	// Quotas are the indexes in Config.Quotas of the declared quotas that
	// apply.
	Quotas []int
	// Cost is what the request costs in units other than requests (a
	// request always costs one request), such as tokens.
	Cost []Amount
}

// Why says why a request must wait.
type Why uint8

// The reasons to wait.
const (
	// WhyPaused: the server asked for a pause (Retry-After, or a refusal
	// with the reset of an exhausted quota).
	WhyPaused Why = iota + 1
	// WhyFirstAnswer: the key has never answered; its first request went
	// alone and the rest wait for what it says.
	WhyFirstAnswer
	// WhyProbe: after a pause or a reset, one request went first and the
	// rest wait for what it says.
	WhyProbe
	// WhyQuota: a quota the server announced has nothing left until it
	// resets.
	WhyQuota
	// WhyRefill: a refilling quota is spent; the next unit returns at the
	// refill rate.
	WhyRefill
	// WhyAdaptive: the server sends no rate-limit headers and refused
	// requests; the rate learnt from its 429s spaces them.
	WhyAdaptive
	// WhyDeclared: a quota declared by the user has nothing left.
	WhyDeclared
)

// String describes the reason in a few words.
func (w Why) String() string {
	switch w {
	case WhyPaused:
		return "paused by the server"
	case WhyFirstAnswer:
		return "waiting for the key's first answer"
	case WhyProbe:
		return "waiting for the answer of the request that went first"
	case WhyQuota:
		return "quota exhausted until its reset"
	case WhyRefill:
		return "pacing to the quota's refill rate"
	case WhyAdaptive:
		return "pacing to the rate learnt from 429s"
	case WhyDeclared:
		return "declared quota exhausted"
	default:
		return fmt.Sprintf("Why(%d)", int(w))
	}
}

// Decision is the answer of Reserve.
type Decision struct {
	// OK reports that the request may be sent now; Lease is then its
	// reservation, already recorded in the State.
	OK    bool
	Lease Lease
	// At is, when !OK, when to ask again. When Definite, the request
	// cannot be sent before At (a pause, a reset, a rate); otherwise it
	// waits for an answer and should ask again as soon as the state
	// changes, At being only a bound.
	At       time.Time
	Definite bool
	// Why says why it waits; Detail names the quota or pause.
	Why    Why
	Detail string
}

// Reserve decides whether req may be sent at now. When it may, the lease is
// recorded in s (it counts as in flight) and returned; the caller must
// Complete or Cancel it.
func (s *State) Reserve(now time.Time, req Request, cfg *Config) Decision {
	s.expire(now)
	bucket, known := s.bucketOf(req.Route)
	if !known {
		bucket = s.defaultBucket()
	}
	probe := false
	var wait Decision
	later := func(d Decision) {
		if wait.Why == 0 || d.Definite && (!wait.Definite || d.At.After(wait.At)) {
			wait = d
		}
	}
	switch {
	case now.Before(s.PauseUntil):
		later(Decision{At: s.PauseUntil, Definite: true, Why: WhyPaused, Detail: s.PauseWhy})
	case !s.ProbeAfter.IsZero():
		if l := s.probeLease(); l != nil {
			later(Decision{At: l.Expires, Why: WhyProbe, Detail: s.PauseWhy})
		} else {
			probe = true
		}
	case !s.Answered:
		if len(s.Leases) > 0 {
			later(Decision{At: s.Leases[0].Expires, Why: WhyFirstAnswer})
		} else {
			probe = true
		}
	}
	for i := range s.Policies {
		p := &s.Policies[i]
		if p.Bucket != bucket || p.BaseAt.IsZero() {
			continue // another bucket's, or nothing known of what is left
		}
		p.roll(s, now)
		d, ok, first := p.hold(s, now, costIn(req.Cost, p.Unit))
		if !ok {
			later(d)
		}
		probe = probe || first
	}
	if d, ok := s.Adaptive.hold(now); !ok && len(s.Policies) == 0 {
		later(d)
	}
	for _, qi := range req.Quotas {
		if qi < 0 || qi >= len(cfgQuotas(cfg)) {
			continue
		}
		s.growQuotas(len(cfg.Quotas))
		if d, ok := s.Quotas[qi].hold(now, cfg.Quotas[qi]); !ok {
			later(d)
		}
	}
	if wait.Why != 0 {
		// A rate's arithmetic can land on now itself: ask again a moment
		// later rather than at once, which would spin. A wait for an
		// answer asks again soon: the answer may land in a store this
		// process does not hear from.
		wait.At = maxTime(wait.At, now.Add(minStep))
		if !wait.Definite {
			wait.At = minTime(wait.At, now.Add(pollStep))
		}
		return wait
	}
	return Decision{OK: true, Lease: s.grant(now, req, bucket, probe, cfg)}
}

func cfgQuotas(cfg *Config) []Quota {
	if cfg == nil {
		return nil
	}
	return cfg.Quotas
}

// grant records a lease for req.
func (s *State) grant(now time.Time, req Request, bucket string, probe bool, cfg *Config) Lease {
	s.Seq++
	l := Lease{Seq: s.Seq, At: now, Expires: now.Add(cfg.leaseTTL()), Bucket: bucket, Route: req.Route, Probe: probe}
	for _, c := range req.Cost {
		if c.N > 0 && c.Unit != ratelimit.UnitRequests && c.Unit != "" {
			addAmount(&l.Cost, c.Unit, c.N)
		}
	}
	l.Spent = s.spend(bucket, l.Cost)
	s.Adaptive.sent(now)
	for _, qi := range req.Quotas {
		if qi >= 0 && qi < len(s.Quotas) {
			s.Quotas[qi].sent(now, cfg.Quotas[qi])
			l.Quotas = append(l.Quotas, qi)
		}
	}
	s.Leases = append(s.Leases, l)
	s.touch(now, cfg)
	return l
}

// probeLease returns the lease in flight that went first, if any.
func (s *State) probeLease() *Lease {
	for i := range s.Leases {
		if s.Leases[i].Probe {
			return &s.Leases[i]
		}
	}
	return nil
}

// expire drops the leases whose time is up.
func (s *State) expire(now time.Time) {
	s.Leases = slices.DeleteFunc(s.Leases, func(l Lease) bool { return !now.Before(l.Expires) })
}

// defaultBucket is the bucket of a route never seen: the key's own ("")
// when it has policies there, else the bucket of the first policy.
func (s *State) defaultBucket() string {
	for i := range s.Policies {
		if s.Policies[i].Bucket == "" {
			return ""
		}
	}
	if len(s.Policies) > 0 {
		return s.Policies[0].Bucket
	}
	return ""
}

// costIn returns what a request costs in unit u.
func costIn(cost []Amount, u ratelimit.Unit) int64 {
	if u == ratelimit.UnitRequests || u == "" {
		return 1
	}
	return amountOf(cost, u)
}

// touch extends the key's life past now and everything it holds.
func (s *State) touch(now time.Time, cfg *Config) {
	exp := now.Add(cfg.idleTTL())
	for _, t := range []time.Time{s.PauseUntil} {
		if t.After(now) {
			exp = maxTime(exp, t.Add(cfg.idleTTL()))
		}
	}
	for i := range s.Leases {
		exp = maxTime(exp, s.Leases[i].Expires)
	}
	for i := range s.Policies {
		if r := s.Policies[i].ResetAt; r.After(now) {
			exp = maxTime(exp, r.Add(cfg.idleTTL()))
		}
	}
	s.Expires = exp
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// seconds returns d in seconds.
func seconds(d time.Duration) float64 { return d.Seconds() }

// after returns now plus f seconds, saturating.
func after(t time.Time, f float64) time.Time {
	if f <= 0 {
		return t
	}
	if f > float64(ratelimit.MaxDuration/time.Second) {
		return t.Add(ratelimit.MaxDuration)
	}
	return t.Add(time.Duration(math.Ceil(f * float64(time.Second))))
}

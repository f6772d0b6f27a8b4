package pace

import (
	"slices"
	"sync"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// State is what one key knows: the plain value a Store holds. Its fields
// are exported so that a Store can encode it; use its methods, not the
// fields, to change it. The zero State is a key nothing is known about.
type State struct {
	// Version is the Store's: it changes with every replacement, and
	// CompareAndSwap replaces a state only at the version it was loaded at.
	Version uint64 `json:"v"`
	// Expires is when a Store may forget the key: it is idle by then, and
	// nothing it holds (a pause, a reset, a lease) still matters.
	Expires time.Time `json:"exp"`

	// Seq counts the leases granted for the key: lease n has Seq n.
	Seq uint64 `json:"seq"`
	// Spent is the cumulative cost granted in each server-named bucket,
	// per unit (requests included).
	Spent []BucketSpent `json:"spent,omitempty"`
	// Answered reports whether any response has been observed.
	Answered bool `json:"answered,omitempty"`
	// Leases are the requests sent and not yet answered.
	Leases []Lease `json:"leases,omitempty"`
	// Policies are the server's quotas, as last observed and inferred.
	Policies []Policy `json:"policies,omitempty"`
	// PauseUntil is an instant before which nothing is sent: a Retry-After,
	// or the reset of a quota a refusal said was exhausted. ProbeAfter,
	// when set, lets one request go first once it has passed, and the rest
	// wait for its answer.
	PauseUntil time.Time `json:"pause,omitempty"`
	PauseWhy   string    `json:"pause_why,omitempty"`
	ProbeAfter time.Time `json:"probe,omitempty"`
	// Adaptive is the rate learnt from 429s when the server sends no
	// rate-limit headers.
	Adaptive Adaptive `json:"adaptive"`
	// Quotas holds the state of the declared quotas (Config.Quotas), by
	// index.
	Quotas []QuotaState `json:"quotas,omitempty"`
	// Routes remembers which server-named bucket recent routes were
	// counted in (GitHub's resource, Discord's bucket, an IETF pk).
	Routes []Route `json:"routes,omitempty"`
	// Clock bounds the offset of the client's clock from the server's
	// (client = server + offset), learnt from Date headers.
	Clock Offset `json:"clock"`
	// RTT is the smoothed time from a lease's grant to its answer.
	RTT time.Duration `json:"rtt,omitempty"`
}

// BucketSpent is what was granted in one server-named bucket.
type BucketSpent struct {
	Bucket  string   `json:"b,omitempty"`
	Amounts []Amount `json:"a"`
}

// Amount is a cost in one unit.
type Amount struct {
	Unit ratelimit.Unit `json:"u"`
	N    int64          `json:"n"`
}

// Lease is one granted reservation: a request that counts as in flight.
type Lease struct {
	// Seq is the lease's number for its key; Spent its bucket's cumulative
	// cost per unit once it was granted (its own cost included).
	Seq   uint64   `json:"seq"`
	Spent []Amount `json:"spent,omitempty"`
	// Cost is the lease's own cost in units other than requests.
	Cost []Amount `json:"cost,omitempty"`
	// At is when it was granted; Expires when it stops counting if it is
	// neither completed nor cancelled.
	At      time.Time `json:"at"`
	Expires time.Time `json:"exp"`
	// Bucket is the server-named bucket the request was expected in, and
	// Route what it asked for.
	Bucket string `json:"bucket,omitempty"`
	Route  string `json:"route,omitempty"`
	// Probe marks the request that goes alone to learn what the server
	// says (a first request, or the first after a pause or a reset).
	Probe bool `json:"probe,omitempty"`
	// Quotas are the declared quotas it was charged to.
	Quotas []int `json:"quotas,omitempty"`
}

// spentAt returns the cumulative cost in unit up to and including l.
func (l *Lease) spentAt(u ratelimit.Unit) int64 { return amountOf(l.Spent, unitOf(u)) }

// unitOf is u, with "" read as requests.
func unitOf(u ratelimit.Unit) ratelimit.Unit {
	if u == "" {
		return ratelimit.UnitRequests
	}
	return u
}

// Model is what a quota is inferred to do at its reset.
type Model uint8

const (
	// ModelUnknown: not yet seen across a reset. The first request after
	// the reset goes alone, and its answer decides.
	ModelUnknown Model = iota
	// ModelWindow: the whole quota returns at the reset (a fixed window,
	// or a bucket whose reset is the time to refill).
	ModelWindow
	// ModelRefill: the quota returns continuously, at Policy.Refill units
	// per second (token and leaky buckets, GCRA, sliding windows).
	ModelRefill
)

// String names the model.
func (m Model) String() string {
	switch m {
	case ModelWindow:
		return "window"
	case ModelRefill:
		return "refill"
	default:
		return "unknown"
	}
}

// Policy is one of the server's quotas as the key knows it: the server's
// numbers (ratelimit.Policy), and what was inferred from their evolution.
type Policy struct {
	// Bucket is the server-named bucket the quota belongs to ("" for the
	// key's own), Name, Unit, Limit and Window the server's.
	Bucket string         `json:"bucket,omitempty"`
	Name   string         `json:"name,omitempty"`
	Unit   ratelimit.Unit `json:"unit"`
	Limit  int64          `json:"limit,omitempty"`
	Window time.Duration  `json:"window,omitempty"`

	// Remaining is what was left when the base answer arrived, less what
	// was in flight then; BaseSpent the key's cumulative cost in Unit at
	// that moment, so everything granted since counts against Remaining.
	// BaseAt is when that answer arrived.
	Remaining int64     `json:"rem"`
	BaseSpent int64     `json:"base"`
	BaseAt    time.Time `json:"base_at"`
	// ResetAt is the latest instant at which the quota returns (at least
	// in part): a bound, sharpened by every response. Zero when unknown.
	ResetAt time.Time `json:"reset,omitempty"`
	// Model says what happens at ResetAt; Refill is the measured rate of
	// a refilling quota, in units per second; Period the inferred length
	// of a window.
	Model  Model         `json:"model"`
	Refill float64       `json:"refill,omitempty"`
	Period time.Duration `json:"period,omitempty"`
	// RefillCap, when positive, bounds Refill: a refill rate paced to
	// was refuted by a refusal (a sliding log's returns, measured over a
	// short span, can look twice as fast as they are on average).
	// LateReset is the soonest bound on the quota's return that an answer
	// gave as its arrival plus its reset, while it lies ahead: where a
	// reset derived from the server's Date came too early, it says when.
	LateReset time.Time `json:"late_reset,omitempty"`
	// NoWindow reports that a window's whole quota, restored at a reset,
	// was refused at once: whatever the answers after a reset look like
	// (a sliding window's, after a pause, look like a fresh window's), each
	// reset lets one request go first, and its answer says what is left.
	NoWindow bool `json:"no_window,omitempty"`
	// Guessed reports that ResetAt was inferred for a window that starts
	// at its first request, from a whole-second reset rounded up (see
	// guessAnchored): at that instant one request goes first. GuessRefuted
	// reports that a guess came too early, and no more are made.
	Guessed      bool `json:"guessed,omitempty"`
	GuessRefuted bool `json:"guess_refuted,omitempty"`
	// RefutedAt is when it was last cut: refusals of requests granted
	// before then cut it no further.
	RefillCap float64   `json:"refill_cap,omitempty"`
	RefutedAt time.Time `json:"refuted_at,omitempty"`
	// Rolled is the instant a window was last taken to have reset (the
	// quota restored at ResetAt): responses to requests granted before
	// it describe the previous window.
	Rolled time.Time `json:"rolled,omitempty"`
	// Settled reports that an answer to a request granted after Rolled has
	// been taken in: what the reset brought back is known.
	Settled bool `json:"settled,omitempty"`
	// DateReset, when set, is the reset in the server's time (its Date
	// plus the reset), on the assumption that its windows are aligned to
	// its clock's seconds: ResetAt was derived from it. DateTrusted reports
	// that a reset so derived was confirmed by the answer after it; Misses
	// counts those that came too early, and Unaligned that the assumption
	// was given up.
	DateReset   time.Time `json:"date_reset,omitempty"`
	RolledDate  time.Time `json:"rolled_date,omitempty"` // DateReset of the reset last rolled
	DateTrusted bool      `json:"date_trusted,omitempty"`
	Misses      int       `json:"misses,omitempty"`
	Unaligned   bool      `json:"unaligned,omitempty"`
	// AnchorAt and AnchorLevel are the answer a refill rate is measured
	// from: when it arrived, and the quota's cumulative level then (what
	// was left plus everything granted until then).
	AnchorAt    time.Time `json:"anchor_at,omitempty"`
	AnchorLevel float64   `json:"anchor_level,omitempty"`
	// Foreign is the rate at which others spend the quota, in units per
	// second, inferred from answers that found less than ours explain.
	Foreign float64 `json:"foreign,omitempty"`
	// BaseR is the remaining the base answer said, as it said it: an
	// answer that says less was counted after it.
	BaseR int64 `json:"base_r,omitempty"`
}

// Route maps a route to the server-named bucket it was counted in.
type Route struct {
	Route  string `json:"r"`
	Bucket string `json:"b"`
}

// maxRoutes bounds State.Routes; the oldest are forgotten first.
const maxRoutes = 64

// Offset bounds the difference between the client's clock and the server's
// (client time = server time + offset), as learnt from Date headers: Lo <
// offset <= Hi when Known.
type Offset struct {
	Lo    time.Duration `json:"lo"`
	Hi    time.Duration `json:"hi"`
	Known bool          `json:"known,omitempty"`
}

// clone returns a deep copy of s, so that a Store's value is never shared.
func (s State) clone() State {
	c := s
	c.Spent = slices.Clone(s.Spent)
	for i := range c.Spent {
		c.Spent[i].Amounts = slices.Clone(c.Spent[i].Amounts)
	}
	c.Leases = slices.Clone(s.Leases)
	for i := range c.Leases {
		c.Leases[i].Spent = slices.Clone(c.Leases[i].Spent)
		c.Leases[i].Cost = slices.Clone(c.Leases[i].Cost)
		c.Leases[i].Quotas = slices.Clone(c.Leases[i].Quotas)
	}
	c.Policies = slices.Clone(s.Policies)
	c.Quotas = slices.Clone(s.Quotas)
	for i := range c.Quotas {
		c.Quotas[i].Sends = slices.Clone(c.Quotas[i].Sends)
	}
	c.Routes = slices.Clone(s.Routes)
	return c
}

// Clone returns a deep copy of s: changing one does not change the other.
func (s State) Clone() State { return s.clone() }

// amountOf returns the amount in unit u of as.
func amountOf(as []Amount, u ratelimit.Unit) int64 {
	for _, a := range as {
		if a.Unit == u {
			return a.N
		}
	}
	return 0
}

// addAmount adds n of unit u to *as.
func addAmount(as *[]Amount, u ratelimit.Unit, n int64) {
	for i := range *as {
		if (*as)[i].Unit == u {
			(*as)[i].N += n
			return
		}
	}
	*as = append(*as, Amount{Unit: u, N: n})
}

// spentIn returns the cumulative cost granted in bucket, in unit u.
func (s *State) spentIn(bucket string, u ratelimit.Unit) int64 {
	for i := range s.Spent {
		if s.Spent[i].Bucket == bucket {
			return amountOf(s.Spent[i].Amounts, unitOf(u))
		}
	}
	return 0
}

// spend adds a lease's costs to its bucket's cumulative ones and returns
// them.
func (s *State) spend(bucket string, cost []Amount) []Amount {
	i := slices.IndexFunc(s.Spent, func(b BucketSpent) bool { return b.Bucket == bucket })
	if i < 0 {
		s.Spent = append(s.Spent, BucketSpent{Bucket: bucket})
		i = len(s.Spent) - 1
	}
	b := &s.Spent[i]
	addAmount(&b.Amounts, ratelimit.UnitRequests, 1)
	for _, c := range cost {
		addAmount(&b.Amounts, unitOf(c.Unit), c.N)
	}
	return cloneAmounts(b.Amounts)
}

// cloneAmounts returns a copy of as, carved out of a chunk shared with
// other copies (its capacity is its length, so that appending to it copies
// it again): a lease granted per request then costs no allocation of its
// own.
func cloneAmounts(as []Amount) []Amount {
	if len(as) == 0 || len(as) > maxCarved {
		return slices.Clone(as)
	}
	c := amountChunks.Get().(*amountChunk)
	if c.n+len(as) > len(c.buf) {
		c = new(amountChunk)
	}
	out := c.buf[c.n : c.n+len(as) : c.n+len(as)]
	c.n += copy(out, as)
	amountChunks.Put(c)
	return out
}

// maxCarved bounds the copies cloneAmounts carves out of a chunk.
const maxCarved = 4

// An amountChunk is storage for small copies of amounts. A chunk is freed
// once the copies carved out of it are: a lease pins at most one chunk.
type amountChunk struct {
	buf [64]Amount
	n   int
}

var amountChunks = sync.Pool{New: func() any { return new(amountChunk) }}

// spentAll returns a copy of bucket's cumulative costs.
func (s *State) spentAll(bucket string) []Amount {
	for i := range s.Spent {
		if s.Spent[i].Bucket == bucket {
			return slices.Clone(s.Spent[i].Amounts)
		}
	}
	return nil
}

// inFlightBefore returns the cost in p's unit of p's bucket's leases
// granted before p's last roll and still in flight: the new window may
// count them.
func (s *State) inFlightBefore(p *Policy) int64 {
	var n int64
	for i := range s.Leases {
		if s.Leases[i].Bucket == p.Bucket && s.Leases[i].spentAt(p.Unit) <= p.BaseSpent {
			n += costIn(s.Leases[i].Cost, p.Unit)
		}
	}
	return n
}

// inFlightIn returns the cost in unit u of bucket's leases not yet
// answered.
func (s *State) inFlightIn(bucket string, u ratelimit.Unit) int64 {
	var n int64
	for i := range s.Leases {
		if s.Leases[i].Bucket == bucket {
			n += costIn(s.Leases[i].Cost, u)
		}
	}
	return n
}

// bucketOf returns the bucket a route was last counted in, and whether it
// is known.
func (s *State) bucketOf(route string) (string, bool) {
	for i := len(s.Routes) - 1; i >= 0; i-- {
		if s.Routes[i].Route == route {
			return s.Routes[i].Bucket, true
		}
	}
	return "", false
}

// learnRoute records that route was counted in bucket.
func (s *State) learnRoute(route, bucket string) {
	if route == "" {
		return
	}
	for i := range s.Routes {
		if s.Routes[i].Route == route {
			if s.Routes[i].Bucket == bucket {
				return
			}
			s.Routes = slices.Delete(s.Routes, i, i+1)
			break
		}
	}
	if len(s.Routes) >= maxRoutes {
		s.Routes = slices.Delete(s.Routes, 0, 1)
	}
	s.Routes = append(s.Routes, Route{Route: route, Bucket: bucket})
}

package ratelimittest

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Algorithm names a rate-limiting algorithm. The names are the ones apisim's
// -algorithm flag takes.
type Algorithm string

// The algorithms. Each is exact (integer nanoseconds, no floating point) and
// admits a request only if its whole cost fits.
const (
	// FixedWindow admits up to Limit per window; windows are aligned to the
	// clock (multiples of Window since the Unix epoch) and start empty, so up
	// to twice the limit can pass in a span shorter than a window that
	// straddles a boundary. With Quota.Anchor AnchorFirstRequest each key's
	// window starts at its first request instead.
	FixedWindow Algorithm = "fixed-window"
	// SlidingLog remembers the time of each admitted unit and admits a
	// request only if no window-long span ending now would hold more than
	// Limit. Rejected requests are not logged, so a key's log never holds
	// more than Limit entries, even under attack.
	SlidingLog Algorithm = "sliding-log"
	// SlidingCounter keeps the counts of the current and the previous
	// aligned window and admits a request while the estimate
	// prev*(Window-elapsed)/Window + current is below Limit (Cloudflare's
	// and go-chi/httprate's rule), so a steady overload gets Limit per
	// window; the estimate after an admission stays below Limit+1.
	SlidingCounter Algorithm = "sliding-counter"
	// TokenBucket holds up to Burst tokens, starts full and gains Limit
	// tokens per Window; a request takes one token per unit of cost.
	TokenBucket Algorithm = "token-bucket"
	// LeakyBucket is the leaky bucket as a meter: each admitted unit adds one
	// to a bucket of size Burst that drains Limit per Window; a request that
	// would overflow it is rejected (not queued).
	LeakyBucket Algorithm = "leaky-bucket"
	// GCRA is the generic cell rate algorithm (virtual scheduling): an
	// emission interval T = Window/Limit and a tolerance of (Burst-1)*T. It
	// stores one theoretical arrival time per key.
	GCRA Algorithm = "gcra"
)

// Algorithms returns every algorithm, in the order of the package doc.
func Algorithms() []Algorithm {
	return []Algorithm{FixedWindow, SlidingLog, SlidingCounter, TokenBucket, LeakyBucket, GCRA}
}

// ParseAlgorithm returns the algorithm named s (case-insensitive; "_" may
// stand for "-").
func ParseAlgorithm(s string) (Algorithm, error) {
	if a, ok := lookupName(s, Algorithms()); ok {
		return a, nil
	}
	return "", fmt.Errorf("ratelimittest: unknown algorithm %q (want one of %s)", s, joinNames(Algorithms()))
}

// normalName is s as the names are spelled: trimmed, lower case, "-" for "_".
func normalName(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
}

// lookupName finds s, spelled loosely, among names.
func lookupName[T ~string](s string, names []T) (T, bool) {
	n := T(normalName(s))
	return n, slices.Contains(names, n)
}

func joinNames[T ~string](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// Anchor says when a FixedWindow policy's windows start.
type Anchor string

// The anchors.
const (
	// AnchorClock aligns every key's windows to the clock: they start at
	// multiples of Window since the Unix epoch (most gateways). It is the
	// default.
	AnchorClock Anchor = "clock"
	// AnchorFirstRequest starts a key's window at its first request, and
	// the next one at its first request after that window has ended, as a
	// Redis INCR+EXPIRE counter does (the key is created, and its expiry
	// set, by the first request) and as express-rate-limit's stores do.
	// Every request that reaches the limiter opens a window when none is
	// open, whether it is admitted or refused (by another policy, or for a
	// cost that can never fit); as always, only an admitted request is
	// charged. A key's reset and a refusal's Retry-After count to the end
	// of its own window, and while a window is open the reset counts to
	// its end even if nothing has been charged to it yet: the window, not
	// the count, is what a new request would find.
	//
	// A SlidingCounter's windows, anchored so, start at the key's first
	// request and follow one another from there, busy or idle, off the
	// clock's multiples of Window (a key swept while its quota is whole,
	// among thousands, starts again at its next request): go-chi/httprate
	// (0.16 and later) starts its windows when the limiter starts.
	AnchorFirstRequest Anchor = "first-request"
	// AnchorStart starts a FixedWindow key's first window at its first
	// request, and every next one where the one before ends, busy or
	// idle: windows on the limiter's own clock, off the clock's multiples
	// of Window, as sethvargo/go-limiter's ticks count from when a key's
	// bucket was made. (A SlidingCounter anchored at its first request,
	// AnchorFirstRequest, already follows its windows so.)
	AnchorStart Anchor = "start"
)

// anchors lists the anchors, for ParseAnchor.
var anchors = []Anchor{AnchorClock, AnchorFirstRequest, AnchorStart}

// ParseAnchor returns the anchor named s (case-insensitive; "_" may stand
// for "-"; "aligned" is AnchorClock, "first" AnchorFirstRequest).
func ParseAnchor(s string) (Anchor, error) {
	if a, ok := lookupName(s, anchors); ok {
		return a, nil
	}
	switch normalName(s) {
	case "aligned", "":
		return AnchorClock, nil
	case "first":
		return AnchorFirstRequest, nil
	}
	return "", fmt.Errorf("ratelimittest: unknown anchor %q (want one of %s)", s, joinNames(anchors))
}

// Unit is what a policy counts.
type Unit string

// Units. UnitRequests is the default; the token units exist for the openai and
// anthropic dialects, whose servers meter tokens beside requests.
const (
	UnitRequests     Unit = "requests"
	UnitTokens       Unit = "tokens"
	UnitInputTokens  Unit = "input-tokens"
	UnitOutputTokens Unit = "output-tokens"
)

// Quota is one quota the server enforces (the server's side of what its
// headers announce as a ratelimit.Policy). A request is admitted only if
// every quota admits it; then it is charged to all of them.
type Quota struct {
	// Name identifies the policy in the headers that carry names (the IETF
	// dialect, GitHub's resource). Empty means a name made from the numbers,
	// such as "10-per-1s".
	Name string
	// Algorithm defaults to FixedWindow.
	Algorithm Algorithm
	// Limit is how many units the policy admits per Window (for the bucket
	// algorithms and GCRA, the rate at which quota comes back). At least 1.
	Limit int
	// Window is the period of Limit. At least 1ms.
	Window time.Duration
	// Burst is the capacity of TokenBucket and LeakyBucket and the burst
	// GCRA tolerates (tolerance (Burst-1)*Window/Limit). 0 means Limit. The
	// window algorithms ignore it.
	Burst int
	// Unit is what the policy counts; it defaults to UnitRequests.
	Unit Unit
	// Anchor says when windows start: AnchorClock (the default, also
	// meant by "") or AnchorFirstRequest. Only FixedWindow and
	// SlidingCounter have windows to anchor; another algorithm with
	// AnchorFirstRequest is an error.
	Anchor Anchor
	// Cost says how many units a request uses. Nil charges 1. A negative
	// cost is charged as 0.
	Cost func(*http.Request) int
}

// CostFromHeader returns a Quota.Cost that reads a request's cost from the
// header name as a decimal integer, or uses def when the header is absent or
// not a non-negative integer.
func CostFromHeader(name string, def int) func(*http.Request) int {
	return func(r *http.Request) int {
		v := strings.TrimSpace(r.Header.Get(name))
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return def
		}
		return n
	}
}

// String describes the policy, for logs: "token-bucket 10 per 1s (burst 20)".
func (p Quota) String() string {
	r, err := compile(p)
	if err != nil {
		return fmt.Sprintf("invalid policy (%v)", err)
	}
	return r.String()
}

// maxSlidingLog bounds a sliding log's Limit: it stores one entry per unit.
const maxSlidingLog = 1 << 24

// rule is a validated policy with its derived numbers.
type rule struct {
	name      string
	named     bool // the name was given, not made from the numbers
	alg       Algorithm
	unit      Unit
	anchored  bool  // windows start at a key's first request (AnchorFirstRequest)
	started   bool  // windows follow on from a key's first request (AnchorStart)
	rounded   bool  // a sliding counter's count is rounded (WithRoundedCounts)
	endResets bool  // a sliding counter resets at its window's end (WithWindowEndResets)
	limit     int64 // per window
	window    int64 // ns
	burst     int64 // bucket capacity (= limit for the window algorithms)
	num, den  int64 // rate limit/window reduced: num units per den ns
	fullScale int64 // burst*den, a full bucket in scaled units
	cost      func(*http.Request) int
}

func compile(p Quota) (*rule, error) {
	r := &rule{name: p.Name, alg: p.Algorithm, unit: p.Unit, cost: p.Cost}
	if r.alg == "" {
		r.alg = FixedWindow
	}
	if !slices.Contains(Algorithms(), r.alg) {
		return nil, fmt.Errorf("unknown algorithm %q (want one of %s)", r.alg, joinNames(Algorithms()))
	}
	if r.unit == "" {
		r.unit = UnitRequests
	}
	switch r.unit {
	case UnitRequests, UnitTokens, UnitInputTokens, UnitOutputTokens:
	default:
		return nil, fmt.Errorf("unknown unit %q", p.Unit)
	}
	switch p.Anchor {
	case "", AnchorClock:
	case AnchorFirstRequest:
		if r.alg != FixedWindow && r.alg != SlidingCounter {
			return nil, fmt.Errorf("anchor %s: only %s and %s have windows to start at a key's first request, not %s", p.Anchor, FixedWindow, SlidingCounter, r.alg)
		}
		r.anchored = true
	case AnchorStart:
		if r.alg != FixedWindow {
			return nil, fmt.Errorf("anchor %s: only %s has windows to start at a key's first request and follow on from there, not %s", p.Anchor, FixedWindow, r.alg)
		}
		r.started = true
	default:
		return nil, fmt.Errorf("unknown anchor %q (want one of %s)", p.Anchor, joinNames(anchors))
	}
	if p.Limit < 1 {
		return nil, fmt.Errorf("limit %d: must be at least 1", p.Limit)
	}
	if p.Window < time.Millisecond {
		return nil, fmt.Errorf("window %v: must be at least 1ms", p.Window)
	}
	if p.Burst < 0 {
		return nil, fmt.Errorf("burst %d: must not be negative", p.Burst)
	}
	r.limit, r.window, r.burst = int64(p.Limit), int64(p.Window), int64(p.Burst)
	if r.burst == 0 || r.alg == FixedWindow || r.alg == SlidingLog || r.alg == SlidingCounter {
		r.burst = r.limit
	}
	if r.alg == SlidingLog && r.limit > maxSlidingLog {
		return nil, fmt.Errorf("sliding-log limit %d: at most %d (it stores one entry per unit)", p.Limit, maxSlidingLog)
	}
	g := gcd(r.limit, r.window)
	r.num, r.den = r.limit/g, r.window/g
	if r.den > math.MaxInt64/4/r.burst {
		return nil, fmt.Errorf("%d per %v with burst %d: the numbers are too large to meter exactly", p.Limit, p.Window, r.burst)
	}
	r.fullScale = r.burst * r.den
	r.named = r.name != ""
	if r.name == "" {
		r.name = fmt.Sprintf("%d-per-%s", r.limit, time.Duration(r.window))
	}
	return r, nil
}

func (r *rule) String() string {
	s := fmt.Sprintf("%s %d %s per %s", r.alg, r.limit, r.unit, time.Duration(r.window))
	switch r.alg {
	case TokenBucket, LeakyBucket, GCRA:
		s += fmt.Sprintf(" (burst %d)", r.burst)
	}
	if r.anchored {
		s += " (windows from each key's first request)"
	}
	if r.started {
		s += " (windows on from each key's first request)"
	}
	return s
}

// capacity is the most a key can have left: the burst for the buckets and
// GCRA, the limit for the window algorithms.
func (r *rule) capacity() int64 { return r.burst }

// costOf is what req costs under this rule.
func (r *rule) costOf(req *http.Request) int64 {
	if r.cost == nil {
		return 1
	}
	c := int64(r.cost(req))
	switch {
	case c < 0:
		return 0
	case c > r.capacity():
		return r.capacity() + 1 // can never fit; keeps the arithmetic small
	}
	return c
}

// meter is one key's state under one rule. The caller serializes calls and
// passes non-decreasing times to advance.
type meter interface {
	// advance brings the state to now.
	advance(now int64)
	// fits reports whether cost units can be admitted now; if not, wait is
	// how long until they could be (if nothing else is admitted first), or
	// never when cost exceeds what the policy can ever admit.
	fits(cost int64) (ok bool, wait int64)
	// take charges cost units, which fits has allowed.
	take(cost int64)
	// charge charges cost units that fits has refused (WithChargeRefused):
	// the meter goes over its quota, at most as far as the algorithm can
	// owe, and the wait fits reports grows accordingly.
	charge(cost int64)
	// status reports the units left now and the time until the key's quota
	// is fully restored (0 when it is).
	status() (remaining, reset int64)
}

// arriver is a meter whose state changes when a request arrives, admitted
// or not: an anchored window opens then. The limiter calls arrive after
// advance for every request (and never for a sweep, which only advances).
type arriver interface {
	arrive()
}

func (r *rule) newMeter(now int64) meter {
	var m meter
	var off int64 // the windows' phase: on the clock, or from now (the key's first request)
	if r.anchored || r.started {
		off = now - floorDiv(now, r.window)*r.window
	}
	switch r.alg {
	case SlidingLog:
		m = &slidingLog{r: r}
	case SlidingCounter:
		m = &slidingCounter{r: r, off: off, start: off + floorDiv(now-off, r.window)*r.window}
	case TokenBucket:
		m = &tokenBucket{r: r, level: r.fullScale, last: now}
	case LeakyBucket:
		m = &leakyBucket{r: r, last: now}
	case GCRA:
		m = &gcra{r: r, tat: mixed{ns: now}}
	default:
		if r.anchored {
			m = &anchoredWindow{r: r}
			break
		}
		m = &fixedWindow{r: r, off: off, start: off + floorDiv(now-off, r.window)*r.window}
	}
	m.advance(now)
	return m
}

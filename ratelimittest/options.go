package ratelimittest

import (
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Option configures a Handler or a Server.
type Option func(*config)

type config struct {
	policies     []Quota
	clock        Clock
	partition    Partition
	partitioned  bool
	dialects     []Dialect
	retryAfter   RetryAfterForm
	rejectStatus int
	charge       bool // refused requests are charged (WithChargeRefused)
	logSize      int
	faults       faults
	errs         []error
}

// faults are the switchable misbehaviours; the zero value is a well-behaved
// server.
type faults struct {
	serverErrors ServerErrors
	dropEvery    int
	latency      time.Duration
	misleading   bool
	missingEvery int
	dateSkew     time.Duration
	// The header quirks of real servers.
	fullWindow bool // Retry-After is the refusing policy's whole window
	coarse     bool // every reset and retry delay in whole seconds
	resetOne   bool // every reset is one second
	floor      bool // epoch-second and date resets rounded down
	rounded    bool // a sliding counter's weighted count rounded
	endResets  bool // a sliding counter's reset is its current window's end
	truncRA    bool // Retry-After's delay-seconds rounded down
}

// DefaultQuota returns the policy used when no WithQuota option is given:
// a fixed window of 10 requests per second.
func DefaultQuota() Quota { return Quota{Algorithm: FixedWindow, Limit: 10, Window: time.Second} }

// defaultLogSize is how many admissions the log keeps unless
// WithAdmissionLog says otherwise.
const defaultLogSize = 100_000

func newConfig(opts []Option) (*config, error) {
	c := &config{
		clock:        realClock{},
		partition:    Shared(),
		dialects:     []Dialect{IETF},
		retryAfter:   RetryAfterSeconds,
		rejectStatus: http.StatusTooManyRequests,
		logSize:      defaultLogSize,
	}
	for _, o := range opts {
		o(c)
	}
	if len(c.errs) > 0 {
		return nil, c.errs[0]
	}
	if len(c.policies) == 0 {
		c.policies = []Quota{DefaultQuota()}
	}
	if err := checkDialects(c.dialects); err != nil {
		return nil, err
	}
	return c, nil
}

// dialectFamily groups the dialects that write the same header names; two
// of one family on a response would overwrite each other.
func dialectFamily(d Dialect) string {
	switch d {
	case IETF, IETFDraft07, IETFDraft04:
		return "RateLimit-Policy"
	case XRateLimit, GitHub, Discord:
		return "X-RateLimit-Limit"
	}
	return ""
}

func checkDialects(ds []Dialect) error {
	for i, a := range ds {
		for _, b := range ds[:i] {
			if f := dialectFamily(a); f != "" && f == dialectFamily(b) {
				return fmt.Errorf("ratelimittest: dialects %s and %s both write %s; choose one", b, a, f)
			}
		}
	}
	return nil
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("ratelimittest: "+format, args...))
}

// WithQuota adds a policy. Several policies apply at once (say 10 per second
// and 1000 per day): a request is admitted only if every one admits it, and
// is then charged to all. Without this option the server enforces
// DefaultQuota.
func WithQuota(p Quota) Option {
	return func(c *config) { c.policies = append(c.policies, p) }
}

// WithClock sets the clock the algorithms read, such as a ManualClock. If
// the clock also has a Sleep method (see Sleeper), the latency fault waits
// on it.
func WithClock(clock Clock) Option {
	return func(c *config) {
		if clock == nil {
			c.fail("WithClock(nil)")
			return
		}
		c.clock = clock
	}
}

// WithPartition sets how requests are split into quotas (see Shared,
// ByHeader, ByClientAddr). The default is one shared quota.
func WithPartition(p Partition) Option {
	return func(c *config) {
		if p == nil {
			c.fail("WithPartition(nil)")
			return
		}
		c.partition, c.partitioned = p, true
	}
}

// WithDialect sets the header dialects written on every response (all of
// them, when several are given). Dialects that write the same header names
// (the IETF drafts; x-ratelimit, github and discord) cannot be combined.
// The default is IETF; None writes no rate-limit headers.
func WithDialect(ds ...Dialect) Option {
	return func(c *config) {
		c.dialects = c.dialects[:0:0]
		for _, d := range ds {
			switch {
			case !slices.Contains(Dialects(), d):
				c.fail("unknown dialect %q", d)
			case !slices.Contains(c.dialects, d):
				c.dialects = append(c.dialects, d)
			}
		}
	}
}

// WithRetryAfter sets the Retry-After form of a rejection (default
// RetryAfterSeconds). Either form rounds up. WithRetryAfterFullWindow
// changes the value it carries, not its form.
func WithRetryAfter(f RetryAfterForm) Option {
	return func(c *config) {
		switch f {
		case RetryAfterSeconds, RetryAfterDate, RetryAfterNone:
			c.retryAfter = f
		default:
			c.fail("unknown Retry-After form %q", f)
		}
	}
}

// WithRejectStatus sets the status of a rejection (default 429; GitHub's
// primary rate limit answers 403, nginx's limit_req 503).
func WithRejectStatus(code int) Option {
	return func(c *config) {
		if code < 400 || code > 599 {
			c.fail("reject status %d: want a 4xx or 5xx code", code)
			return
		}
		c.rejectStatus = code
	}
}

// WithChargeRefused charges a refused request to the policies as if it had
// been admitted, as servers that count every request before comparing do
// (express-rate-limit's stores, a Redis INCR or ZADD before the check, a
// handler that calls x/time/rate's Reserve and refuses without cancelling):
// a client that keeps sending while refused stays refused longer. The
// request is still refused, answered as a refusal, and counted in
// Stats.Rejected, not in Served or the admission log; it is charged to
// every policy, the ones that would have admitted it included, so that a
// refusal by a short policy also spends a longer one. Per algorithm:
//
//   - FixedWindow (either anchor): the window's count grows past the limit;
//     it is forgotten with the window, so on one policy alone nothing
//     observable changes (remaining stays 0 until the window ends).
//   - SlidingLog: the refused units are logged too. The log keeps the
//     newest Limit entries, a unit logged into a full log pushing out the
//     oldest, which loses nothing: only the newest Limit entries decide
//     whether a request fits, so admission is that of an unbounded log.
//   - SlidingCounter: the current window's count grows, and weighs on the
//     next window as its previous count.
//   - TokenBucket: the tokens are taken anyway and the level goes negative,
//     LeakyBucket: the water is poured anyway and the bucket holds more
//     than its size, GCRA: the theoretical arrival time moves on anyway;
//     each by at most one whole burst of debt (a level of -Burst, water of
//     2*Burst, TAT at most 2*Burst emission intervals ahead), which keeps
//     the arithmetic exact; refusals beyond that are not charged.
//
// While a policy is over its quota, headers report 0 remaining and a reset
// that includes the debt, and even a request that costs nothing waits. The
// Retry-After of a charged refusal (and its reset) is the exact time until
// a request of the same cost would be admitted after this one's charge. A
// request that no wait would admit (its cost exceeds a policy's capacity,
// answered 413) is not charged.
func WithChargeRefused() Option {
	return func(c *config) { c.charge = true }
}

// WithAdmissionLog keeps the last n admissions for Admissions (default
// 100000); 0 keeps none.
func WithAdmissionLog(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.fail("admission log size %d: must not be negative", n)
			return
		}
		c.logSize = n
	}
}

// ServerErrors is the fault of bursts of 5xx: of every Every admitted
// requests, the last Burst are answered with Status instead of reaching the
// API. They still count against the quota, as when a backend behind a rate
// limiter fails.
type ServerErrors struct {
	Every  int
	Burst  int
	Status int // default 503
}

// WithServerErrors switches on bursts of 5xx.
func WithServerErrors(e ServerErrors) Option {
	return func(c *config) {
		if e.Status == 0 {
			e.Status = http.StatusServiceUnavailable
		}
		switch {
		case e.Every < 1 || e.Burst < 1 || e.Burst > e.Every:
			c.fail("server errors: want 1 <= Burst <= Every, got Burst %d, Every %d", e.Burst, e.Every)
		case e.Status < 500 || e.Status > 599:
			c.fail("server errors: status %d is not a 5xx", e.Status)
		default:
			c.faults.serverErrors = e
		}
	}
}

// WithDroppedConnections closes the connection of every n-th admitted
// request without writing a response (the request counts against the
// quota). Where the ResponseWriter cannot be hijacked (HTTP/2, a recorder)
// it panics with http.ErrAbortHandler, which net/http servers turn into a
// reset stream.
func WithDroppedConnections(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.fail("dropped connections: every %d: want at least 1", n)
			return
		}
		c.faults.dropEvery = n
	}
}

// WithLatency delays every request by d before the quota is consulted.
func WithLatency(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.fail("latency %v: must not be negative", d)
			return
		}
		c.faults.latency = d
	}
}

// WithMisleadingHeaders makes the headers of an admitted response describe
// only the looser policy (the one with the most units left), as when two
// stacked limiters overwrite each other's headers; a rejection still
// describes the policy that refused. It needs at least two policies to
// mislead.
func WithMisleadingHeaders() Option {
	return func(c *config) { c.faults.misleading = true }
}

// WithMissingHeaders leaves the rate-limit headers off every n-th response
// (1: all of them), as when some responses come from a cache or another
// route. Retry-After is still written.
func WithMissingHeaders(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.fail("missing headers: every %d: want at least 1", n)
			return
		}
		c.faults.missingEvery = n
	}
}

// WithDateSkew makes the server's wall clock off by d: the Date header and
// every absolute time it writes (epoch resets, HTTP-date Retry-After, RFC
// 3339 resets) move by d; delays do not. The quota itself is unaffected.
func WithDateSkew(d time.Duration) Option {
	return func(c *config) { c.faults.dateSkew = d }
}

// WithRetryAfterFullWindow makes the Retry-After of a rejection the whole
// Window of the refusing policy, whatever the true wait, as go-chi/httprate
// writes it: a request refused 100ms before a 1m window ends is told 60. Of
// several refusing policies, the one the true Retry-After would come from
// (the longest wait; on a tie the longer window) gives its window. The
// window is written in the chosen form (WithRetryAfter) and rounded up to a
// whole second, at least 1 (httprate truncates, so a window under a second
// would be 0 there). Waiting as told is often far too long, and can be too
// short where the true wait exceeds a window (a sliding counter right after
// a full window, a bucket whose Burst exceeds its Limit). Only the
// Retry-After header changes: the dialects' resets (and Discord's body)
// still tell the truth, and who is admitted is unchanged. With
// RetryAfterNone there is nothing to change.
func WithRetryAfterFullWindow() Option {
	return func(c *config) { c.faults.fullWindow = true }
}

// WithCoarseResets makes every reset and retry delay a response carries
// whole seconds, rounded up, as servers that keep time in seconds write
// them: a GCRA of 50 per second, whose true wait is 20ms, says 1. Most
// dialects already write whole seconds (Retry-After, the IETF t and the
// drafts' reset, the epoch-second and RFC 3339 resets); this changes the
// ones with milliseconds: OpenAI's resets ("1s", not "20ms"), Discord's
// X-RateLimit-Reset-After, X-RateLimit-Reset (whole epoch seconds) and the
// retry_after of its 429 body. Admission is unchanged.
func WithCoarseResets() Option {
	return func(c *config) { c.faults.coarse = true }
}

// WithFloorResets makes the resets written as an instant in whole seconds
// (X-RateLimit-Reset's and GitHub's epoch seconds, Anthropic's RFC 3339
// dates) rounded down rather than up, as go-chi/httprate and
// sethvargo/go-limiter write them: a window that ends within the current
// second says it resets at the Date's own second. A Retry-After written as
// a date (RetryAfterDate) is such an instant too, and go-limiter rounds it
// down as well, to a second that has often begun already. Delays (a
// Retry-After in seconds included) and admission are unchanged.
func WithFloorResets() Option {
	return func(c *config) { c.faults.floor = true }
}

// WithRoundedCounts makes a SlidingCounter round its weighted count to the
// nearest unit (halves up) before it compares it with the limit and writes
// what is left, as go-chi/httprate does (math.Round): a request is admitted
// while the rounded count plus its cost is at most the limit, so a count of
// 4.4 of 5 admits one more and one of 4.5 does not (where the exact
// counter admits below 5), and what is left is the limit less the rounded
// count. Other algorithms are unaffected.
func WithRoundedCounts() Option {
	return func(c *config) { c.faults.rounded = true }
}

// WithWindowEndResets makes a SlidingCounter's reset the end of its current
// window, as go-chi/httprate writes it, rather than when all it counts has
// aged out (the end of the next window while the current one counts
// anything). Admission is unchanged; other algorithms are unaffected.
func WithWindowEndResets() Option {
	return func(c *config) { c.faults.endResets = true }
}

// WithTruncatedRetryAfter makes a Retry-After in delay-seconds
// (RetryAfterSeconds) rounded down rather than up, so that a wait under a
// second says 0: with WithRetryAfterFullWindow, go-chi/httprate's
// int(windowLength.Seconds()), which tells a client refused by a window of
// 100 ms to come back at once and one refused by a window of 1.5 s to wait
// 1 s. A Retry-After date, the resets and admission are unchanged.
func WithTruncatedRetryAfter() Option {
	return func(c *config) { c.faults.truncRA = true }
}

// WithResetAlwaysOne makes every reset a dialect writes one second, whatever
// the true time to reset, even when nothing is used, as servers that report
// a constant do: the IETF t=1, the drafts' reset 1, OpenAI's "1s", Discord's
// Reset-After 1, and the absolute resets (X-RateLimit-Reset, GitHub's,
// Anthropic's, Discord's) the server's time plus one second, rounded up as
// the dialect rounds. Retry-After (and Discord's body) still tell the truth,
// and admission is unchanged; dialects without a reset (Shopify, None) are
// unaffected.
func WithResetAlwaysOne() Option {
	return func(c *config) { c.faults.resetOne = true }
}

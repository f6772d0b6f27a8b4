package headway

import (
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/headway-go/headway/internal/decide"
	"github.com/headway-go/headway/pace"
)

// Defaults of the recommended stack (NewTransport with no options).
const (
	DefaultMaxAttempts = 4
	DefaultMaxWait     = time.Minute
)

// defaultRetryStatuses backs DefaultRetryStatuses.
var defaultRetryStatuses = []int{
	http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
	http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout,
}

// DefaultRetryStatuses returns the statuses retried unless WithRetryStatuses
// says otherwise: 408, 429, 500, 502, 503 and 504. 501 and 505 are never
// worth retrying, and neither are other 4xx.
func DefaultRetryStatuses() []int { return append([]int(nil), defaultRetryStatuses...) }

// An Option configures NewTransport, New or Wrap.
type Option func(*config)

type config struct {
	retry, pace     bool
	maxAttempts     int
	maxWait         time.Duration
	base, cap       time.Duration
	jitter          Jitter
	backoff         Backoff // user-supplied; nil builds one from base, cap, jitter
	statuses        [600]bool
	attemptTimeout  time.Duration
	idempotencyKeys bool
	retryAll        bool
	bufferBody      int64
	budget          RetryBudget
	overload        float64 // the overload throttle's ratio; 0: off
	key             func(*http.Request) string
	logger          *slog.Logger
	onRetry         func(RetryEvent)
	onWait          func(WaitEvent)
	onAttempt       func(AttemptEvent)
	onDone          func(DoneEvent)
	store           pace.Store
	quotas          []quotaRoute
	noCredit        bool // pacing asks the state for every request (tests: export_test.go)
	limiters        []limiterRoute
	caps            []capRoute
	aging           time.Duration
	clock           Clock
	src             rand.Source
	rnd             *decide.Rand
	rules           decide.Rules // built from the fields above
}

func newConfig(opts []Option) *config {
	c := &config{
		retry:       true,
		pace:        true,
		maxAttempts: DefaultMaxAttempts,
		maxWait:     DefaultMaxWait,
		base:        DefaultBaseDelay,
		cap:         DefaultMaxDelay,
		jitter:      JitterFull,
		budget:      NewRetryBudget(DefaultBudgetRatio, DefaultBudgetReserve),
		overload:    DefaultOverloadRatio,
		key:         hostKey,
		clock:       SystemClock{},
		aging:       DefaultPriorityAging,
	}
	for _, code := range defaultRetryStatuses {
		c.statuses[code] = true
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	c.rnd = decide.NewRand(c.src)
	c.rules = decide.Rules{MaxWait: c.maxWait, Statuses: c.statuses, Now: c.clock.Now, Rand: c.rnd}
	if c.backoff == nil {
		c.backoff = newExpBackoff(c.base, c.cap, c.jitter, c.rnd)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// hostKey is the default key: requests to one host share pacing state and a
// retry budget.
func hostKey(req *http.Request) string { return req.URL.Host }

// WithMaxAttempts sets how many attempts one request may take, the first
// included (default DefaultMaxAttempts). n < 1 counts as 1: no retries.
func WithMaxAttempts(n int) Option { return func(c *config) { c.maxAttempts = max(n, 1) } }

// WithMaxWait bounds a single wait between attempts (default
// DefaultMaxWait). When the server's Retry-After asks for longer, headway
// gives up at once, without sleeping, with a *RateLimitError (on a 429) or
// the response itself (on a 5xx). d <= 0 restores the default.
func WithMaxWait(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			d = DefaultMaxWait
		}
		c.maxWait = d
	}
}

// WithBackoffDelays sets the exponential backoff's base and cap (defaults
// DefaultBaseDelay and DefaultMaxDelay); see NewBackoff.
func WithBackoffDelays(base, cap time.Duration) Option {
	return func(c *config) { c.base, c.cap = base, cap }
}

// WithJitter sets how backoff delays are randomised (default JitterFull).
func WithJitter(j Jitter) Option { return func(c *config) { c.jitter = j } }

// WithBackoff replaces the backoff strategy altogether. The server's
// Retry-After still wins over it: headway never retries sooner than the
// server asked.
func WithBackoff(b Backoff) Option { return func(c *config) { c.backoff = b } }

// WithRetryStatuses sets the response statuses that are retried (default
// DefaultRetryStatuses). 5xx and 408 retries still follow the idempotency
// rules; a 429 is retried for any method.
func WithRetryStatuses(codes ...int) Option {
	return func(c *config) {
		c.statuses = [600]bool{}
		for _, code := range codes {
			if code >= 0 && code < len(c.statuses) {
				c.statuses[code] = true
			}
		}
	}
}

// WithAttemptTimeout bounds each attempt, up to the arrival of the response
// headers; an attempt that takes longer is abandoned and, if the request may
// be repeated, retried. The caller's context still bounds the whole request.
// d <= 0 (the default) sets no per-attempt bound.
func WithAttemptTimeout(d time.Duration) Option { return func(c *config) { c.attemptTimeout = d } }

// WithIdempotencyKeys makes headway add a random 128-bit Idempotency-Key
// header to POST and PATCH requests that have none, so that they become
// safe to retry after a 5xx or a broken connection. Use it with servers that
// honour the header (Stripe, Adyen, PayPal, ...): the key is the same on
// every attempt of a request and differs between requests.
func WithIdempotencyKeys() Option { return func(c *config) { c.idempotencyKeys = true } }

// WithRetryAllMethods retries every method after a 5xx or a broken
// connection, as if every request were idempotent.
//
// Dangerous: a POST that the server processed before failing is then sent
// again, and an order or a payment can happen twice. Prefer
// WithIdempotencyKeys.
func WithRetryAllMethods() Option { return func(c *config) { c.retryAll = true } }

// WithBodyBuffering lets headway retry requests whose body cannot be
// rewound (no GetBody, as with a body from a pipe) by reading up to maxBytes
// of it into memory first. A longer body is sent as it streams, and that
// request is not retried. By default (0) such bodies are never buffered and
// such requests are never retried; requests built by http.NewRequest from a
// []byte, bytes.Reader or strings.Reader have GetBody and need no buffering.
func WithBodyBuffering(maxBytes int64) Option { return func(c *config) { c.bufferBody = maxBytes } }

// WithRetryBudget sets the budget that bounds retries of 5xx responses and
// transport errors (default NewRetryBudget(DefaultBudgetRatio,
// DefaultBudgetReserve), per key). nil disables the budget: every failure
// may then be retried up to WithMaxAttempts, multiplying an outage's load.
func WithRetryBudget(b RetryBudget) Option { return func(c *config) { c.budget = b } }

// WithKey sets how requests are grouped for pacing and retry budgets
// (default: by URL host, port included). Return, for example, the API key a
// request uses when one host enforces a quota per key.
func WithKey(f func(*http.Request) string) Option {
	return func(c *config) {
		if f == nil {
			f = hostKey
		}
		c.key = f
	}
}

// WithLogger makes headway log its decisions (retries, waits, give-ups) at
// debug and info level. nil, the default, is silent.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithOnRetry calls f, synchronously, each time headway decides to retry,
// before it waits. f must be safe for concurrent use and quick. Hooks add
// up: given several times (or with a metrics adapter's), every f is called.
func WithOnRetry(f func(RetryEvent)) Option {
	return func(c *config) { c.onRetry = chain(c.onRetry, f) }
}

// WithOnWait calls f, synchronously, each time the pacing layer holds a
// request back before sending it, and again when the reason changes: it
// says why and for how long. f must be safe for concurrent use and quick.
func WithOnWait(f func(WaitEvent)) Option { return func(c *config) { c.onWait = chain(c.onWait, f) } }

// WithOnAttempt calls f, synchronously, after each attempt sent to the
// server, with what its response said (its status and its
// ratelimit.Observation) or its transport error. f must be safe for
// concurrent use and quick.
func WithOnAttempt(f func(AttemptEvent)) Option {
	return func(c *config) { c.onAttempt = chain(c.onAttempt, f) }
}

// WithOnDone calls f, synchronously, once a request has ended: with its
// final status or error, how many attempts it took and how long it waited.
// f must be safe for concurrent use and quick. WithOnAttempt and WithOnDone
// are called by the retry layer: WithoutRetries leaves them silent.
func WithOnDone(f func(DoneEvent)) Option { return func(c *config) { c.onDone = chain(c.onDone, f) } }

// chain returns a hook that calls prev, then f (either may be nil).
func chain[E any](prev, f func(E)) func(E) {
	switch {
	case f == nil:
		return prev
	case prev == nil:
		return f
	}
	return func(e E) { prev(e); f(e) }
}

// WithStore sets where the pacing layer keeps each key's state (default: in
// this process, pace.NewMemoryStore). A store shared by several processes
// makes them pace as one client against one quota. When the store fails
// (returns an error), the request fails with that error, wrapped, rather
// than going out unpaced: a store that would rather fall back to pacing
// alone (as redisstore does by default) does so itself.
func WithStore(s pace.Store) Option { return func(c *config) { c.store = s } }

// WithClock sets the clock every layer waits on (default SystemClock). Tests
// use a fake clock to run retry schedules without waiting.
func WithClock(clk Clock) Option {
	return func(c *config) {
		if clk == nil {
			clk = SystemClock{}
		}
		c.clock = clk
	}
}

// WithRandSource sets the random source of jitter and Retry-After spread
// (default: math/rand/v2's global generator). A seeded source makes every
// delay reproducible. It is used under a lock, so any rand.Source will do.
func WithRandSource(src rand.Source) Option { return func(c *config) { c.src = src } }

// WithoutRetries removes the retry layer: every response and error is
// returned as the server or the transport gave it.
func WithoutRetries() Option { return func(c *config) { c.retry = false } }

// WithoutPacing removes the pacing layer: requests are never held back
// before they are sent, only retried after the fact.
func WithoutPacing() Option { return func(c *config) { c.pace = false } }

// NewTransport wraps base in headway's stack: the retry layer outside, the
// pacing layer inside, so that every attempt is paced. A nil base uses a
// clone of http.DefaultTransport sized for the bursts pacing releases (see
// DefaultIdleConnsPerHost). With no options it is the recommended
// stack: up to DefaultMaxAttempts attempts with full jitter from
// DefaultBaseDelay to DefaultMaxDelay, Retry-After honoured up to
// DefaultMaxWait, a per-host retry budget, and no retry of non-idempotent
// requests after a 5xx or a broken connection.
//
// If base is itself a transport made by NewTransport (or the Transport of a
// client made by New or Wrap), its layers are replaced, not stacked: the
// result wraps the transport underneath them with opts alone, so that
// Wrap(Wrap(c)) makes one attempt per attempt, not one per layer.
func NewTransport(base http.RoundTripper, opts ...Option) http.RoundTripper {
	// Wrapping headway's own transport again replaces its layers instead
	// of stacking more: Wrap(Wrap(c)) sends each attempt once.
	base = unwrapLayers(base)
	if base == nil {
		base = defaultBase()
	}
	c := newConfig(opts)
	m := newMarker(c, base)
	rt := base
	if c.pace {
		rt = newPacer(rt, c)
	}
	if c.retry {
		t := newRetryTransport(rt, c)
		t.mark = m
		rt = t
	} else {
		rt = countingTransport{next: rt, c: c, mark: m}
	}
	return rt
}

// DefaultIdleConnsPerHost is how many idle connections per host the base
// transport headway makes keeps (http.DefaultTransport keeps 2). Pacing
// releases a window's quota, or a pause's waiters, at once: with 2, most
// of those requests would open a new connection and close it after (1,000
// paced requests opened 848-909 connections); with 100, a burst reuses what
// the last one left.
const DefaultIdleConnsPerHost = 100

// defaultBase is the base transport when the user gives none: a clone of
// http.DefaultTransport that keeps DefaultIdleConnsPerHost idle
// connections per host (and as many in all). A transport the user gives is
// used as it is.
func defaultBase() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = DefaultIdleConnsPerHost
	t.MaxIdleConns = max(t.MaxIdleConns, DefaultIdleConnsPerHost)
	return t
}

// New returns an *http.Client whose transport is NewTransport(nil, opts...).
func New(opts ...Option) *http.Client {
	return &http.Client{Transport: NewTransport(nil, opts...)}
}

// Wrap returns a copy of c whose transport is c's wrapped by NewTransport
// (NewTransport's default base if c has none). c itself is not modified.
// A nil c is treated as an empty client. Wrapping a client that Wrap or New
// made replaces headway's layers with ones built from opts.
func Wrap(c *http.Client, opts ...Option) *http.Client {
	var cp http.Client
	if c != nil {
		cp = *c
	}
	cp.Transport = NewTransport(cp.Transport, opts...)
	return &cp
}

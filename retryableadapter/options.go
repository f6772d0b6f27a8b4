package retryableadapter

import (
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/decide"
)

// An Option configures Configure, Backoff and CheckRetry. Only what a
// go-retryablehttp client can act on is here: retryablehttp sleeps on its
// own timer, counts its own attempts and rewinds its own bodies, so
// headway's pacing, retry budget, attempt timeout and body buffering belong
// to headway's own transport (headway.NewTransport) instead.
type Option func(*config)

type config struct {
	maxAttempts int
	retry       bool
	maxWait     time.Duration
	base, cap   time.Duration
	ownDelays   bool // WithBackoffDelays or WithBackoff: retryablehttp's min and max are ignored
	jitter      headway.Jitter
	backoff     headway.Backoff // WithBackoff's, or nil
	statuses    [600]bool
	retryAll    bool
	now         func() time.Time
	src         rand.Source
	logger      *slog.Logger

	rnd   *decide.Rand
	rules decide.Rules
}

func newConfig(opts []Option) *config {
	c := &config{
		maxAttempts: headway.DefaultMaxAttempts,
		retry:       true,
		maxWait:     headway.DefaultMaxWait,
		base:        headway.DefaultBaseDelay,
		cap:         headway.DefaultMaxDelay,
		jitter:      headway.JitterFull,
		now:         time.Now,
	}
	for _, code := range headway.DefaultRetryStatuses() {
		c.statuses[code] = true
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	c.rnd = decide.NewRand(c.src)
	c.rules = decide.Rules{MaxWait: c.maxWait, Statuses: c.statuses, Now: c.now, Rand: c.rnd}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// WithMaxAttempts sets how many attempts one request may take, the first
// included (default headway.DefaultMaxAttempts): Configure sets the client's
// RetryMax to n-1. n < 1 counts as 1: no retries.
func WithMaxAttempts(n int) Option { return func(c *config) { c.maxAttempts = max(n, 1) } }

// WithoutRetries makes CheckRetry never retry and Configure set RetryMax to
// 0, while a 429 still becomes a *headway.RateLimitError.
func WithoutRetries() Option { return func(c *config) { c.retry = false } }

// WithMaxWait bounds a single wait between attempts (default
// headway.DefaultMaxWait). A 429 whose Retry-After asks for longer is not
// retried: it becomes a *headway.RateLimitError at once. d <= 0 restores the
// default.
func WithMaxWait(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			d = headway.DefaultMaxWait
		}
		c.maxWait = d
	}
}

// WithBackoffDelays sets the exponential backoff's base and cap, which then
// win over the client's RetryWaitMin and RetryWaitMax (see Backoff).
func WithBackoffDelays(base, cap time.Duration) Option {
	return func(c *config) { c.base, c.cap, c.ownDelays = base, cap, true }
}

// WithJitter sets how backoff delays are randomised (default
// headway.JitterFull).
func WithJitter(j headway.Jitter) Option { return func(c *config) { c.jitter = j } }

// WithBackoff replaces the backoff strategy altogether; the client's
// RetryWaitMin and RetryWaitMax are then ignored. The server's Retry-After
// still wins over it.
func WithBackoff(b headway.Backoff) Option {
	return func(c *config) { c.backoff, c.ownDelays = b, b != nil || c.ownDelays }
}

// WithRetryStatuses sets the response statuses that are retried (default
// headway.DefaultRetryStatuses()). Statuses other than 429 are retried only
// for requests that may be repeated.
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

// WithRetryAllMethods retries every method after a 5xx or a broken
// connection, as if every request were idempotent. Dangerous: see
// headway.WithRetryAllMethods.
func WithRetryAllMethods() Option { return func(c *config) { c.retryAll = true } }

// WithRandSource sets the random source of jitter and Retry-After spread
// (default: math/rand/v2's global generator). It is used under a lock.
func WithRandSource(src rand.Source) Option { return func(c *config) { c.src = src } }

// WithNow sets the clock that Retry-After dates and deadlines are measured
// against (default time.Now); retryablehttp does its waiting on its own
// timer. nil restores the default.
func WithNow(now func() time.Time) Option {
	return func(c *config) {
		if now == nil {
			now = time.Now
		}
		c.now = now
	}
}

// WithLogger makes the adapter log its give-ups on 429s at info level. nil,
// the default, is silent.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// repeatable reports whether resp's request may be sent again after it was
// processed.
func (c *config) repeatable(req *http.Request) bool {
	return c.retryAll || req != nil && decide.Repeatable(req.Method, req.Header)
}

package redisstore

import (
	"log/slog"
	"time"

	"github.com/headway-go/headway/pace"
)

// Defaults of the options.
const (
	// DefaultPrefix starts every Redis key the store writes.
	DefaultPrefix = "headway:pace:"
	// DefaultTimeout bounds every Redis call.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultRetryInterval is the least time between two attempts to reach
	// Redis again once it has failed.
	DefaultRetryInterval = time.Second
)

// An Option changes how a Store uses Redis.
type Option func(*config)

type config struct {
	prefix     string
	timeout    time.Duration
	retry      time.Duration
	failClosed bool
	fallback   pace.Store
	onSwitch   func(Event)
	logger     *slog.Logger
	now        func() time.Time
}

// WithPrefix sets the start of every Redis key the store writes (default
// DefaultPrefix). Processes share pacing state only if they use the same
// Redis and the same prefix. A prefix should not contain braces: Redis
// Cluster would take a hash tag in it for the store's own, and put every
// key in one slot.
func WithPrefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// WithTimeout sets how long a Redis call may take before the store takes
// Redis for unavailable (default DefaultTimeout; d <= 0 keeps it). It bounds
// what a slow or stalled Redis adds to a request.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithRetryInterval sets the least time between two attempts to reach
// Redis once it has failed (default DefaultRetryInterval; d <= 0 keeps it).
// The attempts are PINGs made in the background: no request waits on them.
func WithRetryInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.retry = d
		}
	}
}

// WithFailClosed makes the store fail while Redis is unavailable, with an
// *UnavailableError, instead of pacing in this process alone. headway then
// fails the request rather than sending it without the shared state.
func WithFailClosed() Option { return func(c *config) { c.failClosed = true } }

// WithFallback sets the store that keeps pacing state while Redis is
// unavailable and the store fails open (default: a new pace.MemoryStore at
// each outage, dropped when Redis returns). A fallback given here is kept
// across outages.
func WithFallback(s pace.Store) Option { return func(c *config) { c.fallback = s } }

// WithOnSwitch calls f, synchronously, each time the store switches between
// Redis and the fallback (or failing, with WithFailClosed): when a Redis
// call fails and when Redis answers again. Calls are made one at a time, in
// the order of the switches. f must be quick and must not use the store.
func WithOnSwitch(f func(Event)) Option { return func(c *config) { c.onSwitch = f } }

// WithLogger logs each switch to logger: a warning when Redis becomes
// unavailable, an information when it is back, and at debug level each
// failed attempt to reach it. A nil logger (the default) is silent. The
// messages never contain pacing keys.
func WithLogger(logger *slog.Logger) Option { return func(c *config) { c.logger = logger } }

package headway

import (
	"fmt"
	"net/http"
	"time"

	"golang.org/x/time/rate"

	"github.com/headway-go/headway/internal/decide"
)

// WithLimiter adds a ceiling of the caller's own: a golang.org/x/time/rate
// Limiter that every request (or, with patterns, every request a pattern
// matches, as in WithQuota: "GET api.example.com/v1/", "api.example.com/")
// must also pass before it is sent, after the pacing layer lets it go. The
// limiter is driven on headway's clock (WithClock) through its explicit-time
// API: one token is reserved (ReserveN) when the pacing layer admits the
// request, and the request waits for the reservation's delay (DelayFrom)
// in its key's line. A wait that cannot fit in WithMaxWait or before the
// context's deadline fails at once with a *RateLimitError (StatusCode 0)
// and gives its token back (CancelAt); so does a request whose context ends
// while it waits (ReasonCanceled). The same Limiter may be shared with code
// outside headway: it is safe for concurrent use. WithLimiter needs the
// pacing layer (it does nothing with WithoutPacing); a nil limiter is
// ignored; an invalid pattern panics, as http.ServeMux's does.
func WithLimiter(lim *rate.Limiter, patterns ...string) Option {
	if lim == nil {
		return func(*config) {}
	}
	l := limiterRoute{lim: lim, routes: newRoutes(patterns...)} // panics on an invalid pattern
	return func(c *config) { c.limiters = append(c.limiters, l) }
}

// limiterRoute is a caller's limiter and the routes it governs.
type limiterRoute struct {
	lim *rate.Limiter
	routes
}

// limit makes req wait for the callers' limiters that govern it, at now,
// once the pacing layer has let it go: nil when it may be sent, or the
// error to fail it with (every token reserved is given back then).
func (p *pacer) limit(req *http.Request, key string, now time.Time) error {
	if len(p.c.limiters) == 0 {
		return nil
	}
	var rs [4]*rate.Reservation
	res := rs[:0]
	giveBack := func(at time.Time) {
		for _, r := range res {
			r.CancelAt(at)
		}
	}
	var wait time.Duration
	for i := range p.c.limiters {
		l := &p.c.limiters[i]
		if !l.match(req) {
			continue
		}
		r := l.lim.ReserveN(now, 1)
		if !r.OK() {
			giveBack(now)
			return &RateLimitError{Method: req.Method, URL: decide.Redact(req.URL), Reason: ReasonWaitTooLong,
				Bound: p.c.maxWait, Why: fmt.Sprintf("WithLimiter's rate.Limiter (limit %v, burst %d) never admits one request", l.lim.Limit(), l.lim.Burst())}
		}
		res = append(res, r)
		wait = max(wait, r.DelayFrom(now))
	}
	if wait <= 0 {
		return nil
	}
	refuse := func(reason Reason, bound time.Duration) error {
		giveBack(now)
		return &RateLimitError{Method: req.Method, URL: decide.Redact(req.URL), Reason: reason, Bound: bound,
			Wait: wait, Why: "WithLimiter's rate.Limiter"}
	}
	if wait > p.c.maxWait {
		return refuse(ReasonWaitTooLong, p.c.maxWait)
	}
	ctx := req.Context()
	if dl, ok := ctx.Deadline(); ok && !now.Add(wait).Before(dl) {
		return refuse(ReasonDeadline, max(dl.Sub(now), 0))
	}
	p.report(req, key, wait, true, "WithLimiter's rate.Limiter")
	if err := p.c.clock.Sleep(ctx, wait); err != nil || ctx.Err() != nil {
		at := p.c.clock.Now()
		giveBack(at)
		return canceled(req, max(now.Add(wait).Sub(at), 0), "WithLimiter's rate.Limiter", ctx)
	}
	return nil
}

package headway

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/headway-go/headway/internal/decide"
	"github.com/headway-go/headway/ratelimit"
)

// pacer is the pacing layer. It holds requests back before they are sent
// when the server has said, for their key, that it will refuse them. This
// first version honours the queue-wide pause a 429 or 503 with Retry-After
// asks for: once one request to a key is told to wait, every request to that
// key waits until the same instant instead of each earning its own 429.
// (Budget-driven pacing from RateLimit and X-RateLimit headers builds on it.)
type pacer struct {
	next http.RoundTripper
	c    *config
	keys sync.Map // key string -> *pause
}

// pause is one key's "nothing before this instant".
type pause struct {
	mu    sync.Mutex
	until time.Time
}

func (p *pause) get() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.until
}

func (p *pause) extend(t time.Time) {
	p.mu.Lock()
	if t.After(p.until) {
		p.until = t
	}
	p.mu.Unlock()
}

// CloseIdleConnections closes the idle connections of the transport below.
func (p *pacer) CloseIdleConnections() { decide.CloseIdle(p.next) }

func (p *pacer) below() http.RoundTripper { return p.next }

// RoundTrip implements http.RoundTripper.
func (p *pacer) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	if _, err := p.hold(req); err != nil {
		return refuse(req, err)
	}
	resp, _, err := p.observe(req)
	return resp, err
}

// hold waits until req's key is not paused, failing fast when the wait
// cannot fit in max wait or before the context's deadline.
func (p *pacer) hold(req *http.Request) (time.Duration, error) {
	v, ok := p.keys.Load(p.c.key(req))
	if !ok {
		return 0, nil
	}
	until := v.(*pause).get()
	now := p.c.clock.Now()
	d := until.Sub(now)
	if d <= 0 {
		return 0, nil
	}
	ctx := req.Context()
	refuse := func(reason Reason, limit time.Duration) error {
		return &RateLimitError{
			Method: req.Method, URL: decide.Redact(req.URL), RetryAfter: d, HasRetryAfter: true,
			Reason: reason, Bound: limit,
		}
	}
	if d > p.c.maxWait {
		return 0, refuse(ReasonWaitTooLong, p.c.maxWait)
	}
	if dl, ok := ctx.Deadline(); ok && !now.Add(d).Before(dl) {
		return 0, refuse(ReasonDeadline, max(dl.Sub(now), 0))
	}
	// The same small spread as after a Retry-After, so that the requests
	// queued behind one pause do not all leave at the same instant.
	d += p.c.rules.Spread(d)
	if err := p.c.clock.Sleep(ctx, d); err != nil {
		return 0, fmt.Errorf("headway: paused %v by the server's Retry-After: %w", d, err)
	}
	if st := statsFrom(ctx); st != nil {
		st.Waited += d
	}
	return d, nil
}

// observe sends req at once and returns the response with what its headers
// said, recording any pause the server asked for.
func (p *pacer) observe(req *http.Request) (*http.Response, ratelimit.Observation, error) {
	resp, err := roundTrip(p.next, req)
	if err != nil {
		return nil, ratelimit.Observation{}, err
	}
	now := p.c.clock.Now()
	obs := parse(resp, now)
	if obs.HasRetryAfter && obs.RetryAfter > 0 && obs.RetryAfter <= p.c.maxWait &&
		(resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		// A pause longer than max wait is not recorded: every caller would
		// refuse to wait it anyway, and would rather get the server's own
		// answer (and its details) than be held back for hours by one
		// response, or for decades by a misread epoch.
		v, _ := p.keys.LoadOrStore(p.c.key(req), &pause{})
		v.(*pause).extend(now.Add(obs.RetryAfter))
	}
	return resp, obs, nil
}

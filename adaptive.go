package headway

import (
	"fmt"
	"net/http"
	"sync"
	"time"
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
func (p *pacer) CloseIdleConnections() { closeIdle(p.next) }

// RoundTrip implements http.RoundTripper.
func (p *pacer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, _, err := p.observe(req)
	return resp, err
}

// observe sends req once its key's pause is over and returns the response
// with what its headers said.
func (p *pacer) observe(req *http.Request) (*http.Response, Observation, error) {
	key := p.c.key(req)
	if v, ok := p.keys.Load(key); ok {
		if err := p.wait(req, v.(*pause).get()); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, Observation{}, err
		}
	}
	resp, err := p.next.RoundTrip(req)
	if err != nil {
		return nil, Observation{}, err
	}
	now := p.c.clock.Now()
	obs := ParseHeaders(resp.Header, resp.StatusCode, now)
	if obs.HasRetryAfter && obs.RetryAfter > 0 &&
		(resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		// The whole pause is kept, however long: a request that finds more
		// of it left than it may wait fails fast in wait, rather than
		// sleeping through a truncated pause and earning another 429.
		v, _ := p.keys.LoadOrStore(key, &pause{})
		v.(*pause).extend(now.Add(obs.RetryAfter))
	}
	return resp, obs, nil
}

// wait holds req until until, failing fast when the wait cannot fit.
func (p *pacer) wait(req *http.Request, until time.Time) error {
	now := p.c.clock.Now()
	d := until.Sub(now)
	if d <= 0 {
		return nil
	}
	ctx := req.Context()
	refuse := func(reason Reason, limit time.Duration) error {
		return &RateLimitError{
			Method: req.Method, URL: redact(req.URL), RetryAfter: d, HasRetryAfter: true,
			Reason: reason, Limit: limit,
		}
	}
	if d > p.c.maxWait {
		return refuse(ReasonWaitTooLong, p.c.maxWait)
	}
	if dl, ok := ctx.Deadline(); ok && !now.Add(d).Before(dl) {
		return refuse(ReasonDeadline, max(dl.Sub(now), 0))
	}
	if err := p.c.clock.Sleep(ctx, d); err != nil {
		return fmt.Errorf("headway: paused %v by an earlier 429 to %s: %w", d, req.URL.Host, err)
	}
	if st := statsFrom(ctx); st != nil {
		st.Waited += d
	}
	return nil
}

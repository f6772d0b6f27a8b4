package headway

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/headway-go/headway/internal/decide"
	"github.com/headway-go/headway/ratelimit"
)

// attempt is the outcome of one attempt of the retry layer.
type attempt struct {
	resp  *http.Response
	obs   ratelimit.Observation
	err   error
	wrote bool // the request was (at least partly) written
	// status and body outlive resp once it is discarded: the response's
	// status, and the start of its body when it was a 429.
	status int
	body   []byte
	// release frees the attempt's own context, when it has one
	// (hasOwnContext: WithAttemptTimeout); otherwise it is noRelease.
	release       func()
	hasOwnContext bool
}

func noRelease() {}

// send makes one attempt, into a, with the given body and, when hdr is not nil, that
// header instead of the caller's, without touching the caller's request.
// trackWrite asks to learn whether the request was written before a
// failure, which decides whether a non-idempotent request may be retried.
// obs is the pacing layer that observes the attempt under lease l (nil
// when there is none, or a headway stack above paces: see layers.go).
func (t *retryTransport) send(a *attempt, obs observer, req *http.Request, hdr http.Header, body io.ReadCloser, trackWrite bool, l lease) {
	*a = attempt{release: noRelease}
	ctx := req.Context()
	var wrote *atomic.Bool
	if trackWrite {
		ctx, wrote = decide.TrackWrite(ctx)
	}
	var stop func() bool
	var cancel context.CancelCauseFunc
	if d := t.c.attemptTimeout; d > 0 {
		ctx, cancel = context.WithCancelCause(ctx)
		stop = t.c.clock.AfterFunc(d, func() { cancel(ErrAttemptTimeout) })
		a.release = func() { stop(); cancel(nil) }
		a.hasOwnContext = true
	}
	r := req
	if ctx != req.Context() || body != req.Body || hdr != nil {
		r = req.WithContext(ctx)
		if hdr != nil {
			r.Header = hdr
		}
		r.Body = body
	}
	if obs != nil {
		a.resp, a.obs, a.err = obs.observe(r, l)
	} else {
		a.resp, a.err = roundTrip(t.next, r)
		if a.resp != nil && (a.resp.StatusCode >= 400 || t.c.onAttempt != nil) {
			// Without pacing, what a response says is read only to
			// decide a retry, which a status under 400 never gets
			// (decide.Rules.RetryResponse), or for the attempt hook.
			a.obs = parse(&t.parser, a.resp, t.c.clock.Now())
		}
	}
	if stop != nil {
		stop()
		if a.err != nil && context.Cause(ctx) == ErrAttemptTimeout && req.Context().Err() == nil {
			a.err = &attemptTimeoutError{after: t.c.attemptTimeout}
		}
	}
	if a.err != nil {
		a.release()
	} else {
		a.status = a.resp.StatusCode
	}
	a.wrote = wrote != nil && wrote.Load()
}

// keep returns the response to the caller; if the attempt had its own
// context, closing the body releases it.
func (a *attempt) keep() *http.Response {
	if a.hasOwnContext {
		if a.resp.Body == nil || a.resp.Body == http.NoBody {
			a.release()
		} else {
			a.resp.Body = &releasingBody{ReadCloser: a.resp.Body, release: a.release}
		}
	}
	return a.resp
}

// drainLimit bounds how much of a discarded response body is read so that
// its connection can be reused; a longer body is closed, costing the
// connection rather than unbounded reading.
const drainLimit = 64 << 10

// drainTimeout bounds the time spent reading a response headway discards
// (or keeps an excerpt of): a server that stalls mid-body costs the
// connection, not the caller's time.
const drainTimeout = time.Second

// minDrain is the least time a discarded body may take to drain, even
// before a retry that waits less: reading what has already arrived keeps the
// connection for the next attempt.
const minDrain = 10 * time.Millisecond

// discardWithin spends wait before the next attempt: it drains and closes
// the response (keeping the start of a 429's body, when keepExcerpt), for at
// most min(drainTimeout, wait), then sleeps what is left of wait, so that
// draining a slow body is part of the wait rather than added to it. It
// returns the time spent, and the context's error if ctx ended first.
func (a *attempt) discardWithin(ctx context.Context, clk Clock, wait time.Duration, keepExcerpt bool) (time.Duration, error) {
	start := clk.Now()
	if a.resp != nil && a.resp.Body != nil {
		bound := min(drainTimeout, max(wait, minDrain))
		if keepExcerpt {
			a.body = readBounded(clk, a.resp.Body, MaxBodyExcerpt, bound)
		}
		if a.resp.ContentLength <= drainLimit {
			readBounded(clk, a.resp.Body, drainLimit, bound-clk.Now().Sub(start))
		}
		a.resp.Body.Close()
	}
	a.release()
	werr := clk.Sleep(ctx, wait-clk.Now().Sub(start))
	return clk.Now().Sub(start), werr
}

// excerpt reads the start of the response's body, drains the rest and
// closes it, within drainTimeout.
func (a *attempt) excerpt(clk Clock) []byte {
	if a.resp == nil || a.resp.Body == nil {
		a.release()
		return nil
	}
	start := clk.Now()
	b := readBounded(clk, a.resp.Body, MaxBodyExcerpt, drainTimeout)
	if a.resp.ContentLength <= drainLimit {
		readBounded(clk, a.resp.Body, drainLimit, drainTimeout-clk.Now().Sub(start))
	}
	a.resp.Body.Close()
	a.release()
	return b
}

// readBounded reads up to limit bytes of body within d, on clk: it stops at
// the first read that ends at or after the deadline, and closes body if one
// read blocks past it, so that a stalled server costs the connection, not
// the caller's time. It returns what it read when limit <= MaxBodyExcerpt,
// and discards it otherwise.
func readBounded(clk Clock, body io.ReadCloser, limit int64, d time.Duration) []byte {
	if d <= 0 {
		return nil
	}
	stop := clk.AfterFunc(d, func() { body.Close() })
	defer stop()
	r := &deadlineReader{r: io.LimitReader(body, limit), clk: clk, deadline: clk.Now().Add(d)}
	if limit <= MaxBodyExcerpt {
		b, _ := io.ReadAll(r)
		return b
	}
	io.Copy(io.Discard, r)
	return nil
}

// deadlineReader ends its reader at a deadline on a Clock.
type deadlineReader struct {
	r        io.Reader
	clk      Clock
	deadline time.Time
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	if !d.clk.Now().Before(d.deadline) {
		return 0, io.EOF
	}
	return d.r.Read(p)
}

type releasingBody struct {
	io.ReadCloser
	release func()
	done    atomic.Bool
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	if b.done.CompareAndSwap(false, true) {
		b.release()
	}
	return err
}

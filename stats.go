package headway

import (
	"context"
	"net/http"
	"time"

	"github.com/headway-go/headway/internal/decide"
)

// Stats is what headway did for one request: read it after the request is
// done. See ContextWithStats.
type Stats struct {
	// Attempts counts attempts sent to the server (1 when no retry happened).
	Attempts int
	// Retries counts retries (Attempts-1 for a single round trip).
	Retries int
	// Throttled counts 429 responses seen, retried ones included.
	Throttled int
	// Waited is the total time spent waiting: backoff and Retry-After waits
	// of the retry layer and pauses of the pacing layer.
	Waited time.Duration
}

type statsKey struct{}

// ContextWithStats returns a context that makes headway record, in s, what
// it did for every request made with that context. Attach it to one request
// (or to the requests of one logical call, such as a redirect chain: the
// numbers add up). s must not be read while the request is in flight and
// must not be shared by requests in flight at the same time.
//
//	var st headway.Stats
//	req = req.WithContext(headway.ContextWithStats(req.Context(), &st))
//	resp, err := client.Do(req)
//	// st.Attempts, st.Waited ...
func ContextWithStats(ctx context.Context, s *Stats) context.Context {
	return context.WithValue(ctx, statsKey{}, s)
}

// statsFrom returns the request's Stats, or nil when it has none.
func statsFrom(ctx context.Context) *Stats {
	if s, ok := ctx.Value(statsKey{}).(*Stats); ok && s != nil {
		return s
	}
	return nil
}

// countingTransport keeps Stats when the retry layer, which normally keeps
// them, is left out (WithoutRetries).
type countingTransport struct {
	next http.RoundTripper
	c    *config
	mark *marker // put on the requests sent, when the base may hide a headway stack (layers.go)
}

// RoundTrip implements http.RoundTripper.
func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if applied(req.Context(), t.c, retryLayer) {
		// A headway stack above counts the attempts.
		return t.next.RoundTrip(req)
	}
	st := statsFrom(req.Context())
	var before int
	if st != nil {
		before = st.Attempts
	}
	next := t.next
	if p, ok := next.(*pacer); ok && t.mark != nil && t.mark.pacedBelow.Load() {
		// A retry loop below paces each of its attempts.
		next = p.next
	}
	resp, err := next.RoundTrip(mark(req, t.mark))
	// A headway retry loop below, behind a transport of someone else's,
	// counts its own attempts.
	if st != nil && st.Attempts == before && !heldBack(err) {
		st.Attempts++
		if resp != nil && resp.StatusCode == http.StatusTooManyRequests {
			st.Throttled++
		}
	}
	return resp, err
}

// CloseIdleConnections closes the idle connections of the transport below.
func (t countingTransport) CloseIdleConnections() { decide.CloseIdle(t.next) }

func (t countingTransport) below() http.RoundTripper { return t.next }

package headway

import (
	"net/http"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// What the stack reads from a response: the header model lives in package
// ratelimit; this file is the seam through which one parse per response is
// shared by both layers.
//
// The pacing layer, when present, parses each response's headers once, acts
// on them, and hands the Observation up to the retry layer through observer.
// Without the pacing layer the retry layer parses them itself.

// observer is implemented by headway's pacing layer: it returns the
// Observation it parsed along with the response.
type observer interface {
	// hold waits until req, to key, may be sent, returning its lease and how long
	// it waited, or refuses it (a *RateLimitError with StatusCode 0, or
	// the context's error, wrapped).
	hold(req *http.Request, key string) (lease, time.Duration, error)
	// observe sends req at once under its lease.
	observe(req *http.Request, l lease) (*http.Response, ratelimit.Observation, error)
	// cancel takes back the lease of a request that will not be sent.
	cancel(l lease)
}

// parse reads what resp says about rate limiting with the layer's parser,
// which reads a policy field that repeats only once; received is when it
// arrived (used only when it has no valid Date header).
func parse(p *ratelimit.Parser, resp *http.Response, received time.Time) ratelimit.Observation {
	return p.ParseHeaders(resp.Header, resp.StatusCode, received)
}

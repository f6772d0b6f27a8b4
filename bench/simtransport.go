package bench

import (
	"net/http"
	"time"

	"github.com/headway-go/headway/internal/testkit/sim"
)

// SimTransport is an http.RoundTripper that serves each request with
// Handler in memory, each way taking half of RTT: the request reaches the
// handler RTT/2 after it is sent and the response is back RTT/2 later. The
// waits are timers, so inside a testing/synctest bubble they take virtual
// time and a minute of traffic costs milliseconds. A context that ends
// during either half ends the round trip with its error. It is safe for
// concurrent use.
type SimTransport struct {
	Handler http.Handler
	RTT     time.Duration
}

// RoundTrip implements http.RoundTripper.
func (t *SimTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return sim.Transport{Handler: t.Handler, RTT: t.RTT}.RoundTrip(req)
}

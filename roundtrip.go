package headway

import (
	"errors"
	"net/http"
)

// The http.RoundTripper contract (net/http): a RoundTripper must not modify
// the request, must always close its body (even on errors), and returns a
// response or an error, never both. The helpers here keep it in one place
// for every layer.

var (
	errNoURL      = errors.New("headway: request has no URL")
	errNoResponse = errors.New("headway: transport returned neither a response nor an error")
)

// checkRequest refuses a request that cannot be sent, closing its body.
func checkRequest(req *http.Request) error {
	if req.URL == nil {
		_, err := refuse(req, errNoURL)
		return err
	}
	return nil
}

// refuse closes req's body and returns err: the request will not be sent.
func refuse(req *http.Request, err error) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, err
}

// roundTrip sends req through next, holding next to the contract: a
// response with an error is closed and dropped, and neither is an error.
func roundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	resp, err := next.RoundTrip(req)
	switch {
	case err != nil:
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return nil, err
	case resp == nil:
		return nil, errNoResponse
	}
	return resp, nil
}

// layer is implemented by each of headway's own transports, so that
// wrapping one of them again replaces it instead of stacking a second retry
// and pacing layer on top (Wrap(Wrap(c))).
type layer interface {
	// below returns the transport this layer sends through.
	below() http.RoundTripper
}

// unwrapLayers returns the first transport under rt that is not one of
// headway's.
func unwrapLayers(rt http.RoundTripper) http.RoundTripper {
	for {
		l, ok := rt.(layer)
		if !ok {
			return rt
		}
		rt = l.below()
	}
}

package ratelimittest

import (
	"net"
	"net/http"
	"strings"
)

// Partition says which quota a request spends: requests with the same key
// share one. Shared, ByHeader and ByClientAddr are the common choices.
type Partition func(*http.Request) string

// Shared puts every request in one quota (the default).
func Shared() Partition { return func(*http.Request) string { return "" } }

// ByHeader gives each value of the request header name (an API key, a
// tenant) its own quota. Requests without the header share the quota of the
// empty key.
func ByHeader(name string) Partition {
	return func(r *http.Request) string { return strings.TrimSpace(r.Header.Get(name)) }
}

// ByClientAddr gives each client IP address its own quota (the port is
// ignored, so a client's connections share it).
func ByClientAddr() Partition {
	return func(r *http.Request) string {
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			return host
		}
		return r.RemoteAddr
	}
}

package headway

import "net/http"

// routes is a set of http.ServeMux patterns (Go 1.22: "[METHOD ][HOST]/[PATH]",
// with {wildcards} and a trailing slash for a subtree) that selects the
// requests an option governs. The zero value selects every request.
type routes struct {
	mux *http.ServeMux
}

// newRoutes returns the routes patterns match; none matches every request.
// It panics on an invalid pattern, as http.ServeMux.Handle does: it is a
// programming error.
func newRoutes(patterns ...string) routes {
	if len(patterns) == 0 {
		return routes{}
	}
	r := routes{mux: http.NewServeMux()}
	for _, p := range patterns {
		r.mux.Handle(p, routeMark{})
	}
	return r
}

// routeMark is the handler every pattern of a routes is registered with:
// ServeMux.Handler answers a request no pattern matches with handlers of
// its own (not found, or a redirect to a subtree's trailing slash, whose
// pattern string is not empty), so a match is the mark coming back.
type routeMark struct{}

// ServeHTTP implements http.Handler; routes never serve.
func (routeMark) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	http.NotFound(w, r)
}

// match reports whether one of the patterns matches req. A host in a
// pattern matches the request's host without its port, as in ServeMux.
func (r routes) match(req *http.Request) bool {
	if r.mux == nil {
		return true
	}
	if req.Host == "" && req.URL != nil {
		// ServeMux matches hosts on Request.Host, which client requests
		// need not set.
		req = &http.Request{Method: req.Method, URL: req.URL, Host: req.URL.Host, Header: req.Header}
	}
	h, _ := r.mux.Handler(req)
	_, ok := h.(routeMark)
	return ok
}

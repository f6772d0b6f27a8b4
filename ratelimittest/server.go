package ratelimittest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
)

// Server is an httptest.Server whose every response comes through a
// rate-limiting Handler. Close it when done, as with httptest.
type Server struct {
	*httptest.Server
	// Handler is the rate-limiting middleware in front of the API.
	Handler *Handler
}

// NewServer starts a server on a loopback address that enforces opts in
// front of api (nil: an API that answers 200 with a small JSON body). Like
// httptest.NewServer it panics when it cannot start, and also when an option
// is invalid (NewHandler reports those as errors instead).
func NewServer(api http.Handler, opts ...Option) *Server {
	s := NewUnstartedServer(api, opts...)
	s.Start()
	return s
}

// NewUnstartedServer is NewServer without starting it, so that its Config or
// TLS can be changed first.
func NewUnstartedServer(api http.Handler, opts ...Option) *Server {
	h, err := NewHandler(api, opts...)
	if err != nil {
		panic(fmt.Sprintf("ratelimittest.NewServer: %v", err))
	}
	return &Server{Server: httptest.NewUnstartedServer(h), Handler: h}
}

// Stats returns the limiter's counters so far.
func (s *Server) Stats() Stats { return s.Handler.Stats() }

// Admissions returns the limiter's admission log, oldest first.
func (s *Server) Admissions() []Admission { return s.Handler.Admissions() }

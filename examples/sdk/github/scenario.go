package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v75/github"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/examples/sdk/internal/sdkrun"
	"github.com/headway-go/headway/ratelimittest"
)

// quota is the emulated API's: GitHub's "core" resource, scaled down to a
// fixed window of 10 requests a second so that a run takes seconds.
var quota = ratelimittest.Quota{Name: "core", Algorithm: ratelimittest.FixedWindow, Limit: 10, Window: time.Second}

// newAPI returns the emulated GitHub API: GET /users/{login}, behind quota,
// with GitHub's rate-limit headers (x-ratelimit-limit, -remaining, -used,
// -reset, -resource) on every response. A nil clock is the real one.
func newAPI(clock ratelimittest.Clock) *ratelimittest.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{login}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"login": r.PathValue("login"), "id": 1, "type": "User"})
	})
	opts := []ratelimittest.Option{ratelimittest.WithQuota(quota), ratelimittest.WithDialect(ratelimittest.GitHub)}
	if clock != nil {
		opts = append(opts, ratelimittest.WithClock(clock))
	}
	h, err := ratelimittest.NewHandler(mux, opts...)
	if err != nil {
		panic(err)
	}
	return h
}

// A setup is one way to combine go-github with an http.Client over base.
type setup struct {
	name   string
	client func(base http.RoundTripper) *github.Client
}

// setups are the ways compared: go-github alone, on headway as a new user
// would first write it, and on headway as the README says.
var setups = []setup{
	{"go-github alone", func(base http.RoundTripper) *github.Client {
		return github.NewClient(&http.Client{Transport: base})
	}},
	{"go-github on headway, its pre-check on", func(base http.RoundTripper) *github.Client {
		return github.NewClient(&http.Client{Transport: headway.NewTransport(base)})
	}},
	{"go-github on headway (README)", readme},
}

// readme is the README's way: headway paces and retries, and go-github's
// own rate-limit check, which refuses every call locally from the moment a
// response says remaining 0 until the reset, is off. headway spends each
// window to its last request and then holds the next calls until the
// window rolls; go-github's check would fail them instead. GitHub's
// documented secondary limit on content creation, which no header
// announces, is declared (see limits.go).
func readme(base http.RoundTripper) *github.Client {
	gh := github.NewClient(&http.Client{Transport: headway.NewTransport(base, secondaryLimit)})
	gh.DisableRateLimitCheck = true // or, per call: context.WithValue(ctx, github.BypassRateLimitCheck, true)
	return gh
}

// usersGet makes calls Users.Get calls from workers goroutines through the
// client s makes over base, to the API at baseURL served by api, each
// exchange taking rtt.
func usersGet(s setup, base http.RoundTripper, baseURL string, api *ratelimittest.Handler, calls, workers int, rtt time.Duration) sdkrun.Result {
	gh := s.client(base)
	u, err := url.Parse(baseURL + "/")
	if err != nil {
		panic(err)
	}
	gh.BaseURL = u
	start := time.Now()
	res := sdkrun.Run(calls, workers, func(i int) sdkrun.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _, err := gh.Users.Get(ctx, fmt.Sprintf("user-%d", i))
		return sdkrun.Outcome{Err: err, Local: refusedLocally(err)}
	})
	res.Name = s.name
	res.Count(api.Stats())
	res.Ideal = ideal(start, calls, rtt)
	return res
}

// refusedLocally reports whether go-github refused the call itself, from
// what an earlier response said, without sending it.
func refusedLocally(err error) bool {
	var rle *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	switch {
	case errors.As(err, &rle):
		return strings.Contains(rle.Message, "not making remote request")
	case errors.As(err, &abuse):
		return strings.Contains(abuse.Message, "not making remote request")
	}
	return false
}

// ideal is the least time in which the API admits calls calls from start.
func ideal(start time.Time, calls int, rtt time.Duration) time.Duration {
	return sdkrun.Ideal(start, calls, rtt,
		func(c ratelimittest.Clock) http.Handler { return newAPI(c) },
		func(i int) *http.Request {
			return httpRequest(fmt.Sprintf("http://api.github.test/users/user-%d", i))
		})
}

func httpRequest(u string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		panic(err)
	}
	return req
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v75/github"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/examples/sdk/internal/sdkrun"
	"github.com/headway-go/headway/ratelimittest"
)

// GitHub's other limits, scaled as quota is: the search resource (30
// requests a minute, against core's 5,000 an hour) and a secondary limit
// on content creation (80 requests a minute), which GitHub documents but
// announces in no header until it refuses: a 403 with a Retry-After and a
// message.
var (
	searchQuota    = ratelimittest.Quota{Name: "search", Algorithm: ratelimittest.FixedWindow, Limit: 2, Window: time.Second}
	secondaryQuota = ratelimittest.Quota{Name: "secondary", Algorithm: ratelimittest.SlidingLog, Limit: 4, Window: time.Second}
)

// fullAPI is the emulated GitHub API with its resources and a secondary
// limit: GET /users/{login} (core), GET /search/users (search) and POST
// /repos/{owner}/{repo}/issues (core, and the secondary limit first).
type fullAPI struct {
	http.Handler
	core, search, secondary *ratelimittest.Handler
}

func newFullAPI(clock ratelimittest.Clock) *fullAPI {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{login}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"login": r.PathValue("login"), "id": 1})
	})
	mux.HandleFunc("GET /search/users", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"total_count":0,"incomplete_results":false,"items":[]}`))
	})
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"number":1}`))
	})
	limiter := func(next http.Handler, opts ...ratelimittest.Option) *ratelimittest.Handler {
		if clock != nil {
			opts = append(opts, ratelimittest.WithClock(clock))
		}
		h, err := ratelimittest.NewHandler(next, opts...)
		if err != nil {
			panic(err)
		}
		return h
	}
	a := &fullAPI{}
	a.core = limiter(mux, ratelimittest.WithQuota(quota), ratelimittest.WithDialect(ratelimittest.GitHub))
	a.search = limiter(mux, ratelimittest.WithQuota(searchQuota), ratelimittest.WithDialect(ratelimittest.GitHub))
	a.secondary = limiter(a.core, ratelimittest.WithQuota(secondaryQuota), ratelimittest.WithDialect(ratelimittest.None),
		ratelimittest.WithRejectStatus(http.StatusForbidden))
	secondary := githubSecondary(a.secondary)
	a.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/search/"):
			a.search.ServeHTTP(w, r)
		case r.Method == http.MethodPost:
			secondary.ServeHTTP(w, r)
		default:
			a.core.ServeHTTP(w, r)
		}
	})
	return a
}

// githubSecondary writes the secondary limiter's refusals as GitHub does:
// a 403 with its Retry-After and a JSON message whose documentation_url
// names the secondary rate limits (go-github's AbuseRateLimitError).
func githubSecondary(limiter http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		limiter.ServeHTTP(rec, r)
		maps.Copy(w.Header(), rec.Header())
		if rec.Code == http.StatusForbidden {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",` +
				`"documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`))
			return
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

// refused counts what the three limiters refused.
func (a *fullAPI) refused() (core, search, secondary int) {
	return int(a.core.Stats().Rejected), int(a.search.Stats().Rejected), int(a.secondary.Stats().Rejected)
}

// mixed makes users Users.Get and searches Search.Users calls, a search
// every users/searches calls, from workers goroutines through gh, whose
// BaseURL is the API's.
func mixed(gh *github.Client, users, searches, workers int) sdkrun.Result {
	every := (users + searches) / searches
	return sdkrun.Run(users+searches, workers, func(i int) sdkrun.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var err error
		if i%every == every-1 {
			_, _, err = gh.Search.Users(ctx, fmt.Sprintf("user-%d", i), nil)
		} else {
			_, _, err = gh.Users.Get(ctx, fmt.Sprintf("user-%d", i))
		}
		return sdkrun.Outcome{Err: err, Local: refusedLocally(err)}
	})
}

// createIssues makes calls Issues.Create calls from workers goroutines
// through gh.
func createIssues(gh *github.Client, calls, workers int) sdkrun.Result {
	return sdkrun.Run(calls, workers, func(i int) sdkrun.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _, err := gh.Issues.Create(ctx, "o", "r", &github.IssueRequest{Title: github.Ptr(fmt.Sprintf("issue %d", i))})
		return sdkrun.Outcome{Err: err, Local: refusedLocally(err)}
	})
}

// secondaryLimit is the README's declaration of GitHub's documented
// secondary limit on content creation, scaled as the emulated API's is
// (80 a minute on GitHub).
var secondaryLimit = headway.WithQuota("POST /repos/{owner}/{repo}/issues", secondaryQuota.Limit, secondaryQuota.Window)

// onHeadway is the README's go-github client over base (readme), with
// opts, of the API at baseURL.
func onHeadway(base http.RoundTripper, baseURL string, opts ...headway.Option) *github.Client {
	gh := github.NewClient(&http.Client{Transport: headway.NewTransport(base, opts...)})
	gh.DisableRateLimitCheck = true
	gh.BaseURL, _ = url.Parse(baseURL + "/")
	return gh
}

// issuesIdeal is the least time in which the secondary limit admits calls
// Issues.Create calls from start.
func issuesIdeal(start time.Time, calls int, rtt time.Duration) time.Duration {
	return sdkrun.Ideal(start, calls, rtt, func(c ratelimittest.Clock) http.Handler { return newFullAPI(c).secondary },
		func(i int) *http.Request {
			req, err := http.NewRequest(http.MethodPost, "http://api.github.test/repos/o/r/issues", nil)
			if err != nil {
				panic(err)
			}
			return req
		})
}

// Command apisim serves an emulated rate-limited API, for trying clients by
// hand and for black-box tests.
//
// Every path is the API; GET /_stats returns the counters as JSON
// ({"served": n, "rejected": n}). At start it logs one line saying what it
// enforces.
//
//	go run ./examples/apisim -algorithm token-bucket -limit 5 -window 1s -burst 10 -dialect github
//	go run ./examples/apisim -algorithm sliding-log -limit 100 -window 1m -retry-after date -errors-every 20
//	go run ./examples/apisim -algorithm sliding-counter -limit 100 -window 1m -dialect x-ratelimit -retry-after full-window
//	go run ./examples/apisim -limit 100 -window 1h -anchor first-request -dialect openai -coarse-resets
//	go run ./examples/apisim -algorithm sliding-counter -limit 5 -window 1s -anchor first-request -dialect x-ratelimit -floor-resets -rounded-counts -window-end-resets -retry-after full-window -truncated-retry-after
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/headway-go/headway/ratelimittest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stderr, nil)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, new(flagError)):
		os.Exit(2) // the flag package has printed the error and the usage
	case errors.As(err, new(usageError)):
		fmt.Fprintln(os.Stderr, "apisim:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "apisim:", err)
		os.Exit(1)
	}
}

// usageError is a bad flag value; flagError, one the flag package reported.
type (
	usageError struct{ error }
	flagError  struct{ error }
)

// settings are the parsed flags.
type settings struct {
	addr string
	opts []ratelimittest.Option
	// stats lists failed and dropped in /_stats too (when faults are on).
	faulty bool
}

// policyList is the repeatable -policy flag.
type policyList []string

func (p *policyList) String() string     { return strings.Join(*p, " ") }
func (p *policyList) Set(s string) error { *p = append(*p, s); return nil }

// durationFlag is a duration flag that also takes plain seconds ("60").
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err == nil {
		*f.d = d
	}
	return err
}

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(n) || math.Abs(n) > 1e9 { // Inf included
			return 0, fmt.Errorf("%q: want seconds between -1e9 and 1e9", s)
		}
		return time.Duration(math.Round(n * float64(time.Second))), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q: want a duration such as 1s, 500ms or 1m, or seconds", s)
	}
	return d, nil
}

func parseFlags(args []string, out io.Writer) (*settings, error) {
	fs := flag.NewFlagSet("apisim", flag.ContinueOnError)
	fs.SetOutput(out)
	var (
		window, latency, skew time.Duration = time.Second, 0, 0
		extra                 policyList
	)
	addr := fs.String("addr", "127.0.0.1:8080", "`address` to listen on (port 0 picks a free port)")
	algorithm := fs.String("algorithm", "fixed-window", "fixed-window|sliding-log|sliding-counter|token-bucket|leaky-bucket|gcra")
	limit := fs.Int("limit", 10, "requests admitted per window (for the buckets and gcra: the refill rate)")
	fs.Var(durationFlag{&window}, "window", "the limit's `period` (a Go duration, or seconds)")
	burst := fs.Int("burst", 0, "bucket capacity / gcra burst (default: the limit)")
	dialect := fs.String("dialect", "ietf", "response headers: ietf|ietf-draft-07|ietf-draft-04|x-ratelimit|github|openai|anthropic|discord|shopify|none (comma-separated for several)")
	retryAfter := fs.String("retry-after", "seconds", "Retry-After on 429: seconds|date|none, or full-window: delay-seconds of the refusing policy's whole window, whatever the true wait (go-chi/httprate)")
	anchor := fs.String("anchor", "clock", "when fixed windows start: clock (aligned), first-request (at each key's first request, as Redis INCR+EXPIRE; fixed-window or sliding-counter) or start (on from each key's first request, as sethvargo/go-limiter; fixed-window only)")
	partition := fs.String("partition", "shared", "quota per: shared|addr|header:NAME")
	status := fs.Int("status", 429, "status of a rejection")
	fs.Var(&extra, "policy", "another policy enforced too, as `LIMIT/WINDOW` (e.g. 1000/24h); repeatable")
	tokens := fs.Int("tokens", 0, "tokens per window for the openai and anthropic dialects (default 1000 x limit)")
	tokenCost := fs.Int("token-cost", 100, "tokens a request costs unless it sends X-Tokens: n (anthropic: X-Input-Tokens, and X-Output-Tokens defaulting to a fifth)")
	errEvery := fs.Int("errors-every", 0, "fault: of every N admitted requests, the last -errors-burst get a 5xx")
	errBurst := fs.Int("errors-burst", 1, "fault: length of each 5xx burst")
	errStatus := fs.Int("error-status", 503, "fault: status of the injected errors")
	dropEvery := fs.Int("drop-every", 0, "fault: close the connection of every N-th admitted request")
	fs.Var(durationFlag{&latency}, "latency", "fault: added latency per request")
	misleading := fs.Bool("misleading", false, "fault: also enforce a looser 60x policy and describe only the looser one on success")
	missingEvery := fs.Int("missing-every", 0, "fault: leave the rate-limit headers off every N-th response")
	fs.Var(durationFlag{&skew}, "date-skew", "fault: skew of the server's Date and absolute times (e.g. -90s)")
	coarse := fs.Bool("coarse-resets", false, "quirk: resets in whole seconds, rounded up, in the openai and discord dialects too")
	resetOne := fs.Bool("reset-always-one", false, "quirk: every reset the dialects write says 1 second, whatever the truth")
	floorResets := fs.Bool("floor-resets", false, "quirk: resets written as an instant in whole seconds (and date Retry-Afters) rounded down, as go-chi/httprate and sethvargo/go-limiter write them")
	rounded := fs.Bool("rounded-counts", false, "quirk: a sliding counter rounds its weighted count to the nearest unit before comparing it with the limit, as go-chi/httprate does (it admits less)")
	endResets := fs.Bool("window-end-resets", false, "quirk: a sliding counter's reset is its current window's end, as go-chi/httprate writes it")
	truncRA := fs.Bool("truncated-retry-after", false, "quirk: Retry-After's seconds rounded down, 0 under a second (with -retry-after full-window, go-chi/httprate's)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, flagError{err}
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	bad := func(err error) (*settings, error) { return nil, usageError{err} }

	alg, err := ratelimittest.ParseAlgorithm(*algorithm)
	if err != nil {
		return bad(err)
	}
	anc, err := ratelimittest.ParseAnchor(*anchor)
	if err != nil {
		return bad(err)
	}
	s := &settings{addr: *addr}
	primary := ratelimittest.Quota{Algorithm: alg, Limit: *limit, Window: window, Burst: *burst, Anchor: anc}
	if *misleading {
		primary.Name = "short"
	}
	s.opts = append(s.opts, ratelimittest.WithQuota(primary))
	if *misleading {
		s.opts = append(s.opts, ratelimittest.WithQuota(ratelimittest.Quota{
			Name: "long", Algorithm: alg, Limit: 60 * *limit, Window: 60 * window, Burst: 60 * *burst, Anchor: anc,
		}))
	}
	for _, e := range extra {
		l, w, ok := strings.Cut(e, "/")
		n, err1 := strconv.Atoi(strings.TrimSpace(l))
		d, err2 := parseDuration(w)
		if !ok || err1 != nil || err2 != nil {
			return bad(fmt.Errorf("-policy %q: want LIMIT/WINDOW such as 1000/24h", e))
		}
		s.opts = append(s.opts, ratelimittest.WithQuota(ratelimittest.Quota{Algorithm: alg, Limit: n, Window: d, Anchor: anc}))
	}

	var dialects []ratelimittest.Dialect
	metersTokens, anthropic := false, false
	for _, name := range strings.Split(*dialect, ",") {
		d, err := ratelimittest.ParseDialect(name)
		if err != nil {
			return bad(err)
		}
		if d != ratelimittest.None {
			dialects = append(dialects, d)
		}
		anthropic = anthropic || d == ratelimittest.Anthropic
		metersTokens = metersTokens || anthropic || d == ratelimittest.OpenAI
	}
	s.opts = append(s.opts, ratelimittest.WithDialect(dialects...))
	if metersTokens {
		t := *tokens
		if t == 0 {
			t = 1000 * *limit
		}
		if t < 0 || *tokenCost < 0 {
			return bad(fmt.Errorf("-tokens %d, -token-cost %d: must not be negative", t, *tokenCost))
		}
		// Tokens are metered by a bucket whatever -algorithm says, as the
		// AI APIs do; a sliding log would store an entry per token.
		s.opts = append(s.opts, ratelimittest.WithQuota(ratelimittest.Quota{
			Name: "tokens", Algorithm: ratelimittest.TokenBucket, Limit: t, Window: window, Unit: ratelimittest.UnitTokens,
			Cost: ratelimittest.CostFromHeader("X-Tokens", *tokenCost),
		}))
		if anthropic {
			// Anthropic also meters input and output tokens; output
			// limits are typically a fifth of input ones.
			s.opts = append(s.opts,
				ratelimittest.WithQuota(ratelimittest.Quota{
					Name: "input-tokens", Algorithm: ratelimittest.TokenBucket, Limit: t, Window: window, Unit: ratelimittest.UnitInputTokens,
					Cost: ratelimittest.CostFromHeader("X-Input-Tokens", *tokenCost),
				}),
				ratelimittest.WithQuota(ratelimittest.Quota{
					Name: "output-tokens", Algorithm: ratelimittest.TokenBucket, Limit: max(1, t/5), Window: window, Unit: ratelimittest.UnitOutputTokens,
					Cost: ratelimittest.CostFromHeader("X-Output-Tokens", *tokenCost/5),
				}))
		}
	}

	ra := ratelimittest.RetryAfterSeconds
	if normal := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(*retryAfter)), "_", "-"); normal == "full-window" || normal == "window" {
		s.opts = append(s.opts, ratelimittest.WithRetryAfterFullWindow())
	} else if ra, err = ratelimittest.ParseRetryAfterForm(*retryAfter); err != nil {
		return bad(fmt.Errorf("-retry-after %q: want seconds, date, none or full-window", *retryAfter))
	}
	s.opts = append(s.opts, ratelimittest.WithRetryAfter(ra), ratelimittest.WithRejectStatus(*status))

	switch p := strings.TrimSpace(*partition); {
	case p == "shared" || p == "":
	case p == "addr" || p == "ip" || p == "client":
		s.opts = append(s.opts, ratelimittest.WithPartition(ratelimittest.ByClientAddr()))
	case strings.HasPrefix(p, "header:") && len(p) > len("header:"):
		s.opts = append(s.opts, ratelimittest.WithPartition(ratelimittest.ByHeader(p[len("header:"):])))
	default:
		return bad(fmt.Errorf("-partition %q: want shared, addr or header:NAME", p))
	}

	if *errEvery != 0 {
		s.opts = append(s.opts, ratelimittest.WithServerErrors(ratelimittest.ServerErrors{Every: *errEvery, Burst: *errBurst, Status: *errStatus}))
		s.faulty = true
	}
	if *dropEvery != 0 {
		s.opts = append(s.opts, ratelimittest.WithDroppedConnections(*dropEvery))
		s.faulty = true
	}
	if latency != 0 {
		s.opts = append(s.opts, ratelimittest.WithLatency(latency))
	}
	if *missingEvery != 0 {
		s.opts = append(s.opts, ratelimittest.WithMissingHeaders(*missingEvery))
	}
	if skew != 0 {
		s.opts = append(s.opts, ratelimittest.WithDateSkew(skew))
	}
	// The switches that each turn one misbehaviour or quirk on.
	for _, q := range []struct {
		on  bool
		opt ratelimittest.Option
	}{
		{*misleading, ratelimittest.WithMisleadingHeaders()},
		{*coarse, ratelimittest.WithCoarseResets()},
		{*resetOne, ratelimittest.WithResetAlwaysOne()},
		{*floorResets, ratelimittest.WithFloorResets()},
		{*rounded, ratelimittest.WithRoundedCounts()},
		{*endResets, ratelimittest.WithWindowEndResets()},
		{*truncRA, ratelimittest.WithTruncatedRetryAfter()},
	} {
		if q.on {
			s.opts = append(s.opts, q.opt)
		}
	}
	return s, nil
}

// run serves until ctx is done. ready, if not nil, gets the listening
// address once the server accepts connections.
func run(ctx context.Context, args []string, logw io.Writer, ready func(addr string)) error {
	s, err := parseFlags(args, logw)
	if err != nil {
		return err
	}
	h, err := ratelimittest.NewHandler(nil, s.opts...)
	if err != nil {
		return usageError{err}
	}
	// Not a ServeMux: it would redirect paths such as //v1/x instead of
	// letting the API answer them.
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/_stats" {
			h.ServeHTTP(w, r)
			return
		}
		// served counts every admitted request; with faults on, failed
		// and dropped say how many of them a fault then spoiled.
		st := h.Stats()
		w.Header().Set("Content-Type", "application/json")
		if s.faulty {
			fmt.Fprintf(w, `{"served": %d, "rejected": %d, "failed": %d, "dropped": %d}`+"\n", st.Served, st.Rejected, st.Failed, st.Dropped)
			return
		}
		fmt.Fprintf(w, `{"served": %d, "rejected": %d}`+"\n", st.Served, st.Rejected)
	})

	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	logger := log.New(logw, "", log.LstdFlags)
	logger.Printf("apisim: serving http://%s, enforcing %s", ln.Addr(), h)
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Command demo shows, in one run and without the network, why headway
// exists: it starts emulated rate-limited APIs on loopback (package
// ratelimittest) and sends the same workload to each through three clients,
// bare net/http, go-retryablehttp with its defaults, and headway with its
// defaults, then prints a table per server (requests, attempts, 429s,
// failures, wall time against the server's ideal) and a timeline of what
// each client sent per 100 ms.
//
//	go run ./examples/demo             # the tour, about 11 seconds
//	go run ./examples/demo -svg demo.svg
//
// Flags: -n requests per client (default 120), -c workers (8), -limit
// requests per second each server admits (20), -svg FILE to write the
// timelines as an SVG chart, -quiet to print only the tables.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	retryablehttp "github.com/hashicorp/go-retryablehttp"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/ratelimittest"
)

// server is one of the emulated APIs.
type server struct {
	name string
	note string
	opts func(limit int) []ratelimittest.Option
}

var servers = []server{
	{"fixed window, IETF RateLimit headers", "quota returns whole each second; RateLimit-Policy and RateLimit fields",
		func(limit int) []ratelimittest.Option {
			return []ratelimittest.Option{ratelimittest.WithDialect(ratelimittest.IETF),
				ratelimittest.WithQuota(ratelimittest.Quota{Algorithm: ratelimittest.FixedWindow, Limit: limit, Window: time.Second})}
		}},
	{"sliding window, X-RateLimit headers", "a weighted count of this window and the last; X-RateLimit-Limit/-Remaining/-Reset",
		func(limit int) []ratelimittest.Option {
			return []ratelimittest.Option{ratelimittest.WithDialect(ratelimittest.XRateLimit),
				ratelimittest.WithQuota(ratelimittest.Quota{Algorithm: ratelimittest.SlidingCounter, Limit: limit, Window: time.Second})}
		}},
	{"token bucket, X-RateLimit headers", "a burst, then a steady refill; X-RateLimit-Limit/-Remaining/-Reset",
		func(limit int) []ratelimittest.Option {
			return []ratelimittest.Option{ratelimittest.WithDialect(ratelimittest.XRateLimit),
				ratelimittest.WithQuota(ratelimittest.Quota{Algorithm: ratelimittest.TokenBucket, Limit: limit, Window: time.Second})}
		}},
	{"sliding log, no headers at all", "like nginx limit_req: a bare 429, no Retry-After, no counters",
		func(limit int) []ratelimittest.Option {
			return []ratelimittest.Option{ratelimittest.WithDialect(ratelimittest.None),
				ratelimittest.WithRetryAfter(ratelimittest.RetryAfterNone),
				ratelimittest.WithQuota(ratelimittest.Quota{Algorithm: ratelimittest.SlidingLog, Limit: limit, Window: time.Second})}
		}},
}

// client is one of the clients compared.
type client struct {
	name string
	make func(rt http.RoundTripper) func(*http.Request) (*http.Response, error)
}

var clients = []client{
	{"net/http", func(rt http.RoundTripper) func(*http.Request) (*http.Response, error) {
		return (&http.Client{Transport: rt}).Do
	}},
	{"go-retryablehttp", func(rt http.RoundTripper) func(*http.Request) (*http.Response, error) {
		c := retryablehttp.NewClient()
		c.Logger = nil
		c.HTTPClient = &http.Client{Transport: rt}
		return func(req *http.Request) (*http.Response, error) {
			r, err := retryablehttp.FromRequest(req)
			if err != nil {
				return nil, err
			}
			return c.Do(r)
		}
	}},
	{"headway", func(rt http.RoundTripper) func(*http.Request) (*http.Response, error) {
		return (&http.Client{Transport: headway.NewTransport(rt)}).Do
	}},
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// config is the parsed command line.
type config struct {
	n, c, limit int
	svg         string
	quiet       bool
	timeout     time.Duration
}

func run(args []string, stdout, stderr io.Writer) int {
	var cfg config
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.n, "n", 120, "requests per client")
	fs.IntVar(&cfg.c, "c", 8, "concurrent workers per client")
	fs.IntVar(&cfg.limit, "limit", 20, "requests per second each server admits")
	fs.StringVar(&cfg.svg, "svg", "", "write the timelines as an SVG chart to `file`")
	fs.BoolVar(&cfg.quiet, "quiet", false, "print only the tables")
	fs.DurationVar(&cfg.timeout, "timeout", 20*time.Second, "timeout of each request")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if cfg.n < 1 || cfg.c < 1 || cfg.limit < 1 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "demo: -n, -c and -limit must be at least 1, and there are no arguments")
		return 2
	}

	fmt.Fprintf(stdout, "headway demo: %d GETs from %d workers per client, into APIs that admit %d per second.\n",
		cfg.n, cfg.c, cfg.limit)
	fmt.Fprintln(stdout, "Every client has its own server (its own quota); all run at once, on loopback.")
	results := runAll(cfg)
	for si, s := range servers {
		fmt.Fprintf(stdout, "\n== %s (%s)\n", s.name, s.note)
		printTable(stdout, results[si], cfg)
		if !cfg.quiet {
			printTimelines(stdout, results[si], cfg)
		}
	}
	fmt.Fprintln(stdout, "\nideal: the least time in which the server could have admitted every request.")
	if cfg.svg != "" {
		if err := writeSVG(cfg.svg, results, cfg); err != nil {
			fmt.Fprintf(stderr, "demo: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "timelines written to %s\n", cfg.svg)
	}
	return 0
}

// result is what one client did against one server.
type result struct {
	client             string
	attempts, throttle int
	failed             int
	wall, ideal        time.Duration
	sends              []send // every attempt the server saw
}

// send is one attempt, as the server saw it.
type send struct {
	at      time.Duration // since the run's start
	refused bool
}

// runAll runs every client against its own copy of every server, at once.
func runAll(cfg config) [][]result {
	out := make([][]result, len(servers))
	var wg sync.WaitGroup
	start := time.Now()
	for si, s := range servers {
		out[si] = make([]result, len(clients))
		for ci, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[si][ci] = runOne(cfg, s, c, start)
			}()
		}
	}
	wg.Wait()
	return out
}

// runOne sends the workload to a fresh server through one client.
func runOne(cfg config, s server, c client, start time.Time) result {
	res := result{client: c.name}
	var mu sync.Mutex
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	srv := ratelimittest.NewUnstartedServer(api, s.opts(cfg.limit)...)
	srv.Config.ErrorLog = nil
	// Record what the server sees, 429s included, around its handler.
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: 200}
		inner.ServeHTTP(rec, r)
		mu.Lock()
		res.sends = append(res.sends, send{at: time.Since(start), refused: rec.code == http.StatusTooManyRequests})
		mu.Unlock()
	})
	srv.Start()
	defer srv.Close()

	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = cfg.c
	defer base.CloseIdleConnections()
	do := c.make(base)

	jobs := make(chan int)
	var wg sync.WaitGroup
	runStart := time.Now()
	for range cfg.c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/items", nil)
				resp, err := do(req)
				ok := err == nil && resp.StatusCode/100 == 2
				if resp != nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				cancel()
				if !ok {
					mu.Lock()
					res.failed++
					mu.Unlock()
				}
			}
		}()
	}
	for i := range cfg.n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	res.wall = time.Since(runStart)
	st := srv.Stats()
	res.attempts, res.throttle = int(st.Served+st.Rejected), int(st.Rejected)
	res.ideal = ideal(cfg, s, runStart)
	return res
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// ideal returns the least time in which a server of kind s admits cfg.n
// requests: its first burst at once, then its rate (cfg.limit per second,
// whole windows for a window), on a clock that starts when the run did (so
// that windows have the same phase).
func ideal(cfg config, s server, start time.Time) time.Duration {
	clock := ratelimittest.NewManualClock(start)
	h, err := ratelimittest.NewHandler(http.NotFoundHandler(), append(s.opts(cfg.limit), ratelimittest.WithClock(clock))...)
	if err != nil {
		panic(err)
	}
	for admitted := 0; admitted < cfg.n; {
		rec := &discard{h: http.Header{}}
		req, _ := http.NewRequest(http.MethodGet, "http://api/items", nil)
		h.ServeHTTP(rec, req)
		if rec.code/100 == 2 || rec.code == 0 || rec.code == 404 {
			admitted++
			continue
		}
		clock.Advance(time.Millisecond)
	}
	return clock.Now().Sub(start)
}

// discard is a ResponseWriter that keeps only the status.
type discard struct {
	h    http.Header
	code int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(code int)        { d.code = code }

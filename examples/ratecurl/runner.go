package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/redisstore"
)

// runner sends the requests through one shared headway client.
type runner struct {
	o      *options
	con    *console
	stdout io.Writer // receives the body of a single request without -json
	client *http.Client
	base   *http.Transport
	rdb    *redis.Client // -redis
}

func newRunner(o *options, con *console, stdout io.Writer) *runner {
	r := &runner{o: o, con: con, stdout: stdout}
	// A base transport of our own, with an idle pool as large as the
	// worker count, so that each worker keeps its connection.
	r.base = http.DefaultTransport.(*http.Transport).Clone()
	r.base.MaxIdleConnsPerHost = max(min(o.c, o.n), http.DefaultMaxIdleConnsPerHost)
	opts := o.headwayOptions()
	if o.verbose {
		opts = append(opts, headway.WithOnRetry(r.onRetry), headway.WithOnWait(r.onWait))
	}
	if o.redis != nil {
		opts = append(opts, headway.WithStore(r.redisStore()))
	}
	r.client = &http.Client{Transport: headway.NewTransport(r.base, opts...)}
	return r
}

// close releases the client's idle connections, and Redis's.
func (r *runner) close() {
	r.client.CloseIdleConnections()
	if r.rdb != nil {
		r.rdb.Close()
	}
}

// redisStore returns the pacing store of -redis: the state in Redis, shared
// with every ratecurl that uses it; this process's alone while Redis is
// slow or down.
func (r *runner) redisStore() *redisstore.Store {
	ro := *r.o.redis
	// The store bounds each call by -redis-timeout; let go-redis drop a
	// connection it gave up on at once rather than at its read timeout.
	ro.ContextTimeoutEnabled = true
	redis.SetLogger(quietRedis{}) // it would log each failed dial on stderr
	r.rdb = redis.NewClient(&ro)
	opts := []redisstore.Option{redisstore.WithTimeout(r.o.redisWait)}
	if r.o.verbose {
		opts = append(opts, redisstore.WithOnSwitch(r.onSwitch))
	}
	return redisstore.New(r.rdb, opts...)
}

// quietRedis is a go-redis logger that says nothing: -v reports what
// matters, the switches.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// onSwitch prints one line each time the pacing state moves between Redis
// and this process, for -v.
func (r *runner) onSwitch(ev redisstore.Event) {
	if ev.To == redisstore.Shared {
		r.con.printf("ratecurl: pacing state: redis is back after %v, shared again", ev.Outage.Round(time.Millisecond))
		return
	}
	r.con.printf("ratecurl: pacing state: redis unavailable (%v), pacing alone until it answers", ev.Err)
}

// result is the outcome of one request.
type result struct {
	id         int // from 1
	status     int // the final response's status, 0 if there was none
	statusText string
	err        error
	attempts   int
	retries    int
	throttled  int
	waited     time.Duration
	took       time.Duration
}

// ok reports whether the request ended with a response that is neither a
// 429 nor a 5xx, and no error.
func (res *result) ok() bool {
	return res.err == nil && res.status != 0 &&
		res.status != http.StatusTooManyRequests && (res.status < 500 || res.status > 599)
}

// runAll sends o.n requests from o.c workers and collects what happened.
// Cancelling ctx stops sending; requests in flight end with an error.
func (r *runner) runAll(ctx context.Context) *summary {
	sum := newSummary()
	workers := min(r.o.c, r.o.n)
	jobs := make(chan int)
	results := make(chan result, workers)

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for id := range jobs {
				results <- r.do(ctx, id)
			}
		})
	}
	go func() {
		defer func() {
			close(jobs)
			wg.Wait()
			close(results)
		}()
		for id := 1; id <= r.o.n; id++ {
			if ctx.Err() != nil {
				return
			}
			select {
			case jobs <- id:
			case <-ctx.Done():
				return
			}
		}
	}()

	p := newProgress(r.con, r.o.n)
	for res := range results {
		sum.add(res)
		r.report(&res)
		p.update(sum)
	}
	p.finish(sum)
	sum.finish(ctx.Err() != nil)
	return sum
}

// requestIDKey carries a request's number in its context, for -v.
type requestIDKey struct{}

// do sends request id and reads its response to the end.
func (r *runner) do(ctx context.Context, id int) result {
	res := result{id: id}
	if r.o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.o.timeout)
		defer cancel()
	}
	var st headway.Stats
	ctx = headway.ContextWithStats(ctx, &st)
	for _, c := range r.o.cost {
		ctx = headway.ContextWithCost(ctx, c.unit, c.n)
	}
	ctx = context.WithValue(ctx, requestIDKey{}, id)

	start := time.Now()
	req, err := r.newRequest(ctx)
	if err == nil {
		var resp *http.Response
		resp, err = r.client.Do(req)
		if err == nil {
			res.status, res.statusText = resp.StatusCode, resp.Status
			err = r.consume(resp)
		}
	}
	res.took = time.Since(start)
	res.err = err

	// Do has returned and the body is closed: headway is done with st.
	res.attempts, res.retries, res.throttled, res.waited = st.Attempts, st.Retries, st.Throttled, st.Waited
	return res
}

// newRequest builds one request. The body is a fresh bytes.Reader, so
// http.NewRequestWithContext sets GetBody and headway can replay it.
func (r *runner) newRequest(ctx context.Context) (*http.Request, error) {
	var body io.Reader
	if r.o.hasBody {
		body = bytes.NewReader(r.o.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.o.method, r.o.url, body)
	if err != nil {
		return nil, err
	}
	req.Header = r.o.header.Clone()
	if r.o.host != "" {
		req.Host = r.o.host
	}
	return req, nil
}

// consume reads the response body to the end, to stdout for a single
// request without -json and to nowhere otherwise, so that the connection is
// reused, and closes it.
func (r *runner) consume(resp *http.Response) error {
	defer resp.Body.Close()
	if r.o.n != 1 || r.o.json {
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return fmt.Errorf("reading the response body: %w", err)
		}
		return nil
	}
	w := &errWriter{w: r.stdout}
	if _, err := io.Copy(w, resp.Body); err != nil {
		if w.err != nil {
			return fmt.Errorf("writing the response body: %w", err)
		}
		return fmt.Errorf("reading the response body: %w", err)
	}
	return nil
}

// errWriter remembers its writer's error, to tell it from a read error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

// onRetry prints one line per retry, for -v.
func (r *runner) onRetry(ev headway.RetryEvent) {
	var b bytes.Buffer
	b.WriteString("ratecurl: ")
	if id, ok := ev.Request.Context().Value(requestIDKey{}).(int); ok && r.o.n > 1 {
		fmt.Fprintf(&b, "request %d: ", id)
	}
	fmt.Fprintf(&b, "attempt %d ", ev.Attempt)
	if ev.Err != nil {
		fmt.Fprintf(&b, "failed: %v", ev.Err)
	} else {
		fmt.Fprintf(&b, "got %d %s", ev.StatusCode, http.StatusText(ev.StatusCode))
	}
	if ev.HasRetryAfter {
		fmt.Fprintf(&b, ", retry-after %v", ev.RetryAfter)
	} else {
		b.WriteString(", no retry-after")
	}
	fmt.Fprintf(&b, "; waiting %v before attempt %d", ev.Wait.Round(time.Microsecond), ev.Attempt+1)
	r.con.printf("%s", b.String())
}

// onWait prints one line each time the pacing layer holds a request back,
// for -v: how long and why.
func (r *runner) onWait(ev headway.WaitEvent) {
	var b bytes.Buffer
	b.WriteString("ratecurl: ")
	if id, ok := ev.Request.Context().Value(requestIDKey{}).(int); ok && r.o.n > 1 {
		fmt.Fprintf(&b, "request %d: ", id)
	}
	if ev.Definite {
		fmt.Fprintf(&b, "holding back %v: %s", ev.Wait.Round(time.Microsecond), ev.Reason)
	} else {
		fmt.Fprintf(&b, "holding back up to %v: %s", ev.Wait.Round(time.Microsecond), ev.Reason)
	}
	r.con.printf("%s", b.String())
}

// report prints what stderr should say about one finished request: its
// error, its failed status when it was the only request, and with -v every
// outcome.
func (r *runner) report(res *result) {
	prefix := "ratecurl: "
	if r.o.n > 1 {
		prefix = fmt.Sprintf("ratecurl: request %d: ", res.id)
	}
	switch {
	case res.err != nil:
		r.con.errorf("%s%s", prefix, errorText(res.err))
		if !r.o.verbose {
			return
		}
	case !res.ok() && r.o.n == 1:
		r.con.printf("%s%s %s: %s", prefix, r.o.method, r.o.url, res.statusText)
	}
	if r.o.verbose {
		outcome := res.statusText
		if res.err != nil {
			outcome = "error"
			if res.status != 0 {
				outcome = res.statusText + " then error"
			}
		}
		r.con.printf("%s%s after %d attempt%s (%d throttled), waited %v, took %v", prefix, outcome,
			res.attempts, plural(res.attempts), res.throttled,
			res.waited.Round(time.Microsecond), res.took.Round(time.Microsecond))
	}
}

// errorText describes a request's error for stderr. A *RateLimitError says
// everything itself; the *url.Error around it only repeats the URL.
func errorText(err error) string {
	var rle *headway.RateLimitError
	if errors.As(err, &rle) {
		return rle.Error()
	}
	return err.Error()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

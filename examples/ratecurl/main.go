// Command ratecurl sends an HTTP request, once or many times, through
// headway: requests are paced before they are sent and retried when that is
// safe and useful, and ratecurl reports what headway did.
//
//	ratecurl [flags] URL
//
// With -n 1 (the default) it prints the response body like curl. With
// -n > 1 it discards the bodies and prints a summary on stderr. With -json
// it prints one JSON object on stdout and nothing else:
//
//	ratecurl -json -n 300 -c 8 https://api.example.com/items
//	{"requests":300,"succeeded":298,"failed":2,"errors":0,"attempts":311,...}
//
// With -explain it sends nothing: it reads one raw response head (a status
// line and header lines, as curl -i or -v shows them) on stdin and prints
// one JSON object saying what headway reads in its rate-limit headers:
//
//	ratecurl -explain < head.txt
//	{"status":429,"dialects":["ietf-draft-08"],"retry_after_seconds":2,
//	 "policies":[{"name":"burst","limit":100,"remaining":0,"window_seconds":60,"reset_seconds":30,"unit":"requests"}]}
//
// Times are relative to the head's Date header when it has one, so a head
// captured long ago is explained as it was meant when it was sent.
//
// With -redis, several ratecurl processes that call one API share their
// pacing state through Redis (package redisstore) and pace as one client
// against its quota; if Redis is slow or down, each paces alone until it
// answers again (-v says when):
//
//	ratecurl -redis redis://localhost:6379 -json -n 100 -c 8 https://api.example.com/items
//
// For the APIs of OpenAI, Anthropic and the like, -cost declares each
// request's tokens (headway.ContextWithCost), -H takes a secret from the
// environment without putting it on the command line, and -body-file sends a
// JSON request as it is:
//
//	ratecurl -n 50 -c 4 -cost tokens=900 -H 'Authorization: Bearer ${OPENAI_API_KEY}' \
//		-body-file chat.json https://api.openai.com/v1/chat/completions
//
// The exit status is 0 when every request ended with a response that is
// neither a 429 nor a 5xx, 1 otherwise, and 2 on bad usage.
//
// Run ratecurl -h for the flags.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/headway-go/headway/internal/explain"
)

// Exit statuses.
const (
	exitOK     = 0 // every request ended with a response neither 429 nor 5xx
	exitFailed = 1 // some request did not
	exitUsage  = 2 // bad flags or arguments
)

func main() {
	// The first Ctrl-C stops sending and reports what happened so far; once
	// it has arrived the default behaviour is back, so a second one kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }()
	os.Exit(runContext(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is ratecurl without signal handling: it parses args, sends the
// requests and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdin, stdout, stderr)
}

// runContext is run with a context whose cancellation (Ctrl-C in main)
// stops sending new requests and cancels those in flight; the summary of
// what was done is still printed.
func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o, err := parseArgs(args, stdin)
	if err != nil {
		return usageFailure(err, stderr)
	}
	if o.explain {
		return explainHead(stdin, stdout, stderr, time.Now())
	}

	con := newConsole(stderr, isTerminal(stderr))
	r := newRunner(o, con, stdout)
	defer r.close()

	sum := r.runAll(ctx)

	switch {
	case o.json:
		if err := writeJSON(stdout, sum.report()); err != nil {
			con.printf("ratecurl: writing the report: %v", err)
			return exitFailed
		}
	case o.n > 1:
		con.printf("%s", sum.text())
	}
	if sum.allSucceeded(o.n) {
		return exitOK
	}
	return exitFailed
}

// explainHead is ratecurl -explain: it reads a response head on stdin and
// prints the JSON report of its rate-limit headers. now stands for the time
// the response arrived, for heads without a Date header.
func explainHead(stdin io.Reader, stdout, stderr io.Writer, now time.Time) int {
	if stdin == nil {
		fmt.Fprintln(stderr, "ratecurl: -explain: no standard input")
		return exitFailed
	}
	rep, err := explain.Explain(stdin, now)
	if err != nil {
		fmt.Fprintf(stderr, "ratecurl: -explain: %v\n", err)
		return exitFailed
	}
	b, err := json.Marshal(rep)
	if err == nil {
		_, err = stdout.Write(append(b, '\n'))
	}
	if err != nil {
		fmt.Fprintf(stderr, "ratecurl: -explain: writing the report: %v\n", err)
		return exitFailed
	}
	return exitOK
}

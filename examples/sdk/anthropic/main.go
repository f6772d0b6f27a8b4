// Command anthropic runs anthropic-sdk-go (v2) against an emulated
// Anthropic API on loopback, in real time: Messages requests from several
// goroutines into requests, input tokens and output tokens quotas with
// Anthropic's anthropic-ratelimit-* headers, through anthropic-sdk-go alone
// (its own two retries), on headway without declaring the calls' tokens,
// and as the README says (the SDK's retries off, each call's input and
// output tokens declared with headway.ContextWithCost).
//
//	go run ./examples/sdk/anthropic -n 20
//
// Its test runs the same in virtual time, with more calls.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/headway-go/headway/examples/sdk/internal/sdkrun"
)

func main() {
	calls := flag.Int("n", 20, "Messages requests per client")
	workers := flag.Int("c", 8, "goroutines")
	flag.Parse()
	if *calls < 1 || *workers < 1 {
		fmt.Fprintln(os.Stderr, "anthropic: -n and -c must be at least 1")
		os.Exit(2)
	}
	fmt.Printf("%d Messages requests from %d goroutines; the emulated API: %s\n", *calls, *workers, newAPI(nil))
	for _, vary := range []bool{false, true} {
		if vary {
			fmt.Println("\nprompts of 400 to 5,180 characters (100 to 1,295 input tokens)")
		} else {
			fmt.Println("\nprompts of 2,400 characters (600 input tokens)")
		}
		fmt.Println(sdkrun.Header)
		for _, s := range setups {
			api := newAPI(nil)
			srv := httptest.NewServer(api)
			base := http.DefaultTransport.(*http.Transport).Clone()
			fmt.Println(messages(s, base, srv.URL, api, *calls, *workers, 0, vary))
			base.CloseIdleConnections()
			srv.Close()
		}
	}
}

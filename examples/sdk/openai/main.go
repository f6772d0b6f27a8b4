// Command openai runs openai-go (v3) against an emulated OpenAI API on
// loopback, in real time. First, chat completions from several goroutines
// into a requests quota and a tokens quota with OpenAI's
// x-ratelimit-*-requests and -tokens headers: through openai-go alone (its
// own two retries), on headway without declaring the calls' tokens, and as
// the README says (openai-go's retries off, each call's tokens declared
// with headway.ContextWithCost). Then a backend that fails every call
// (500s, then dropped connections): how many requests each call costs it
// with openai-go's retries on, alone and on headway.
//
//	go run ./examples/sdk/openai -n 20
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
	calls := flag.Int("n", 20, "chat completions per client")
	workers := flag.Int("c", 8, "goroutines")
	failCalls := flag.Int("fail-n", 1, "calls to the failing backend per client")
	flag.Parse()
	if *calls < 1 || *workers < 1 || *failCalls < 1 {
		fmt.Fprintln(os.Stderr, "openai: -n, -c and -fail-n must be at least 1")
		os.Exit(2)
	}
	fmt.Printf("%d chat completions from %d goroutines; the emulated API: %s\n", *calls, *workers, newAPI(nil))
	for _, vary := range []bool{false, true} {
		if vary {
			fmt.Println("\nprompts of 400 to 5,180 characters (300 to 1,495 tokens)")
		} else {
			fmt.Println("\nprompts of 2,400 characters (800 tokens)")
		}
		fmt.Println(sdkrun.Header)
		for _, s := range setups {
			api := newAPI(nil)
			srv := httptest.NewServer(api)
			base := http.DefaultTransport.(*http.Transport).Clone()
			fmt.Println(chats(s, base, srv.URL, api, *calls, *workers, 0, vary))
			base.CloseIdleConnections()
			srv.Close()
		}
	}
	fmt.Printf("\na backend that fails every call: requests per call, openai-go's 2 retries on (headway's max attempts: 4)\n")
	for _, f := range failures {
		api := failing(nil, f.drop)
		srv := httptest.NewServer(api)
		base := http.DefaultTransport.(*http.Transport).Clone()
		fmt.Printf("%-62s %5.1f\n", f.name, attemptsPerCall(newFailClient(f, base, srv.URL), api, *failCalls, f.post))
		base.CloseIdleConnections()
		srv.Close()
	}
}

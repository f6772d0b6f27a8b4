// Command stripe runs stripe-go (v82) against an emulated Stripe API on
// loopback, in real time. First, Customers.Create calls from several
// goroutines into Stripe's sandbox limit (25 a second), which Stripe
// enforces without sending counters: through stripe-go alone (its own two
// retries, which leave rate-limit 429s alone), on headway learning the limit
// from the 429s, and as the README says (stripe-go's retries off, the
// documented limit declared with headway.WithQuota). Then a backend whose
// first answer to each call carries Stripe-Should-Retry: a 409 that says
// "true", a 500 that says "false".
//
//	go run ./examples/sdk/stripe -n 60
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
	calls := flag.Int("n", 60, "Customers.Create calls per client")
	workers := flag.Int("c", 8, "goroutines")
	flag.Parse()
	if *calls < 1 || *workers < 1 {
		fmt.Fprintln(os.Stderr, "stripe: -n and -c must be at least 1")
		os.Exit(2)
	}
	fmt.Printf("%d Customers.Create from %d goroutines; the emulated API: %s\n", *calls, *workers, newAPI(nil))
	fmt.Println(sdkrun.Header)
	for _, s := range setups {
		api := newAPI(nil)
		srv := httptest.NewServer(stripeDialect(api))
		base := http.DefaultTransport.(*http.Transport).Clone()
		fmt.Println(createCustomers(s, base, srv.URL, api, *calls, *workers, 0))
		base.CloseIdleConnections()
		srv.Close()
	}
	fmt.Println("\nStripe-Should-Retry: 10 calls, each first answered 409 \"true\" (even calls) or 500 \"false\" (odd)")
	for _, s := range []setup{setups[0], setups[2]} {
		ok, sent := verdictCalls(s.transport, s.retries, 10, 0)
		fmt.Printf("%-44s %2d of 10 succeeded, %2d attempts\n", s.name, ok, sent)
	}
}

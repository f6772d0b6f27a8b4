// Package bench measures headway next to plain net/http and to the Go
// clients people reach for when they want retries: hashicorp's
// go-retryablehttp, failsafe-go's failsafehttp and resty. It is a nested
// module so that those peers never enter headway's own go.mod.
//
// Simulations in virtual time (testing/synctest) measure what each client
// does to a server: goodput against every ratelimittest algorithm and
// dialect (RunGoodput, over internal/testkit/sim's Scenario and Ideal oracle), and
// a total outage and the recovery after it (Amplification, Recovery), each
// client configured as its users write it (Peer.User). Benchmarks measure
// what each costs per request.
//
// Regenerate docs/BENCHMARKS.md and its charts with one command:
//
//	cd bench && go run ./cmd/benchreport
//
// The benchmarks also run as ordinary ones:
//
//	cd bench && go test -bench . -benchmem ./...
//
// Every benchmark request goes through an in-memory Transport (no network,
// no loopback), so that what is measured is each client's own work: a GET,
// and a PUT with a 1 KiB body, each answered 200 with a small body and with
// both IETF RateLimit and X-RateLimit-* headers. The simulations' requests go
// through a SimTransport, which serves an http.Handler in memory with a
// simulated round trip.
package bench

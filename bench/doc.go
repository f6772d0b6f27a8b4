// Package bench measures what headway costs next to plain net/http and to the
// Go clients people reach for when they want retries: hashicorp's
// go-retryablehttp, failsafe-go's failsafehttp and resty. It is a nested
// module so that those peers never enter headway's own go.mod.
//
// Regenerate docs/BENCHMARKS.md and docs/benchmarks.svg with one command:
//
//	cd bench && go run ./cmd/benchreport
//
// The benchmarks also run as ordinary ones:
//
//	cd bench && go test -bench . -benchmem ./...
//
// Every request goes through an in-memory Transport (no network, no
// loopback), so that what is measured is each client's own work: a GET, and
// a PUT with a 1 KiB body, each answered 200 with a small body and with both
// IETF RateLimit and X-RateLimit-* headers.
package bench

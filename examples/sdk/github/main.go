// Command github runs go-github (v75) against an emulated GitHub API on
// loopback, in real time: Users.Get calls from several goroutines into a
// fixed window of 10 requests a second with GitHub's rate-limit headers,
// through go-github alone, through go-github on headway with go-github's own
// rate-limit check on, and as the README says (the check off: headway
// paces); then Issues.Create calls into a secondary limit, declared with
// headway.WithQuota as the README says, and not. It prints what each did: calls that succeeded and failed, those
// go-github refused itself without sending ("local"), what the server saw
// and refused, and the wall time against the ideal.
//
//	go run ./examples/sdk/github -n 40
//
// Its test runs the same with 100 calls in virtual time.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/headway-go/headway/examples/sdk/internal/sdkrun"
)

func main() {
	calls := flag.Int("n", 40, "Users.Get calls per client")
	workers := flag.Int("c", 8, "goroutines")
	flag.Parse()
	if *calls < 1 || *workers < 1 {
		fmt.Fprintln(os.Stderr, "github: -n and -c must be at least 1")
		os.Exit(2)
	}
	fmt.Printf("%d Users.Get from %d goroutines; the emulated API: %s\n", *calls, *workers, newAPI(nil))
	fmt.Println(sdkrun.Header)
	for _, s := range setups {
		api := newAPI(nil)
		srv := httptest.NewServer(api)
		base := http.DefaultTransport.(*http.Transport).Clone()
		fmt.Println(usersGet(s, base, srv.URL, api, *calls, *workers, 0))
		base.CloseIdleConnections()
		srv.Close()
	}

	fmt.Printf("\n%d Issues.Create from %d goroutines into a secondary limit (%s, a 403 with Retry-After)\n", *calls/2, *workers, secondaryQuota)
	fmt.Println(sdkrun.Header)
	for _, declared := range []bool{true, false} {
		api := newFullAPI(nil)
		srv := httptest.NewServer(api)
		base := http.DefaultTransport.(*http.Transport).Clone()
		gh, name := onHeadway(base, srv.URL, secondaryLimit), "go-github on headway (README)"
		if !declared {
			gh, name = onHeadway(base, srv.URL), "go-github on headway, limit not declared"
		}
		start := time.Now()
		res := createIssues(gh, *calls/2, *workers)
		res.Ideal = issuesIdeal(start, *calls/2, 0)
		_, _, refused := api.refused()
		res.Name, res.Sent, res.Refused = name, int(api.secondary.Stats().Served)+refused, refused
		fmt.Println(res)
		base.CloseIdleConnections()
		srv.Close()
	}
}

package headway

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDefaultBaseKeepsBurstsConnections: the base transport headway makes
// when given none keeps DefaultIdleConnsPerHost idle connections per host,
// so that 16 workers sending 20 requests each reuse their connections
// instead of opening one for most requests (http.DefaultTransport's 2 idle
// per host churn; issue 18 measured 848-909 connections for 1,000 paced
// requests). A transport the user gives is left as it is.
func TestDefaultBaseKeepsBurstsConnections(t *testing.T) {
	run := func(c *http.Client) int64 {
		var opened atomic.Int64
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				opened.Add(1)
			}
		}
		srv.Start()
		defer srv.Close()
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					resp, err := c.Get(srv.URL)
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
			}()
		}
		wg.Wait()
		c.CloseIdleConnections()
		return opened.Load()
	}
	old := run(&http.Client{Transport: NewTransport(http.DefaultTransport.(*http.Transport).Clone())})
	t.Logf("with http.DefaultTransport's 2 idle per host: %d connections", old)
	n := run(New())
	t.Logf("with the default base: %d", n)
	require.LessOrEqual(t, n, int64(32), "connections opened by headway's default base for 320 requests from 16 workers (16 busy at most; dials that race a returning connection add a few, more on a loaded machine)")

	base := unwrapLayers(NewTransport(nil)).(*http.Transport)
	require.Equal(t, DefaultIdleConnsPerHost, base.MaxIdleConnsPerHost)
	mine := &http.Transport{MaxIdleConnsPerHost: 3}
	require.Same(t, mine, unwrapLayers(NewTransport(mine)), "the user's transport is used as it is")
	require.Equal(t, 3, mine.MaxIdleConnsPerHost)
}

package headway

import (
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/internal/testkit/fakeclock"
	"github.com/headway-go/headway/pace"
)

// okTransport answers every request 200, with no rate-limit headers.
type okTransport struct{}

func (okTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// TestIdleKeyCost: a client that sent one GET to each of 20,000 hosts
// keeps at most 300 B per host once they are idle: the pacing state of a
// key nobody used between two sweeps is kept encoded, its runs of zeros
// packed, and the waiters of a key nobody used between two sweeps are
// forgotten, sweeps coming with time as well as with new keys.
func TestIdleKeyCost(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	const n = 20000
	clk := fakeclock.New(loStart, true)
	rt := NewTransport(okTransport{}, WithClock(clk)).(*retryTransport)
	store := rt.next.(*pacer).store.(*pace.MemoryStore)
	heap := func() uint64 {
		var ms runtime.MemStats
		for range 3 {
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	reclaimHosts(t, rt, 0, n)
	t.Logf("%.0f B per key just used", float64(int64(heap())-int64(before))/n)
	// Two sweeps a minute apart, made due by a request to a key in use, no
	// new key: the first finds every key used, the second forgets the
	// waiters of those idle since and freezes their pacing states. (The
	// store's own sweep is run here at once; it makes one due a minute
	// after the last: TestMemoryStoreSweepsWithoutNewKeys.)
	p := rt.next.(*pacer)
	for range 2 {
		clk.Advance(time.Minute + time.Second)
		reclaimHosts(t, rt, 0, 1)
		require.Eventually(t, func() bool { return !p.sweeper.running.Load() }, 5*time.Second, time.Millisecond)
		store.Sweep()
	}
	n0 := 0
	p.waiters.Range(func(any, any) bool { n0++; return true })
	require.Less(t, n0, 10, "the idle keys' waiters are forgotten")
	after := heap()
	runtime.KeepAlive(rt)
	per := float64(int64(after)-int64(before)) / n
	t.Logf("%.0f B per idle key", per)
	require.Equal(t, n, store.Len(), "their states are kept (they have not expired)")
	require.LessOrEqual(t, per, 300.0)
}

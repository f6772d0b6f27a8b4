package pace

import (
	"bufio"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/ratelimit"
)

// TestReversedBurstIsNoFreshWindow replays what 24 workers saw on loopback
// (testdata/reversed-burst.txt: per request, when it was sent and answered,
// in ms from the start, the status and what the RateLimit header said was
// left of 50 per second, a fixed window) from 40 ms into a second. The
// server counted each burst in the reverse of the order it was sent, and
// the answers came back in the order sent: remaining 2, 3, 4 ... 24. The
// answers that found more left are older, not a window that ended 9 ms
// into the run: until the next window, what the state grants after each
// answer never exceeds the least remaining said so far. (It granted 17
// after "21 left" and 16 of 24 were refused.)
func TestReversedBurstIsNoFreshWindow(t *testing.T) {
	type event struct {
		at       time.Duration
		answer   bool
		i        int
		status   int
		left     int
		received time.Duration
	}
	f, err := os.Open("testdata/reversed-burst.txt")
	require.NoError(t, err)
	defer f.Close()
	var evs []event
	sc := bufio.NewScanner(f)
	for i := 0; sc.Scan(); i++ {
		fs := strings.Fields(sc.Text())
		require.Len(t, fs, 4)
		num := func(s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			require.NoError(t, err)
			return v
		}
		sent := time.Duration(num(fs[0]) * 1e6)
		recv := time.Duration(num(fs[1]) * 1e6)
		ev := event{i: i, status: int(num(fs[2])), left: int(num(fs[3])), received: recv}
		ev.at = sent
		evs = append(evs, ev)
		ev.at, ev.answer = recv, true
		evs = append(evs, ev)
	}
	require.NoError(t, sc.Err())
	sort.SliceStable(evs, func(a, b int) bool { return evs[a].at < evs[b].at })

	base := time.Date(2026, 11, 26, 12, 0, 0, 40e6, time.UTC)
	var st State
	cfg := &Config{}
	leases := map[int]Lease{}
	least := 50
	for _, e := range evs {
		now := base.Add(e.at)
		if !e.answer {
			if d := st.Reserve(now, Request{}, cfg); d.OK {
				leases[e.i] = d.Lease
			}
			continue
		}
		l, ok := leases[e.i]
		if !ok {
			continue // held back here, where the run sent it
		}
		h := ietf(50, 1, e.left, 1)
		st.Complete(now, l, Answer{Obs: ratelimit.ParseHeaders(h, e.status, now)}, cfg)
		if e.at >= time.Second-40*time.Millisecond {
			break // the next window
		}
		least = min(least, e.left)
		c := st.Clone()
		n := 0
		for n < 100 && c.Reserve(now, Request{}, cfg).OK {
			n++
		}
		require.LessOrEqualf(t, n, least, "after request %d's answer (%d left, at %v): %d granted, %d left at most",
			e.i, e.left, e.at, n, least)
	}
}

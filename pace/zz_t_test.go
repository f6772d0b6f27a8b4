package pace

import (
	"fmt"
	"testing"
	"time"

	"github.com/headway-go/headway/ratelimittest"
)

func TestZZ(t *testing.T) {
	e := emulate(t, emu{opts: silentServer(ratelimittest.Policy{Algorithm: ratelimittest.SlidingLog, Limit: 5000, Window: time.Hour}), workers: 16, latency: 20 * time.Millisecond, span: 30 * time.Second})
	a := &e.st.k.silent
	var left []string
	for i := range nSilent {
		if a.alive&(1<<i) != 0 {
			left = append(left, fmt.Sprintf("%s [%d, %d]", silentNames[i], a.lo[i], a.hi[i]))
		}
	}
	t.Logf("%d sends, %d refused; env %v left %v; own %d ref %d", len(e.sends), len(e.refused), a.envelope, left, a.own.total(), a.ref.total())
}

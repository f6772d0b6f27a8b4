package pace

import (
	"fmt"
	"os"
	"time"
)

var debugOn = os.Getenv("PACE_DEBUG") != ""

func debugf(format string, args ...any) {
	if debugOn {
		fmt.Fprintf(os.Stderr, "          · "+format+"\n", args...)
	}
}

func (p *policy) dump(t int64) string {
	return fmt.Sprintf("probe=%d tok=%.2f alive=%05b pl=%05b score=%.0f win=%v/%v per=%v ctr=%v logW=%v r=[%.3g,%.3g] obs@%.3f rem=%d",
		p.probe, p.probeTokens, p.alive, p.plausible(), p.score, rel(p.win[0], t), rel(p.win[1], t), p.period, rel(p.ctr, t), time.Duration(p.logW), p.rLo, p.rHi, float64(p.obsAt%1e12)/1e9, p.obsRem)
}

func rel(b bounds, t int64) string {
	if !b.known() {
		return "?"
	}
	return fmt.Sprintf("[%+.3f,%+.3f]", float64(b.lo-t)/1e9, float64(b.hi-t)/1e9)
}

var debugGrants = map[uint64]string{}

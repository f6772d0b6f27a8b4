package pace

import (
	"fmt"
	"time"
)

// dump says what policy p holds at t (Unix nanoseconds), for a failing
// test's message: its probe, the candidates alive and plausible, their
// scores, the windows' bounds, the period, the counter's boundary, the
// log's window, the bucket's rate bounds, the rate its resets imply, the
// rates doubted and the newest answer.
func (p *policy) dump(t int64) string {
	return fmt.Sprintf("probe=%d tok=%.2f alive=%05b pl=%05b score=%.0f win=%v/%v per=%v ctr=%v logW=%v r=[%.3g,%.3g] rReset=%.3g doubted=%v/%v obs@%+.3f rem=%d",
		p.probe, p.probeTokens, p.alive, p.plausible(), p.score, rel(p.win[0], t), rel(p.win[1], t), p.period, rel(p.ctr, t), time.Duration(p.logW), p.rLo, p.rHi, p.rReset, p.resetsDoubted != 0, p.exactDoubted != 0, float64(p.obsAt-t)/1e9, p.obsRem)
}

// rel is b relative to t, in seconds.
func rel(b bounds, t int64) string {
	if !b.known() {
		return "?"
	}
	return fmt.Sprintf("[%+.3f,%+.3f]", float64(b.lo-t)/1e9, float64(b.hi-t)/1e9)
}

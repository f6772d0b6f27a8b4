package headway

import (
	"fmt"
	"strings"
)

// Jitter says how a backoff delay is randomised, so that many clients that
// failed together do not retry together (Brooker, "Exponential Backoff And
// Jitter", AWS Architecture Blog, 2015). With t = min(cap, base*2^(retry-1)):
type Jitter int

const (
	// JitterFull waits a uniform random time in [0, t]. It spreads retries
	// the most and is the default.
	JitterFull Jitter = iota
	// JitterEqual waits t/2 plus a uniform random time in [0, t/2]: never
	// less than half the exponential delay.
	JitterEqual
	// JitterDecorrelated grows each delay from the previous one rather than
	// from the retry count (Brooker's "decorrelated jitter"): it waits a
	// uniform random time in [max(base, hi/3), hi] with
	// hi = min(cap, 3*previous). Below the cap every delay is 1 to 3 times the
	// previous one, so retries keep backing off; at the cap delays stay
	// spread uniformly over [cap/3, cap]. The classic
	// min(cap, rand(base, 3*previous)) instead piles most late retries onto
	// exactly the cap, and can fall back to the base delay mid-outage.
	JitterDecorrelated
	// JitterNone waits exactly t. Many clients then retry in lockstep; use it
	// only when a single client talks to a server.
	JitterNone
)

var jitterNames = [...]string{"full", "equal", "decorrelated", "none"}

// String returns the jitter's name: "full", "equal", "decorrelated" or "none".
func (j Jitter) String() string {
	if j >= 0 && int(j) < len(jitterNames) {
		return jitterNames[j]
	}
	return fmt.Sprintf("Jitter(%d)", int(j))
}

// ParseJitter returns the Jitter named s (case-insensitive).
func ParseJitter(s string) (Jitter, error) {
	for i, name := range jitterNames {
		if strings.EqualFold(s, name) {
			return Jitter(i), nil
		}
	}
	return 0, fmt.Errorf("headway: unknown jitter %q (want full, equal, decorrelated or none)", s)
}

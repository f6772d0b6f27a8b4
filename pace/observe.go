package pace

import (
	"net/http"
	"strings"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// Answer is what came back for a lease.
type Answer struct {
	// Obs is what the response's headers said (ratelimit.ParseHeaders);
	// its Status is 0 when the request failed without a response.
	Obs ratelimit.Observation
	// Date is the response's Date header, zero when it had none.
	Date time.Time
}

// Complete takes in the answer to lease l, received at now: the lease
// stops counting as in flight, and what the server said updates the key.
// A lease that has expired meanwhile is completed all the same.
func (s *State) Complete(now time.Time, l Lease, a Answer, cfg *Config) {
	k := &s.k
	t := unixNano(now)
	ls, ok := k.removeLease(l.l.seq)
	if !ok {
		ls = l.l
	}
	obs := &a.Obs
	if obs.Status == 0 {
		// No response: nothing was learnt. A probe's question is still
		// open, and a request that went first and failed lets another go
		// first.
		k.endProbes(ls.seq)
		s.touch(t, cfg)
		return
	}
	k.answered = true
	date := unixNano(a.Date)
	k.clock.observe(ls.at, t, date)
	k.observeRTT(t - ls.at)
	ans := answer{l: &ls, at: k.arrival(ls.at, t), sent: ls.at, recv: t, date: date, k: k, refused: refusal(obs)}
	if obs.HasRetryAfter {
		ans.ra = int64(min(obs.RetryAfter, time.Duration(cfg.maxPause())))
		unit := time.Second
		if strings.HasSuffix(obs.RetryAfterHeader, "-Ms") {
			unit = time.Millisecond
		}
		ans.raOne = !obs.RetryAfterDate && obs.RetryAfter <= unit
	}
	for i := range k.policies {
		if k.policies[i].probe == ls.seq {
			ans.probe = true
		}
	}

	bname := ls.bucket
	if len(obs.Policies) > 0 {
		bname = BucketOf(&obs.Policies[0])
		k.learnRoute(ls.route, bname)
	}
	var said [64]bool // which of k.policies the answer described
	for i := range obs.Policies {
		o := &obs.Policies[i]
		j := k.policyIndex(BucketOf(o), o)
		if j < len(said) {
			said[j] = true
		}
	}
	for i := range obs.Policies {
		o := &obs.Policies[i]
		j := k.policyIndex(BucketOf(o), o)
		p := &k.policies[j]
		p.outcome(&ans)
		p.described(&ans, o)
	}
	for j := range k.policies {
		p := &k.policies[j]
		if p.bucket != bname || j < len(said) && said[j] {
			continue
		}
		p.outcome(&ans)
		p.undescribed(&ans)
	}
	if b := k.findBucket(bname); b != nil && b.firstAfter != 0 && ls.at >= b.firstAfter {
		b.firstAfter = 0 // the request that went first was answered
	}
	if ls.bucket != bname {
		if b := k.findBucket(ls.bucket); b != nil && b.firstAfter != 0 && ls.at >= b.firstAfter {
			b.firstAfter = 0
		}
	}
	for _, qi := range ls.quotas {
		if qi >= 0 && qi < len(k.quotas) {
			k.quotas[qi].answered(ls.seq, t)
		}
	}
	if len(obs.Policies) == 0 && len(k.policies) == 0 && (ans.refused || obs.Status < 500) {
		// (A 5xx says nothing of the rate: neither admitted nor refused.)
		k.silent.answered(k, &ans)
	}
	if ans.refused || obs.Status == http.StatusServiceUnavailable && obs.HasRetryAfter {
		k.pause(&ans, obs, bname, cfg)
	}
	s.touch(t, cfg)
}

// outcome takes in the answer to a probe of p: a refusal refutes the
// candidates that said it would be admitted (or, where only their
// optimistic parameters said so, moves those); an admission leaves the
// rest to the evidence.
func (p *policy) outcome(a *answer) {
	if p.probe != a.l.seq {
		return
	}
	if !a.refused && p.probeFor&countProbeBit == 0 {
		// Admitted: it cost no refusal, and the budget is the refusals'.
		p.probeTokens = min(p.probeTokens+1, probeBurst)
	}
	if a.refused {
		if p.probeFor&countProbeBit != 0 {
			p.countRefused = a.at
		}
		for c := range nCand {
			bit := uint8(1) << c
			switch {
			case p.probeFor&bit == 0:
			case p.probeParam&bit == 0:
				p.refute(bit, a.at)
			case candidate(c) == cBucket:
				// The rate tested was too fast.
				if r := p.rate(optimistic); p.rHi == 0 || r < p.rHi {
					p.rHi = max(r, p.rLo)
				}
			default:
				// A window's end tested too soon: notEnded moves it.
			}
		}
	}
	p.probe, p.probeFor, p.probeParam = 0, 0, 0
}

// refusal reports whether an answer refused the request for its rate: a
// 429; or a 403 with a Retry-After, or saying a quota it counts in is
// exhausted (GitHub's primary and secondary limits). A 403 without either
// is an ordinary 403.
func refusal(obs *ratelimit.Observation) bool {
	switch obs.Status {
	case http.StatusTooManyRequests:
		return true
	case http.StatusForbidden:
		if obs.HasRetryAfter {
			return true
		}
		for i := range obs.Policies {
			if obs.Policies[i].Exhausted() {
				return true
			}
		}
	}
	return false
}

// pause takes in a refusal (or a 503 with Retry-After): the bucket it was
// counted in pauses until the server's Retry-After, and one request goes
// first after it; without one, one request goes first when the model says
// the quota is back. A server that says nothing else teaches the silent
// model.
func (k *keyState) pause(a *answer, obs *ratelimit.Observation, bname string, cfg *Config) {
	b := k.bucketNamed(bname)
	until := a.recv
	why := "refused"
	if a.ra > 0 {
		until = a.recv + a.ra
		why = "Retry-After"
	}
	if a.probe && a.refused {
		// A probe's refusal was a risk taken to learn, and its answer
		// refuted what said it would be admitted: the model paces the
		// rest. Only what the Retry-After says for certain, given its
		// rounding, holds the bucket.
		if gran := raUnit(a.ra); a.ra > gran {
			b.pause, b.why = max(b.pause, a.recv+a.ra-gran), why
		}
		return
	}
	if a.ra > 0 && a.refused && a.raOne {
		// A delay of one unit may be all rounding (a bucket that
		// returns a request every 20 ms says 1 s). On a server without
		// headers the silent model knows as much from a refusal (not a
		// 503, which teaches it nothing) and paces the rest; where the
		// answers proved a bucket, it holds no longer than the bucket
		// takes to fill (refillTime). The refused request itself still
		// waits it out in the retry layer (TestRetryAfterOfOneUnit). A
		// date names an instant, often when a window's quota returns,
		// and holds the key until then.
		if len(k.policies) == 0 {
			until = a.recv
		} else if full, ok := k.refillTime(bname); ok {
			until = min(until, a.recv+full)
		}
	}
	until = min(until, a.recv+cfg.maxPause())
	if until > b.pause {
		b.pause, b.why = until, why
	}
	if a.l.at >= b.firstAfter {
		b.firstAfter = max(until, a.recv)
	}
}

// refillTime returns how long bucket's quotas take to refill whole at the
// least rate their answers measured, when every one of them is known to be
// a bucket (its other candidates refuted): a pause of a one-unit
// Retry-After beyond it holds back what the bucket cannot keep, and
// within it costs nothing, the burst being there after it.
func (k *keyState) refillTime(bucket string) (int64, bool) {
	var full int64
	found := false
	for i := range k.policies {
		p := &k.policies[i]
		if p.bucket != bucket {
			continue
		}
		if p.alive != 1<<cBucket || p.rLo <= 0 || p.limit <= 0 {
			return 0, false
		}
		full, found = max(full, int64(float64(p.limit)/p.rLo*1e9)), true
	}
	return full, found
}

// raUnit is the unit a Retry-After of ra nanoseconds was given in, as far
// as its value tells: a second when it is whole seconds, else a
// millisecond. Up to a unit of it may be rounding.
func raUnit(ra int64) int64 {
	if ra%1e9 == 0 {
		return 1e9
	}
	return 1e6
}

// observeRTT takes in one round trip. One of zero is one too (a clock
// that did not move meanwhile: a test's, or a coarse one): the least
// round trip is then zero, and requests sent together with one may have
// reached the server first.
func (k *keyState) observeRTT(rtt int64) {
	if rtt < 0 {
		return
	}
	if k.rtt == 0 {
		k.rtt = rtt
	}
	k.rtt += (rtt - k.rtt) / 8
	// The least over the last rttWindow answers, so that a route that
	// got slower is followed: the least of this window so far, and the
	// least of the window before.
	k.rttSeen++
	if k.rttSeen%rttWindow == 1 {
		k.rttPrev, k.rttCur = k.rttCur, rtt
	}
	k.rttCur = min(k.rttCur, rtt)
	k.rttMin = k.rttCur
	if k.rttPrev > 0 {
		k.rttMin = min(k.rttMin, k.rttPrev)
	}
}

// rttWindow is how many answers the least round trip is taken over (and as
// many before them).
const rttWindow = 256

// Cancel takes back lease l, whose request never left: it stops counting
// against every quota.
func (s *State) Cancel(l Lease, cfg *Config) {
	k := &s.k
	ls, ok := k.removeLease(l.l.seq)
	if !ok {
		return
	}
	k.endProbes(ls.seq)
	qs := cfg.quotas()
	for _, qi := range ls.quotas {
		if qi >= 0 && qi < len(k.quotas) && qi < len(qs) {
			k.quotas[qi].refund(ls.seq, qs[qi])
		}
	}
}

// BucketOf returns the server-named bucket a policy belongs to: its
// partition (an IETF pk, Discord's bucket), or the resource that GitHub and
// Bitbucket name it after; "" for the key's own.
func BucketOf(o *ratelimit.Policy) string {
	switch {
	case o.Partition != "":
		return o.Partition
	case o.Dialect == ratelimit.DialectGitHub || o.Dialect == ratelimit.DialectBitbucket:
		return o.Name
	}
	return ""
}

// policyIndex returns the index of the key's policy that o describes,
// adding it if new (and its bucket).
func (k *keyState) policyIndex(bname string, o *ratelimit.Policy) int {
	for i := range k.policies {
		if k.policies[i].matches(bname, o) {
			return i
		}
	}
	k.bucketNamed(bname)
	k.policies = append(k.policies, newPolicy(bname, o))
	return len(k.policies) - 1
}

// inflightBy returns the cost in p's unit of p's leases in flight that can
// have arrived by t: sent half a round trip before it. It takes out of the
// bucket's total those sent later, walking back from the newest only as
// far as the grants' order allows (see derived.skew).
func (k *keyState) inflightBy(p *policy, t int64) int64 {
	n := k.inflightAll(p)
	cut := t - k.lead()
	for i := len(k.leases) - 1; i >= 0; i-- {
		l := &k.leases[i]
		if l.at <= cut-k.derived.skew {
			break // it and every lease before it were sent by cut
		}
		if l.at > cut && l.bucket == p.bucket {
			n -= costIn(l.cost, p.unit)
		}
	}
	return n
}

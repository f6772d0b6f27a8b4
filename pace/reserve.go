package pace

import (
	"fmt"
	"math"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// Config is what the decisions depend on besides a key's State.
type Config struct {
	// Quotas are the limits declared by the user, known before any header
	// arrives; Request.Quotas says which apply to a request.
	Quotas []Quota
	// LeaseTTL is how long at most a lease counts as in flight if it is
	// neither completed nor cancelled (default DefaultLeaseTTL). Once the
	// key has answered, a lease is taken as lost sooner: after
	// overdueRTTs of the key's round trips (smoothed), and never less than
	// overdueFloor (10 s), so that the leases of a process that died, or
	// whose answers a shared store lost, hold its fleet back for seconds,
	// not a minute.
	LeaseTTL time.Duration
	// MaxPause bounds a pause recorded from one response, and every wait
	// the model computes (default DefaultMaxPause), so that a misread value
	// cannot block a key for years.
	MaxPause time.Duration
	// IdleTTL is how long a key's state is kept once nothing it holds
	// matters any more (default DefaultIdleTTL).
	IdleTTL time.Duration
}

// minStep is the least time a request that must wait is asked to wait, and
// pollStep the most a request waiting for an answer waits before it asks
// again.
const (
	minStep  = time.Millisecond
	pollStep = 25 * time.Millisecond
)

// Defaults of Config.
const (
	DefaultLeaseTTL = time.Minute
	DefaultMaxPause = 24 * time.Hour
	DefaultIdleTTL  = 10 * time.Minute
)

func (c *Config) leaseTTL() int64 {
	if c == nil || c.LeaseTTL <= 0 {
		return int64(DefaultLeaseTTL)
	}
	return int64(c.LeaseTTL)
}

func (c *Config) maxPause() int64 {
	if c == nil || c.MaxPause <= 0 {
		return int64(DefaultMaxPause)
	}
	return int64(c.MaxPause)
}

func (c *Config) idleTTL() int64 {
	if c == nil || c.IdleTTL <= 0 {
		return int64(DefaultIdleTTL)
	}
	return int64(c.IdleTTL)
}

func (c *Config) quotas() []Quota {
	if c == nil {
		return nil
	}
	return c.Quotas
}

// Request describes a request about to be sent.
type Request struct {
	// Route identifies what the request asks for ("GET /repos/x/issues"),
	// so that the server-named bucket it is counted in can be remembered.
	// Only its hash is kept.
	Route string
	// Quotas are the indexes in Config.Quotas of the declared quotas that
	// apply.
	Quotas []int
	// Cost is what the request costs in units other than requests (a
	// request always costs one request), such as tokens.
	Cost []Amount
	// Deadline is when the caller gives up on the request (zero: never).
	// A unit that is there is held back to learn (the last of a window,
	// sent later to show where the window ends or to tell a bucket from a
	// window) only while its answer can still come back before then: a
	// request is not failed for a test.
	Deadline time.Time
}

// Why says why a request must wait: what holds it, not the bound a wait
// may then fail to fit (headway's Reason says that; RateLimitError.Why
// carries a Why in words).
type Why uint8

// The reasons to wait.
const (
	// WhyPaused: the server asked for a pause (Retry-After).
	WhyPaused Why = iota + 1
	// WhyFirstAnswer: the key has never answered; its first request went
	// alone and the rest wait for what it says.
	WhyFirstAnswer
	// WhyProbe: after a pause or a refusal, one request went first and
	// the rest wait for what it says.
	WhyProbe
	// WhyQuota: a quota the server announced has nothing left until
	// enough of it returns.
	WhyQuota
	// WhyRefill: a refilling quota is spent; the next unit returns at the
	// refill rate.
	WhyRefill
	// WhyAdaptive: the server sends no rate-limit headers and refused
	// requests; the window and limit learnt from what it admitted and
	// refused (the Detail names the candidate) hold the request.
	WhyAdaptive
	// WhyDeclared: a quota declared by the user has nothing left.
	WhyDeclared
)

// String describes the reason in a few words.
func (w Why) String() string {
	switch w {
	case WhyPaused:
		return "paused by the server"
	case WhyFirstAnswer:
		return "waiting for the key's first answer"
	case WhyProbe:
		return "waiting for the answer of the request that went first"
	case WhyQuota:
		return "quota exhausted until enough of it returns"
	case WhyRefill:
		return "pacing to the quota's refill rate"
	case WhyAdaptive:
		return "pacing to the limit learnt from 429s"
	case WhyDeclared:
		return "declared quota exhausted"
	default:
		return fmt.Sprintf("Why(%d)", int(w))
	}
}

// Decision is the answer of Reserve.
type Decision struct {
	// OK reports that the request may be sent now; Lease is then its
	// reservation, already recorded in the State.
	OK    bool
	Lease Lease
	// At is, when !OK, when to ask again. When Definite, the request
	// cannot be sent before At (a pause, a window, a rate, and no answer
	// on its way that could say otherwise); otherwise an answer may come
	// sooner and change it, At being only a bound.
	At       time.Time
	Definite bool
	// Why says why it waits; Detail names the quota or pause.
	Why    Why
	Detail string
	// Pace, when a quota whose limit the server said holds the request,
	// is the fastest that quota can let requests through: the caller's
	// line can project when the requests behind this one may go at the
	// earliest, from At when Definite (the request goes at At, the first
	// of a window or of a refill), and otherwise from now with one window
	// more of slack (it may go sooner, into what is left of a window).
	Pace Pace
}

// Pace bounds how fast a quota lets requests through: n requests after
// one that goes at some instant take at least (n/Limit - Slack) whole
// Windows (n/Limit rounded down). The zero Pace bounds nothing.
type Pace struct {
	Limit  int64
	Window time.Duration
	Slack  int64
}

// Earliest returns the earliest the nth request after one sent at at may
// be sent (at itself when p bounds nothing).
func (p Pace) Earliest(at time.Time, n int64) time.Time {
	if p.Limit <= 0 || p.Window <= 0 {
		return at
	}
	windows := n/p.Limit - p.Slack
	if windows <= 0 {
		return at
	}
	if windows > int64(maxHorizon)/int64(p.Window) {
		return at.Add(time.Duration(maxHorizon))
	}
	return at.Add(time.Duration(windows) * p.Window)
}

// wait collects the reasons to wait, keeping the one that lasts longest.
type wait struct {
	set      bool
	at       int64
	definite bool
	why      Why
	detail   string
	pace     Pace // the slowest Pace of the quotas that hold it
}

func (w *wait) later(at int64, definite bool, why Why, detail string) {
	if !w.set || definite && (!w.definite || at > w.at) || !w.definite && !definite && at > w.at {
		*w = wait{set: true, at: at, definite: definite, why: why, detail: detail, pace: w.pace}
	}
}

// paced keeps p if it is slower in a long run than the Pace kept so far.
func (w *wait) paced(p Pace) {
	if p.Limit <= 0 {
		return
	}
	if w.pace.Limit <= 0 || float64(p.Limit)/float64(p.Window) < float64(w.pace.Limit)/float64(w.pace.Window) {
		w.pace = p
	}
}

// Reserve decides whether req may be sent at now. When it may, the lease is
// recorded in s (it counts as in flight) and returned; the caller must
// Complete or Cancel it.
func (s *State) Reserve(now time.Time, req Request, cfg *Config) Decision {
	k := &s.k
	t := unixNano(now)
	k.expire(t)
	h := routeHash(req.Route)
	bname, known := k.bucketOf(h)
	if !known {
		bname = k.defaultBucket()
	}
	first := false
	var w wait
	if b := k.findBucket(bname); b != nil {
		switch {
		case t < b.pause:
			w.later(b.pause, true, WhyPaused, b.why)
		case b.firstAfter != 0:
			if l := k.firstIn(bname); l != nil {
				w.later(l.expires, false, WhyProbe, b.why)
			} else {
				first = true
			}
		}
	}
	if !k.answered {
		if len(k.leases) > 0 {
			w.later(k.leases[0].expires, false, WhyFirstAnswer, "")
		} else {
			first = true
		}
	}
	arrive := t + k.lead()
	until := deadlineNano(req.Deadline)
	var probes [8]int
	np := 0
	for i := range k.policies {
		p := &k.policies[i]
		if p.bucket != bname || !p.seen {
			continue
		}
		need := costIn(req.Cost, p.unit)
		if need <= 0 {
			need = 1 // an unknown cost waits only for an exhausted quota
		}
		r := p.hold(k, t, arrive, need, until)
		switch {
		case !r.ok:
			w.later(r.at, r.definite, r.why, r.detail)
			w.paced(p.pace())
		case r.probe && np < len(probes):
			probes[np] = i
			np++
		}
	}
	silentProbe := false
	if len(k.policies) == 0 {
		switch h := k.silent.hold(k, t); {
		case !h.ok:
			w.later(h.at, h.definite, WhyAdaptive, silentNames[h.why])
		case h.probe:
			silentProbe = true
		}
	}
	qs := cfg.quotas()
	for _, qi := range req.Quotas {
		if qi < 0 || qi >= len(qs) {
			continue
		}
		k.growQuotas(len(qs))
		if at, ok := k.quotas[qi].hold(k, t, qs[qi]); !ok {
			w.later(at, true, WhyDeclared, qs[qi].String())
		}
	}
	if w.set {
		// A rate's arithmetic can land on now itself: ask again a moment
		// later rather than at once, which would spin. A wait for an
		// answer asks again soon: the answer may land in a store this
		// process does not hear from.
		at := min(max(w.at, t+int64(minStep)), t+cfg.maxPause())
		if !w.definite {
			at = min(at, t+int64(pollStep))
		}
		return Decision{At: time.Unix(0, at), Definite: w.definite, Why: w.why, Detail: w.detail, Pace: w.pace}
	}
	l := k.grant(t, req, h, bname, first, cfg)
	for _, i := range probes[:np] {
		// The probe is spent when it goes, not when a policy would let it:
		// a request held back for another reason (a pause, another
		// policy) drained the budget of a policy it never tested.
		p := &k.policies[i]
		p.probe = l.seq
		if p.probeFor&countProbeBit == 0 {
			p.probeTokens-- // (a count probe's budget is its own: countProbe)
		}
		p.regret = 0
	}
	if silentProbe && k.silent.probe == 0 {
		k.silent.probe = l.seq
	}
	s.touch(t, cfg)
	return Decision{OK: true, Lease: Lease{l: l}}
}

// grant records a lease for req.
func (k *keyState) grant(t int64, req Request, h uint64, bname string, first bool, cfg *Config) lease {
	k.seq++
	l := lease{seq: k.seq, at: t, expires: t + k.leaseTTL(cfg), bucket: bname, route: h, first: first}
	for _, c := range req.Cost {
		if c.N > 0 && unitOf(c.Unit) != ratelimit.UnitRequests {
			l.cost = append(l.cost, Amount{Unit: unitOf(c.Unit), N: c.N})
		}
	}
	qs := cfg.quotas()
	for _, qi := range req.Quotas {
		if qi >= 0 && qi < len(k.quotas) && qi < len(qs) {
			k.quotas[qi].sent(t, l.seq, qs[qi])
			l.quotas = append(l.quotas, qi)
		}
	}
	k.leases = append(k.leases, l)
	k.counted(&k.leases[len(k.leases)-1], +1)
	return l
}

// leaseTTL is how long a lease granted now counts as in flight unless it
// is answered or cancelled: Config.LeaseTTL, or, once the key has
// answered, overdueRTTs of its round trips if that is sooner, overdueFloor
// at the least.
func (k *keyState) leaseTTL(cfg *Config) int64 {
	ttl := cfg.leaseTTL()
	if k.answered {
		ttl = min(ttl, max(int64(overdueFloor), overdueRTTs*k.rtt))
	}
	return ttl
}

// A request unanswered after overdueRTTs round trips of its key, and
// overdueFloor at the least, is taken as lost (Config.LeaseTTL).
const (
	overdueRTTs  = 32
	overdueFloor = 10 * time.Second
)

// firstIn returns the lease in flight in bucket that went first, if any.
func (k *keyState) firstIn(bname string) *lease {
	for i := range k.leases {
		if k.leases[i].first && k.leases[i].bucket == bname {
			return &k.leases[i]
		}
	}
	return nil
}

// expire drops the leases whose time is up.
func (k *keyState) expire(t int64) {
	k.sums()
	if len(k.leases) == 0 || k.derived.minExp != 0 && t < k.derived.minExp {
		return
	}
	n := 0
	next := int64(0)
	for _, l := range k.leases {
		if t < l.expires {
			k.leases[n] = l
			n++
			if next == 0 || l.expires < next {
				next = l.expires
			}
			continue
		}
		k.counted(&l, -1)
		k.endProbes(l.seq)
	}
	clear(k.leases[n:])
	k.leases = k.leases[:n]
	k.derived.minExp = next
}

// endProbes forgets that lease seq probes any policy.
func (k *keyState) endProbes(seq uint64) {
	for i := range k.policies {
		if k.policies[i].probe == seq {
			k.policies[i].probe, k.policies[i].probeFor, k.policies[i].probeParam = 0, 0, 0
		}
	}
}

// lead is how long after it is sent a request reaches the server, at the
// least: leadShare of half the least round trip seen (round trips vary, and
// their halves need not be equal).
func (k *keyState) lead() int64 { return int64(leadShare * float64(k.rttMin) / 2) }

// leadShare is the share of half the least round trip that a request is
// taken to spend on its way to the server. TestLead pins it.
const leadShare = 0.8

// arrival is when the server is taken to have counted a request sent at
// sent and answered at recv: half way (see the package doc).
func (k *keyState) arrival(sent, recv int64) int64 { return sent + (recv-sent)/2 }

// hold is a policy's answer to a request: go (perhaps as a probe), or
// wait.
type holdResult struct {
	ok, probe, definite bool
	at                  int64
	why                 Why
	detail              string
}

// hold decides whether need units of p may be spent by a request sent at
// now that reaches the server at arrive.
func (p *policy) hold(k *keyState, now, arrive, need, until int64) holdResult {
	fl := k.flight(p, now)
	inflight := fl.n
	if left := p.obsRem - p.since - inflight; left >= need {
		// Whatever returns, what the newest answer left is still there;
		// the last of it may wait to test a window's end (reserveEnd).
		if left == need {
			if at := p.reserveEnd(k, arrive, need, fl, p.plausible()); testFits(now, arrive, at, until, k.rtt) {
				return p.endWait(now, arrive, at)
			}
		}
		return holdResult{ok: true}
	}
	p.revive(arrive)
	pl := p.plausible()
	room := float64(need)
	ok := true
	for c := range nCand {
		if pl&(1<<c) != 0 && p.avail(candidate(c), arrive, fl, cautious) < room {
			ok = false
			break
		}
	}
	if ok {
		if at := p.reserveEnd(k, arrive, need, fl, pl); testFits(now, arrive, at, until, k.rtt) {
			return p.endWait(now, arrive, at)
		}
		if at := p.reserveProbe(k, arrive, need, fl, pl); testFits(now, arrive, at, until, k.rtt) {
			return holdResult{at: at - (arrive - now), why: WhyProbe, detail: p.describe(cBucket) + "; the last unit waits to tell a bucket from a window"}
		}
		return holdResult{ok: true}
	}
	// The cautious instant: when every candidate says there is room. The
	// soonest instant a candidate says so cautiously, and the soonest its
	// optimistic parameters say so: what a probe tests.
	at, soon, opt := arrive, int64(never), int64(never)
	slowest := cWindow
	for c := range nCand {
		if pl&(1<<c) == 0 {
			continue
		}
		tc := p.when(candidate(c), arrive, need, fl, cautious)
		if tc > at {
			at, slowest = tc, candidate(c)
		}
		soon = min(soon, tc)
		if p.paramProbe(candidate(c)) {
			opt = min(opt, p.when(candidate(c), arrive, need, fl, optimistic))
		}
	}
	gain := p.probeGain(k)
	if soon < at && at != never {
		// Waiting from soon to at is the cautious candidate's doing.
		if from := max(soon, p.regretTo); at > from {
			p.regret = min(p.regret+at-from, maxHorizon)
			p.regretTo = at
		}
	}
	lead := arrive - now
	p.trickle(now)
	canProbe := p.probe == 0 && p.probeTokens >= 1
	// worth: waiting for the cautious candidate costs more than a refusal,
	// at once or summed over the waits since the last probe.
	worth := at-arrive >= gain || soon == arrive && p.regret >= gain
	mute := p.mute(need, pl)
	if canProbe && (worth || mute && at > arrive) {
		// Waiting for the cautious candidate costs more than a refusal
		// (or the bucket is mute, and only a probe can show it faster):
		// test the candidates that say there is room now, as they are
		// (a refusal refutes them), or else the parameters that do.
		var whole, param uint8
		for c := range nCand {
			if pl&(1<<c) == 0 {
				continue
			}
			switch {
			case p.avail(candidate(c), arrive, fl, cautious) >= room:
				whole |= 1 << c
			case p.paramProbe(candidate(c)) && (p.avail(candidate(c), arrive, fl, optimistic) >= room ||
				mute && candidate(c) == cBucket && p.when(cBucket, arrive, need, fl, optimistic) <= arrive):
				// (A mute bucket's probe goes at the instant its
				// optimistic rate gave, which the level compared there
				// can miss by a rounding, sending the key to poll.)
				param |= 1 << c
			}
		}
		if whole != 0 && worth {
			p.probeFor, p.probeParam = whole, 0
			return holdResult{ok: true, probe: true}
		}
		if param != 0 && (soon-arrive >= gain || mute && soon > arrive) {
			p.probeFor, p.probeParam = param, param
			return holdResult{ok: true, probe: true}
		}
	}
	if t := p.countProbe(now, arrive, at, need, gain, pl); p.probe == 0 && t != never {
		if t <= arrive {
			p.probeFor, p.probeParam = countProbeBit, 0
			return holdResult{ok: true, probe: true}
		}
		at = min(at, t)
	}
	switch {
	case canProbe && opt < at && (at-opt >= gain && soon-opt >= gain || mute && opt < soon):
		at = opt // a probe of parameters may go then
	case canProbe && soon < at && (at-soon >= gain || p.regret >= gain):
		at = soon // a probe of a candidate may go then
	}
	if at == never && p.probe == 0 && !k.inFlightIn(p.bucket) {
		// Nothing the evidence allows says when a unit returns (a bucket
		// whose rate no answer measured, a window whose end none showed),
		// and no answer on its way can say: only a request can tell.
		// Without it the key would wait for ever. A refusal bounds the
		// bucket's rate (it was tested at its optimistic rate) and
		// refutes nothing else.
		if canProbe {
			p.probeFor = pl & (1 << cBucket)
			p.probeParam = p.probeFor
			return holdResult{ok: true, probe: true}
		}
		// When the trickle has earned the probe.
		per := max(probeTrickle*p.period.hi, int64(probeTrickle*1e9))
		at = now + int64((1-p.probeTokens)*float64(per)) + lead
	}
	r := holdResult{why: WhyQuota, definite: p.probe == 0 && !k.inFlightIn(p.bucket)}
	if slowest == cBucket {
		r.why = WhyRefill
	}
	switch {
	case at == never:
		// Nothing says when it returns; an answer on its way may.
		r.definite = false
		at = now + int64(pollStep)
	case at <= arrive:
		// A candidate's arithmetic lands on now although it said no:
		// look again a little later rather than at once.
		r.definite = false
		at = now + int64(pollStep)
	default:
		at -= lead
	}
	r.at = min(at, now+maxHorizon)
	r.detail = p.describe(slowest)
	return r
}

// mute reports whether the bucket's level says nothing of how fast it
// refills: it holds no more than the request's need, so that every answer
// says none is left however fast it refills (a bucket without burst, whose
// reset says a whole second), and the rate its answers measure is only the
// client's own. Only a request sent sooner than that rate allows can show
// it faster, so one is worth sending whatever it saves on its own (the
// probeGain rule would stop the client at about 1/(2 probeGain), 5/s),
// until a refusal bounds the rate (rHi); once the answers refuted every
// other candidate, until the bounds are within muteSpread of each other,
// each probe testing their middle (a refusal lowers the upper, admissions
// at the middle's pace raise the lower). Probes that stopped at the first
// refusal left the client at the rate proved by then, half the bucket's or
// less (throttled's GCRA without burst on loopback); probes that went on
// while a window still explained the answers cost a true window of one a
// second a refused probe a minute (TestMuteBucket, TestRateNoise).
func (p *policy) mute(need int64, pl uint8) bool {
	return pl&(1<<cBucket) != 0 && p.limit <= need && p.rLo > 0 && (p.rHi == 0 || p.alive == 1<<cBucket && p.rHi > muteSpread*p.rLo)
}

// muteSpread is how close the bounds on a mute bucket's rate come before
// its search ends: within a fifth, their middle within a tenth of each.
const muteSpread = 1.2

// pace bounds how fast p lets requests through, whichever of its
// candidates that the evidence has not refuted is the server's: for a
// window, limit per the shortest window length still possible; for a
// bucket, limit per the time the fastest refill still possible takes to
// return limit units (or per the window the server said, when the answers
// bound no refill rate yet); a sliding counter may let up to a window's worth
// more through (Slack 1). The zero Pace when p counts something other
// than requests, the server did not say its limit (p.limit is then only
// what was seen), or a candidate's speed is unbounded.
func (p *policy) pace() Pace {
	if p.unit != ratelimit.UnitRequests || !p.limitSaid || p.limit <= 0 {
		return Pace{}
	}
	pc := Pace{Limit: p.limit, Window: time.Duration(math.MaxInt64)}
	for c := range nCand {
		if p.alive&(1<<c) == 0 {
			continue
		}
		var w time.Duration
		switch candidate(c) {
		case cBucket:
			switch {
			case p.rHi > 0:
				w = time.Duration(float64(p.limit) / p.rHi * 1e9)
			case p.said > 0:
				w = time.Duration(p.said) // the server said limit per window: its rate
			default:
				return Pace{}
			}
		case cCounter:
			pc.Slack = 1
			w = time.Duration(p.period.lo)
		default:
			w = time.Duration(p.period.lo)
		}
		if w <= 0 {
			return Pace{}
		}
		pc.Window = min(pc.Window, w)
	}
	if pc.Window == time.Duration(math.MaxInt64) {
		return Pace{}
	}
	return pc
}

// trickle earns the probe budget with time too, so that a policy whose
// every candidate holds back, with nothing admitted to earn from, still
// learns: one probe per probeTrickle of its windows (a second at least),
// while nothing of the client's was admitted for that long.
func (p *policy) trickle(now int64) {
	if p.trickled == 0 || now < p.trickled || p.lastAdmit > p.trickled {
		p.trickled = max(now, p.lastAdmit)
		return
	}
	per := max(probeTrickle*p.period.hi, int64(probeTrickle*1e9))
	if dt := now - p.trickled; dt > 0 {
		p.probeTokens = min(p.probeTokens+float64(dt)/float64(per), probeBurst)
		p.trickled = now
	}
}

// probeTrickle is how many windows the time-earned budget takes to earn
// one probe: a refusal per eight windows at most when nothing else earns.
const probeTrickle = 8

// countProbe returns when a request may test whether more is admitted
// under one reset instant than a window allows (see labelled), or never:
// when the server writes its resets as instants, a bucket and a window are
// both in the running, the window holds the client back for longer than a
// refusal's worth (gain), and the bucket is mute (its limit no more than
// the request needs: a window of one a second and a bucket of one that
// refills fifty times a second answer alike, "0 of 1 left, resets at the
// next second", and only an admission that the window could not make
// tells them apart). It goes gain after the last admission, by when a
// bucket worth the test has refilled a unit, and gain before the window's
// end at least; after a refused one, none for countRetry: a window costs
// a refusal that long.
func (p *policy) countProbe(now, arrive, at, need, gain int64, pl uint8) int64 {
	if p.labE == 0 || !p.limitSaid || p.limit > need || pl&(1<<cBucket) == 0 || pl&^(1<<cBucket) == 0 ||
		p.countRefused != 0 && now-p.countRefused < countRetry || at == never {
		return never
	}
	t := max(arrive, p.lastAdmit+gain)
	if at-t < gain {
		return never
	}
	return t
}

// countProbeBit marks, in policy.probeFor, a probe of countProbe's.
const countProbeBit = 1 << 7

// countRetry is how long after a refused probe of countProbe's the next
// may go.
const countRetry = 10 * 60e9

// paramProbe reports whether candidate c's optimistic parameters are worth
// a refusal to test: a window's end that the server's Date puts on a
// second of its clock, and a bucket's rate faster than the one its answers
// measured (not a rate from its resets alone, which a window's reset gives
// too).
func (p *policy) paramProbe(c candidate) bool {
	return c == cWindow && p.guess != 0 || c == cAnchored && p.anchoredEnd() != 0 || c == cBucket && p.rLo > 0
}

// reserveProbe tells a bucket from the candidates that return nothing soon
// without risking a refusal: when the request would spend the last unit
// that every candidate agrees is there, and only the bucket's rate, which
// no answer has measured yet (its resets' alone), says more returns soon,
// the last unit waits until the bucket says a second one is there. It
// stays meanwhile (a window's unit stays until the window ends, a log's
// until a window after it was counted), and its answer says whether the
// bucket refilled. It returns when to send it, or arrive to send it now:
// when the bucket is measured, or not in the running, or the wait would
// cost more than a round trip's gain, or outlast a window that may end.
func (p *policy) reserveProbe(k *keyState, arrive, need int64, fl flight, pl uint8) int64 {
	if pl&(1<<cBucket) == 0 || p.rLo > 0 || p.rReset <= 0 || pl == 1<<cBucket {
		return arrive
	}
	if !p.lastUnit(arrive, need, fl, pl) {
		return arrive
	}
	at := p.when(cBucket, arrive, need+1, fl, cautious)
	if at == never || at-arrive < p.probeGain(k) {
		return arrive
	}
	for c := cWindow; c <= cAnchored; c++ {
		if b := p.win[c]; pl&(1<<c) != 0 && b.known() && b.lo-landMargin < at {
			return arrive // the window may end first, and the unit with it
		}
	}
	return at
}

// reserveEnd is reserveProbe for a search for a window shorter than a
// second (see shorter; before one begins, reserveShort): the last unit of
// a window, which every candidate agrees is there, waits until the middle
// of the bounds on the window's
// next end. Its answer tells, at no risk of a refusal, whether the window
// had ended by then (the answer shows a fresh window, which bounds the
// window's length from above) or not (it was counted in the window it
// was left in, which bounds it from below): the bounds halve each window,
// where waiting for the latest end they allow kept them where they were.
// It returns when to send it, or arrive to send it now.
func (p *policy) reserveEnd(k *keyState, arrive, need int64, fl flight, pl uint8) int64 {
	if p.wCap == 0 {
		return p.reserveShort(k, arrive, need, fl, pl)
	}
	b := p.win[cWindow]
	if pl&(1<<cWindow) == 0 || p.period.hi-p.period.lo < shortSpread || !b.known() {
		return arrive
	}
	if !p.lastUnit(arrive, need, fl, pl) {
		return arrive
	}
	// Where the newest reset, an instant, has passed on the server's clock
	// with the window not yet over, the server rounds its resets down and
	// the window ends within the second the reset names: the bounds are
	// halved from the newest answer, their lower bound long passed.
	lo := b.lo
	if c := &k.clock; p.lastE != 0 && c.known && p.lastE <= arrive-c.guess() {
		lo = max(lo, p.obsAt)
	}
	mid := lo + (b.hi-lo)/2
	if mid <= arrive || mid >= b.hi {
		return arrive
	}
	return mid
}

// reserveShort is reserveEnd before a search for a window shorter than a
// second has begun (see shorter). A burst that spends a window's whole
// quota at once and then waits for the latest end a window of a second
// allows shows nothing that such a window cannot explain
// (sethvargo/go-limiter's and go-chi/httprate's 10 per 200 ms on loopback,
// paced at 10 a second, 4.8x). So where the window may be shorter
// (shortOpen), an answer showed where it ended last (pEnd) and the
// window's other units were admitted within shortBurst of that answer, the
// last unit waits to land just before the soonest next end a window of a
// second allows (or, when that end was shown no better than to two thirds
// of a second, a third of a second after it: such a window may then count
// it in a fresh one, which narrows the end for the next test). The unit is
// there whenever it goes (a window's unit stays until it ends, then a
// fresh one holds more; no candidate returns less later): a window of a
// second counts it in the same window, which says the window is at least
// about that long (wLo, notShorter), and the tests stop; a shorter window
// counts it in a fresh one, an end sooner than a window of a second
// allows, and the search begins (shorter). Requests spread over a window
// show its ends themselves, and are not held (one worker with round trips
// of 20 ms on 10 per 200 ms, held, went at 76 requests in four seconds,
// where 180 went without: countCap began the search).
func (p *policy) reserveShort(k *keyState, arrive, need int64, fl flight, pl uint8) int64 {
	e := p.pEnd
	if !p.shortOpen(arrive) || pl&(1<<cWindow) == 0 || !e.known() || p.rolledAt > e.hi || 1e9-p.wLo < shortTested || p.lastAdmit-e.hi >= shortBurst {
		return arrive
	}
	at := e.lo + 1e9 - 2*k.orderSlack() - landMargin
	if at-e.hi < shortFirst {
		at = e.hi + shortFirst
	}
	// A test that reaches no further past the window's start than the
	// windows already tested (wLo), by a quarter of shortTested, tells
	// nothing new.
	if at-e.hi < p.wLo+shortTested/4 || at <= arrive || !p.lastUnit(arrive, need, fl, pl) {
		return arrive
	}
	return at
}

// shortFirst is how long after a window's end reserveShort's test waits
// when that end is known only to within most of a second: the search then
// begins for a window of up to a third of a second, and the next test,
// after an end known better, covers the rest.
const shortFirst = int64(1e9) / 3

// shortBurst is how soon after a window's first answer its other units
// are admitted when they go in a burst (reserveShort).
const shortBurst = 100e6

// shortTested is how close to a second the windows that reserveShort
// tested must come for it to stop: the last unit waits no more.
const shortTested = 200e6

// lastUnit reports whether no candidate in pl says more than need units
// are there at arrive: a request of need units would spend the last.
func (p *policy) lastUnit(arrive, need int64, fl flight, pl uint8) bool {
	for c := range nCand {
		if pl&(1<<c) != 0 && p.avail(candidate(c), arrive, fl, cautious) >= float64(need+1) {
			return false
		}
	}
	return true
}

// testFits reports whether a unit that would reach the server at arrive
// if sent at now is to be held back to reach it at at instead (later), for
// a request given up at until (0: never): its answer, a round trip of rtt
// after it goes, must be back before then.
func testFits(now, arrive, at, until, rtt int64) bool {
	return at > arrive && (until == 0 || at-(arrive-now)+rtt < until)
}

// deadlineNano is unixNano for a request's deadline: none (0) when it is
// zero or past what int64 nanoseconds since 1970 hold (a WithMaxWait of
// "for ever", which UnixNano would wrap to a deadline long gone).
func deadlineNano(t time.Time) int64 {
	if t.After(time.Unix(0, math.MaxInt64)) {
		return 0
	}
	return unixNano(t)
}

// endWait is hold's answer for a last unit that reserveEnd holds until at,
// for a request that would reach the server at arrive if sent at now.
func (p *policy) endWait(now, arrive, at int64) holdResult {
	return holdResult{at: at - (arrive - now), why: WhyProbe, detail: p.describe(cWindow) + "; the last unit waits to find where the window ends"}
}

// shortSpread is how close the bounds on a window shorter than a second
// come before its search ends (reserveEnd).
const shortSpread = 5e6

// probeGain is the least a probe must save over waiting for the cautious
// candidate to be worth a refusal: a refused request waits at least
// decide's floor of 100 ms before it is sent again, and a few round trips
// are spent learning. TestProbeWorthIt pins it.
func (p *policy) probeGain(k *keyState) int64 {
	return max(4*k.rtt, int64(minProbeGain))
}

const minProbeGain = 100e6

// inFlightIn reports whether a lease is in flight in bucket.
func (k *keyState) inFlightIn(bname string) bool {
	return k.flightOf(bname) != nil
}

// describe says what the quota is and what holds it back, for the reason of
// a wait.
func (p *policy) describe(c candidate) string {
	name := p.name
	if name == "" {
		name = string(p.unit)
	}
	s := fmt.Sprintf("%q %d left of %d", name, max(p.obsRem, 0), p.limit)
	if w := p.period.hi; w > 0 {
		s += fmt.Sprintf(" per %v", time.Duration(w))
	}
	s += "; returns as a " + c.String()
	if c == cBucket && p.rLo > 0 {
		s += fmt.Sprintf(" at %.3g/s", p.rLo)
	}
	return s
}

// touch extends the key's life past t and everything it holds.
func (s *State) touch(t int64, cfg *Config) {
	k := &s.k
	idle := cfg.idleTTL()
	exp := t + idle
	for i := range k.buckets {
		if b := k.buckets[i].pause; b > t {
			exp = max(exp, b+idle)
		}
	}
	if k.sums(); k.derived.maxExp > exp {
		for i := range k.leases {
			exp = max(exp, k.leases[i].expires)
		}
	}
	if until := k.silent.keep(); until > t {
		exp = max(exp, until+idle) // a silent server's windows may outlast the idle time
	}
	for i := range k.policies {
		for _, b := range k.policies[i].win {
			if b.hi > t && b.hi < t+maxHorizon {
				exp = max(exp, b.hi+idle)
			}
		}
	}
	s.Expires = time.Unix(0, min(exp, t+maxHorizon))
}

// after returns t plus f seconds, saturating.
func after(t int64, f float64) int64 {
	if f <= 0 {
		return t
	}
	if f > float64(maxHorizon)/1e9 {
		return t + maxHorizon
	}
	return t + int64(math.Ceil(f*1e9))
}

// counterSlack is how far past its limit a sliding counter's fractional
// count may be planned, where it is the one candidate left. A counter
// weighs the previous window's count by the share of it still covered, so
// its count is rarely whole: the servers admit while it is below the limit
// less the request's cost (ratelimittest, Cloudflare's), or while it is so
// rounded to the nearest unit (go-chi/httprate: below the limit less a
// half), where a count of at most the limit less the cost, as for the
// other candidates, paces a unit of the limit short in every window (4 a
// second of 5). The slack is what is left of maxCounterSlack after the
// count can rise in counterSlackSpreads spreads of the round trips (the
// counter returns its previous window's count at limit/window): a unit
// landing that much earlier than planned would find the count higher by
// that. A refusal that only the slack sent turns it off for a revival
// period (slackDoubted).
func (p *policy) counterSlack(k *keyState, t int64) float64 {
	w := p.period.hi
	if p.alive != 1<<cCounter || w <= 0 || p.doubted(p.slackDoubted, t) {
		return 0
	}
	spread := 2 * k.orderSlack() // the round trips' spread, a millisecond at least
	rise := float64(p.limit) * counterSlackSpreads * float64(spread) / float64(w)
	return max(maxCounterSlack-rise, 0)
}

// maxCounterSlack is the most counterSlack allows: short of the half unit
// that a counter rounded to the nearest unit admits past its limit.
const maxCounterSlack = 0.45

// counterSlackSpreads is how many spreads of the round trips counterSlack
// leaves for the count's rise: the unit may land a spread earlier than
// planned, and the answers that placed the count were a spread off
// themselves. With one, the grid's counters at 200/s on 1 ms round trips
// took a refusal (and its second's pause) they do not take with two.
const counterSlackSpreads = 2

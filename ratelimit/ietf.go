package ratelimit

import (
	"strings"

	"github.com/headway-go/headway/internal/sf"
)

// policyBuilder turns the fields of one response into policies, dialect by
// dialect, in the order ParseHeaders documents.
//
// The fields and the clock are passed to each method rather than kept in the
// builder: the builder's slice grows on the heap, and Go's escape analysis
// would move whatever the builder points to there too, costing the hot path
// (a response without rate-limit headers) two allocations.
type policyBuilder struct {
	out      []Policy
	dialects DialectSet
	memo     *Parser // remembers policy fields; nil for ParseHeaders
}

func (b *policyBuilder) build(f *fieldSet, db *dateBase) {
	// Each dialect is read only when one of its fields is present (each
	// reads nothing otherwise): a response pays for the dialects it speaks.
	if f.hasAny(ietfFields) {
		b.ietf(f, db)
	}
	if f.hasAny(jiraBetaFields) {
		b.jiraBeta(f, db)
	}
	if f.hasAny(xRateLimitFields) {
		b.xRateLimit(f, db)
	}
	if f.hasAny(xRateLimitHyphenatedFields) {
		b.xRateLimitHyphenated(f, db)
	}
	b.families(f, db)
	if f.hasAny(vendorFields) {
		b.shopify(f)
		b.hubspot(f)
		b.salesforce(f)
		b.azureUserQuota(f)
		b.simpleVendors(f, db)
	}
}

// The fields each dialect reader starts from: without any of them, it reads
// nothing.
var (
	ietfFields = fields(fRateLimit, fRateLimitPolicy, fRateLimitLimit, fRateLimitRemaining, fRateLimitReset,
		fRateLimitName, fRateLimitObserved, fRateLimitResetTime)
	jiraBetaFields   = fields(fBetaRateLimit, fBetaRateLimitPolicy)
	xRateLimitFields = fields(fXRLResetAfter, fXRLBucket, fXRLGlobal, fXRLScope, fXRLLimit, fXRLRemaining,
		fXRLReset, fXRLUsed, fXRLResource, fXRLNearLimit, fEnvoyRateLimited)
	xRateLimitHyphenatedFields = fields(fXRateLimitLimit, fXRateLimit, fXRateLimitRemaining, fXRateLimitReset)
	vendorFields               = fields(fShopify, fHubSpotDaily, fHubSpotDailyRemaining, fHubSpotInterval,
		fHubSpotMax, fHubSpotRemaining, fHubSpotSecondly, fHubSpotSecondlyRemaining, fSforceLimitInfo,
		fMsUserQuotaRemaining, fMsUserQuotaResetsAfter, fTokenLimitLimit, fTokenLimitRemaining,
		fFastlyRemaining, fFastlyReset, fAkamaiLimit, fAkamaiRemaining, fAkamaiNext)
)

// maxPolicies bounds the policies read from one response. Real servers
// announce a handful; the bound keeps a hostile response (thousands of
// items or headers) from costing more than linear time.
const maxPolicies = 64

// add appends p, unless maxPolicies are already there; it reports whether
// it did.
func (b *policyBuilder) add(p Policy) bool {
	if len(b.out) >= maxPolicies {
		return false
	}
	if b.out == nil {
		b.out = make([]Policy, 0, 2) // most responses announce one or two
	}
	b.out = append(b.out, p)
	return true
}

// group is a run of policies read from one dialect's fields, among which
// the current state (remaining and reset) is matched to announced quotas.
type group struct {
	b       *policyBuilder
	start   int
	matched uint64 // bit i: b.out[start+i] already has its current state
}

func (b *policyBuilder) group() group { return group{b: b, start: len(b.out)} }

func (g *group) policies() []Policy { return g.b.out[g.start:] }

func (g *group) isMatched(i int) bool { return i >= 0 && i < 64 && g.matched&(1<<i) != 0 }

func (g *group) setMatched(i int) {
	if i >= 0 && i < 64 {
		g.matched |= 1 << i
	}
}

// announce adds the policy of one item of a RateLimit-Policy field (or of
// the items after the first in a -03 RateLimit-Limit). A named item is a -08
// policy of the dialect named; a numeric item is a legacy quota policy,
// whose dialect is set by the caller once it knows which draft it read. It
// reports which kind the item was.
func (g *group) announce(it *sf.Item, named Dialect) (isNamed, isNumeric bool) {
	p, ok := announced(it, named)
	if !ok {
		return false, false
	}
	return g.offer(p)
}

// offer adds a policy that announced read, unless it repeats a legacy
// quota of the group, and reports which kind it was.
func (g *group) offer(p Policy) (isNamed, isNumeric bool) {
	if p.Dialect != 0 || !g.hasEqual(p) { // the same quota in two legacy fields counts once
		g.b.add(p)
	}
	return p.Dialect != 0, p.Dialect == 0
}

// announced reads the policy of one item of a policy field; ok is false
// for an item that announces nothing.
func announced(it *sf.Item, named Dialect) (p Policy, ok bool) {
	switch it.Val.Kind {
	case sf.String:
		p.Name, p.Dialect = it.Val.Str, named
		if v, ok := it.Param(sf.ParamQ); ok && v.Kind == sf.Number {
			p.Limit, p.HasLimit = countFromFloat(v.Num)
		}
	case sf.Number:
		p.Limit, p.HasLimit = countFromFloat(it.Val.Num)
		if v, ok := it.Param(sf.ParamName); ok && v.Kind == sf.String {
			p.Name = v.Str
		}
	default:
		return p, false
	}
	p.Unit = UnitRequests
	if v, ok := it.Param(sf.ParamQU); ok && v.Kind == sf.String && v.Str != "" {
		p.Unit = Unit(v.Str)
	}
	if v, ok := it.Param(sf.ParamW); ok && v.Kind == sf.Number {
		if w, ok := secondsFromFloat(v.Num); ok {
			p.Window = w
		}
	}
	if v, ok := it.Param(sf.ParamPK); ok && (v.Kind == sf.Bytes || v.Kind == sf.String) {
		p.Partition = v.Str
	}
	if !p.HasLimit && p.Window == 0 {
		return p, false // a policy without a quota (q is required) says nothing
	}
	return p, true
}

// announceAll announces every item of a policy field. With a Parser, a
// field it has read before is not read again: what it announced is.
func (g *group) announceAll(lines []string, named Dialect) (sawNamed, sawNumeric bool) {
	if len(lines) == 0 {
		return false, false
	}
	if ps, ok := g.b.memo.announcedBefore(lines, named); ok {
		for _, p := range ps {
			n, num := g.offer(p)
			sawNamed, sawNumeric = sawNamed || n, sawNumeric || num
		}
		return sawNamed, sawNumeric
	}
	var rec announcements
	r := sf.Reader{Lines: lines}
	var it sf.Item
	for r.Next(&it) {
		p, ok := announced(&it, named)
		if !ok {
			continue
		}
		if g.b.memo != nil {
			rec.record(p)
		}
		n, num := g.offer(p)
		sawNamed, sawNumeric = sawNamed || n, sawNumeric || num
	}
	if g.b.memo != nil {
		g.b.memo.remember(lines, named, &rec)
	}
	return sawNamed, sawNumeric
}

func (g *group) hasEqual(p Policy) bool {
	for _, q := range g.policies() {
		if q == p {
			return true
		}
	}
	return false
}

// current merges a named -08 current state (from a RateLimit item) into
// the announced policy of the same name and partition, or adds it.
func (g *group) currentNamed(cur Policy) {
	for i := range g.policies() {
		p := &g.b.out[g.start+i]
		if g.isMatched(i) || p.Name != cur.Name || p.Partition != "" && cur.Partition != "" && p.Partition != cur.Partition {
			continue
		}
		g.setMatched(i)
		fillCurrent(p, cur)
		return
	}
	if g.b.add(cur) {
		g.setMatched(len(g.policies()) - 1)
	}
}

// currentLegacy merges an unnamed current state (-03 to -07, Envoy) into the
// first announced policy with the same quota, or, when it carries no limit,
// into the only announced policy; otherwise it adds it after them.
func (g *group) currentLegacy(cur Policy) {
	ps := g.policies()
	for i := range ps {
		p := &g.b.out[g.start+i]
		same := cur.HasLimit && p.HasLimit && p.Limit == cur.Limit &&
			(cur.Window == 0 || p.Window == 0 || p.Window == cur.Window) &&
			(cur.Name == "" || p.Name == "" || p.Name == cur.Name)
		if !g.isMatched(i) && (same || !cur.HasLimit && len(ps) == 1) {
			g.setMatched(i)
			fillCurrent(p, cur)
			return
		}
	}
	if cur.HasLimit || cur.HasRemaining || cur.HasReset {
		if g.b.add(cur) {
			g.setMatched(len(g.policies()) - 1)
		}
	}
}

// fillCurrent copies what cur knows and p does not into p.
func fillCurrent(p *Policy, cur Policy) {
	if !p.HasLimit {
		p.Limit, p.HasLimit = cur.Limit, cur.HasLimit
	}
	if cur.HasRemaining {
		p.Remaining, p.HasRemaining = cur.Remaining, true
	}
	if cur.HasReset {
		p.Reset, p.HasReset = cur.Reset, true
	}
	if p.Window == 0 {
		p.Window = cur.Window
	}
	if p.Name == "" {
		p.Name = cur.Name
	}
	if p.Partition == "" {
		p.Partition = cur.Partition
	}
	if p.Scope == "" {
		p.Scope = cur.Scope
	}
}

// setDialect gives every policy of the group that has none the dialect d.
func (g *group) setDialect(d Dialect) {
	for i := range g.policies() {
		if p := &g.b.out[g.start+i]; p.Dialect == 0 {
			p.Dialect = d
		}
	}
}

// ietf reads the RateLimit fields of every draft, and GitLab's.
func (b *policyBuilder) ietf(f *fieldSet, db *dateBase) {
	if f.has(fRateLimitName) || f.has(fRateLimitObserved) || f.has(fRateLimitResetTime) {
		b.gitlab(f, db)
	} else if f.has(fRateLimitLimit) || f.has(fRateLimitRemaining) || f.has(fRateLimitReset) {
		g := b.group()
		_, numericPolicy := g.announceAll(f.lines(fRateLimitPolicy), DialectIETFDraft08)
		cur := legacyCurrent(f, db, f.lines(fRateLimitLimit), fRateLimitRemaining, fRateLimitReset, &g)
		g.currentLegacy(cur)
		d := DialectIETFDraft00
		if numericPolicy {
			d = DialectIETFDraft04
		}
		g.setDialect(d)
		if len(g.policies()) > 0 {
			b.dialects = b.dialects.With(d)
		}
		if g.hasNamed() {
			b.dialects = b.dialects.With(DialectIETFDraft08)
		}
		b.structuredCurrent(&g, f.lines(fRateLimit), DialectIETFDraft08)
		return
	}
	if f.has(fRateLimit) || f.has(fRateLimitPolicy) {
		b.structured(f.lines(fRateLimitPolicy), f.lines(fRateLimit), DialectIETFDraft08)
	}
}

func (g *group) hasNamed() bool {
	for _, p := range g.policies() {
		if p.Dialect != 0 && p.Name != "" {
			return true
		}
	}
	return false
}

// structured reads a -07 or -08 pair of fields: policy (RateLimit-Policy)
// and current (RateLimit). named is the dialect of the -08 form.
func (b *policyBuilder) structured(policy, current []string, named Dialect) {
	g := b.group()
	sawNamed, sawNumeric := g.announceAll(policy, named)
	if sawNamed {
		b.dialects = b.dialects.With(named)
	}
	if sawNumeric && !isDictionary(current) {
		// A -04..-06 policy field without the fields it belongs to.
		g.setDialect(DialectIETFDraft04)
		b.dialects = b.dialects.With(DialectIETFDraft04)
	}
	b.structuredCurrent(&g, current, named)
}

// structuredCurrent reads a RateLimit field in either the -07 dictionary
// form or the -08 list form.
func (b *policyBuilder) structuredCurrent(g *group, current []string, named Dialect) {
	if len(current) == 0 {
		return
	}
	if isDictionary(current) {
		cur := Policy{Unit: UnitRequests, Dialect: DialectIETFDraft07}
		r := sf.Reader{Lines: current, Dict: true}
		var m sf.Item
		for r.Next(&m) {
			if m.Val.Kind != sf.Number {
				continue
			}
			switch m.Key {
			case "limit":
				cur.Limit, cur.HasLimit = countFromFloat(m.Val.Num)
			case "remaining":
				cur.Remaining, cur.HasRemaining = countFromFloat(m.Val.Num)
			case "reset":
				cur.Reset, cur.HasReset = secondsFromFloat(m.Val.Num)
			}
		}
		if cur.HasLimit || cur.HasRemaining || cur.HasReset {
			g.currentLegacy(cur)
		}
		g.setDialect(DialectIETFDraft07) // the numeric policies too
		if len(g.policies()) > 0 {
			b.dialects = b.dialects.With(DialectIETFDraft07)
		}
		return
	}
	saw := false
	r := sf.Reader{Lines: current}
	var it sf.Item
	for r.Next(&it) {
		if it.Val.Kind != sf.String {
			continue
		}
		cur := Policy{Name: it.Val.Str, Unit: UnitRequests, Dialect: named}
		if v, ok := it.Param(sf.ParamR); ok && v.Kind == sf.Number {
			cur.Remaining, cur.HasRemaining = countFromFloat(v.Num)
		}
		if v, ok := it.Param(sf.ParamT); ok && v.Kind == sf.Number {
			cur.Reset, cur.HasReset = secondsFromFloat(v.Num)
		}
		if v, ok := it.Param(sf.ParamPK); ok && (v.Kind == sf.Bytes || v.Kind == sf.String) {
			cur.Partition = v.Str
		}
		if cur.HasRemaining || cur.HasReset { // r is required; an item without says nothing
			g.currentNamed(cur)
			saw = true
		}
	}
	if saw {
		b.dialects = b.dialects.With(named)
	}
}

// isDictionary reports whether a RateLimit field is in the -07 dictionary
// form ("limit=100, ...") rather than the -08 list form ("\"burst\";r=5").
func isDictionary(lines []string) bool {
	if len(lines) == 0 {
		return false
	}
	s := strings.TrimLeft(lines[0], " \t")
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.', c == '*':
		case c == ' ' || c == '\t':
			s = strings.TrimLeft(s[i:], " \t")
			return s != "" && s[0] == '=' && i > 0
		default:
			return c == '=' && i > 0
		}
	}
	return false
}

// legacyCurrent reads the current state of a -03 style triple: a limit field
// ("10" or "10, 10;w=1, 50;w=60": the current limit, then policies, which
// are announced in g), a remaining and a reset field.
func legacyCurrent(f *fieldSet, db *dateBase, limit []string, remaining, reset field, g *group) Policy {
	cur := Policy{Unit: UnitRequests}
	r := sf.Reader{Lines: limit}
	var it sf.Item
	for n := 0; r.Next(&it); n++ {
		if n > 0 {
			g.announce(&it, 0)
			continue
		}
		if it.Val.Kind == sf.Number {
			cur.Limit, cur.HasLimit = countFromFloat(it.Val.Num)
		}
		if v, ok := it.Param(sf.ParamW); ok && v.Kind == sf.Number {
			cur.Window, _ = secondsFromFloat(v.Num)
		}
		if v, ok := it.Param(sf.ParamName); ok && v.Kind == sf.String {
			cur.Name = v.Str
		}
		if v, ok := it.Param(sf.ParamQU); ok && v.Kind == sf.String && v.Str != "" {
			cur.Unit = Unit(v.Str)
		}
	}
	if v, ok := f.first(remaining); ok {
		cur.Remaining, cur.HasRemaining = parseCount(v)
	}
	if v, ok := f.first(reset); ok {
		cur.Reset, cur.HasReset = parseReset(v, resetAuto, db)
		cur.ResetAbsolute = db.abs
	}
	return cur
}

// gitlab reads GitLab's RateLimit-* fields: one named policy whose
// RateLimit-Reset is a Unix time and RateLimit-ResetTime an HTTP-date.
func (b *policyBuilder) gitlab(f *fieldSet, db *dateBase) {
	p := Policy{Unit: UnitRequests, Dialect: DialectGitLab}
	p.Name, _ = f.first(fRateLimitName)
	p.Name = strings.TrimSpace(p.Name)
	if v, ok := f.first(fRateLimitLimit); ok {
		p.Limit, p.HasLimit = parseCount(v)
	}
	if v, ok := f.first(fRateLimitRemaining); ok {
		p.Remaining, p.HasRemaining = parseCount(v)
	}
	if v, ok := f.first(fRateLimitObserved); ok && !p.HasRemaining {
		p.remainingFromUsed(v)
	}
	if v, ok := f.first(fRateLimitResetTime); ok {
		if t, ok := parseHTTPDate(v); ok {
			p.Reset, p.HasReset, p.ResetAbsolute = untilClamped(db.now(), t), true, true
		}
	}
	if v, ok := f.first(fRateLimitReset); ok && !p.HasReset {
		p.Reset, p.HasReset = parseReset(v, resetEpoch, db)
		p.ResetAbsolute = db.abs
	}
	if p.HasLimit || p.HasRemaining || p.HasReset {
		b.dialects = b.dialects.With(DialectGitLab)
		b.add(p)
	}
}

// jiraBeta reads Jira's Beta-RateLimit-Policy and Beta-RateLimit fields, in
// the -08 form. Jira counts points there, but the fields carry no qu, so
// the unit is the draft's default, requests.
func (b *policyBuilder) jiraBeta(f *fieldSet, db *dateBase) {
	if f.has(fBetaRateLimit) || f.has(fBetaRateLimitPolicy) {
		b.structured(f.lines(fBetaRateLimitPolicy), f.lines(fBetaRateLimit), DialectJira)
	}
}

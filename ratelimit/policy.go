package ratelimit

import (
	"fmt"
	"strings"
	"time"
)

// Policy is one quota a server announced: Limit units per Window, of which
// Remaining are left until the quota resets, Reset from now. Servers rarely
// announce everything: each field says whether it is known.
type Policy struct {
	// Name identifies the policy when the server named it: the IETF
	// policy name ("burst"), GitHub's resource ("core", "search"),
	// GitLab's RateLimit-Name, an Azure or Zendesk header suffix
	// ("subscription-reads", "tickets-index"). Empty when not named.
	Name string
	// Unit is what the quota counts; UnitRequests unless the server said
	// otherwise.
	Unit Unit
	// Limit is the quota: how many units the policy allows per window.
	Limit    int64
	HasLimit bool
	// Remaining is how many units are left before the server refuses.
	// Never negative; fractional counts (Reddit) are rounded down.
	Remaining    int64
	HasRemaining bool
	// Window is the length of the policy's time window; 0 when unknown.
	Window time.Duration
	// Reset is how long until the quota is restored (fully, or by a step,
	// as the dialect defines), measured like Observation.RetryAfter: from
	// the response's Date when an absolute time had to be converted. A
	// reset in the past is 0.
	Reset    time.Duration
	HasReset bool
	// ResetAbsolute reports that the server wrote the reset as an instant
	// (a Unix time or a date) rather than as a delay: Reset was measured
	// from the response's Date, and an instant in whole seconds was rounded
	// on the server's clock, not from the moment it answered.
	ResetAbsolute bool
	// Scope is where the dialect says the quota applies: Discord's
	// X-RateLimit-Scope ("user", "shared"), Azure's scope for resource
	// policies. Empty when not given.
	Scope string
	// Partition identifies the bucket the request was counted in: the
	// IETF partition key (pk, decoded) or Discord's X-RateLimit-Bucket.
	Partition string
	// Dialect is the format the policy was read from.
	Dialect Dialect
}

// Exhausted reports whether the policy is known to have nothing left.
func (p Policy) Exhausted() bool { return p.HasRemaining && p.Remaining == 0 }

// String describes the policy in a few words, leaving out what the server
// did not say, for example `"burst" 0 of 100 requests left per 1m0s, resets
// in 30s`.
func (p Policy) String() string {
	var b strings.Builder
	if p.Name != "" {
		fmt.Fprintf(&b, "%q ", p.Name)
	}
	unit := p.Unit
	if unit == "" {
		unit = UnitRequests
	}
	switch {
	case p.HasRemaining && p.HasLimit:
		fmt.Fprintf(&b, "%d of %d %s left", p.Remaining, p.Limit, unit)
	case p.HasRemaining:
		fmt.Fprintf(&b, "%d %s left", p.Remaining, unit)
	case p.HasLimit:
		fmt.Fprintf(&b, "limit %d %s", p.Limit, unit)
	default:
		fmt.Fprintf(&b, "%s", unit)
	}
	if p.Window > 0 {
		fmt.Fprintf(&b, " per %v", p.Window)
	}
	if p.HasReset {
		fmt.Fprintf(&b, ", resets in %v", p.Reset)
	}
	return b.String()
}

// Unit is what a quota counts.
type Unit string

// Units named by the IETF draft and by vendors.
const (
	UnitRequests           Unit = "requests"
	UnitTokens             Unit = "tokens"
	UnitInputTokens        Unit = "input-tokens"
	UnitOutputTokens       Unit = "output-tokens"
	UnitContentBytes       Unit = "content-bytes"
	UnitConcurrentRequests Unit = "concurrent-requests"
)

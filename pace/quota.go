package pace

import (
	"fmt"
	"slices"
	"time"
)

// Quota is a limit known from an API's documentation rather than from its
// headers: at most Limit requests in any Window, and, when 0 < Burst <
// Limit, at most Burst at once, the rest spaced at Limit per Window. It is
// enforced before any header arrives, and holds whatever the server's
// windows' phase.
type Quota struct {
	Limit  int
	Window time.Duration
	Burst  int
}

// String describes the quota.
func (q Quota) String() string {
	s := fmt.Sprintf("%d per %v", q.Limit, q.Window)
	if q.Burst > 0 && q.Burst < q.Limit {
		s += fmt.Sprintf(" (burst %d)", q.Burst)
	}
	return s
}

// QuotaState is a declared quota's state: the sending times within its
// last window, and its burst's token bucket.
type QuotaState struct {
	Sends  []time.Time `json:"sends,omitempty"`
	Tokens float64     `json:"tokens,omitempty"`
	Filled time.Time   `json:"filled,omitempty"`
}

// growQuotas makes room for n declared quotas.
func (s *State) growQuotas(n int) {
	if len(s.Quotas) < n {
		s.Quotas = append(s.Quotas, make([]QuotaState, n-len(s.Quotas))...)
	}
}

func (qs *QuotaState) trim(now time.Time, q Quota) {
	i := 0
	for i < len(qs.Sends) && !qs.Sends[i].After(now.Add(-q.Window)) {
		i++
	}
	qs.Sends = slices.Delete(qs.Sends, 0, i)
}

func (q Quota) rate() float64 { return float64(q.Limit) / seconds(q.Window) }

func (q Quota) spaced() bool { return q.Burst > 0 && q.Burst < q.Limit }

func (qs *QuotaState) fill(now time.Time, q Quota) {
	if qs.Filled.IsZero() {
		qs.Tokens, qs.Filled = float64(q.Burst), now
		return
	}
	if now.After(qs.Filled) {
		qs.Tokens = min(float64(q.Burst), qs.Tokens+q.rate()*seconds(now.Sub(qs.Filled)))
		qs.Filled = now
	}
}

// hold reports whether a request may go at now under q.
func (qs *QuotaState) hold(now time.Time, q Quota) (Decision, bool) {
	if q.Limit <= 0 || q.Window <= 0 {
		return Decision{}, true
	}
	qs.trim(now, q)
	d := Decision{Definite: true, Why: WhyDeclared, Detail: q.String()}
	if len(qs.Sends) >= q.Limit {
		d.At = qs.Sends[len(qs.Sends)-q.Limit].Add(q.Window)
		return d, false
	}
	if q.spaced() {
		qs.fill(now, q)
		if qs.Tokens < 1 {
			d.At = after(now, (1-qs.Tokens)/q.rate())
			return d, false
		}
	}
	return Decision{}, true
}

// sent records a request sent at now.
func (qs *QuotaState) sent(now time.Time, q Quota) {
	if q.Limit <= 0 || q.Window <= 0 {
		return
	}
	qs.trim(now, q)
	qs.Sends = append(qs.Sends, now)
	if len(qs.Sends) > q.Limit {
		qs.Sends = slices.Delete(qs.Sends, 0, len(qs.Sends)-q.Limit)
	}
	if q.spaced() {
		qs.fill(now, q)
		qs.Tokens--
	}
}

// refund takes back a request recorded at t that never left.
func (qs *QuotaState) refund(t time.Time, q Quota) {
	for i := len(qs.Sends) - 1; i >= 0; i-- {
		if qs.Sends[i].Equal(t) {
			qs.Sends = slices.Delete(qs.Sends, i, i+1)
			if q.spaced() && !qs.Filled.IsZero() {
				qs.Tokens = min(qs.Tokens+1, float64(q.Burst))
			}
			return
		}
	}
}

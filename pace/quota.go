package pace

import (
	"fmt"
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

func (q Quota) rate() float64 { return float64(q.Limit) / seconds(q.Window) }

func (q Quota) spaced() bool { return q.Burst > 0 && q.Burst < q.Limit }

func (q Quota) valid() bool { return q.Limit > 0 && q.Window > 0 }

// quotaState is a declared quota's state: a sliding log of the requests in
// its last window, and its burst's token bucket.
//
// The server counts a request when it arrives, not when it leaves: the
// first requests of a key arrive late (a connection is set up first), and
// round trips vary. A slot is therefore freed one window after the latest
// instant its request can have arrived at: its answer, less the least time
// an answer takes to come back (half the least round trip), and a request
// sent at t is taken to arrive no sooner than t plus that half. A slot
// whose request is still in flight is not freed.
type quotaState struct {
	sends  []quotaSend
	tokens float64
	filled int64
}

// quotaSend is one request in a declared quota's log.
type quotaSend struct {
	seq  uint64
	sent int64
	recv int64 // 0 while in flight
}

// maxQuotaInFlight bounds the sends a declared quota keeps beyond its
// limit, which are in flight (their slots free once answered).
const maxQuotaInFlight = 1024

// growQuotas makes room for n declared quotas.
func (k *keyState) growQuotas(n int) {
	if len(k.quotas) < n {
		k.quotas = append(k.quotas, make([]quotaState, n-len(k.quotas))...)
	}
}

// frees returns when s's slot frees, for a request sent then that arrives
// lead after: never while it is in flight.
func (s quotaSend) frees(w, lead int64) int64 {
	if s.recv == 0 {
		return never
	}
	return s.recv - lead + w - lead
}

// trim forgets the requests whose slots are free at t.
func (qs *quotaState) trim(t, lead int64, q Quota) {
	n := 0
	for _, s := range qs.sends {
		if s.frees(int64(q.Window), lead) > t {
			qs.sends[n] = s
			n++
		}
	}
	qs.sends = qs.sends[:n]
}

func (qs *quotaState) fill(t int64, q Quota) {
	if qs.filled == 0 {
		qs.tokens, qs.filled = float64(q.Burst), t
		return
	}
	if t > qs.filled {
		qs.tokens = min(float64(q.Burst), qs.tokens+q.rate()*float64(t-qs.filled)/1e9)
		qs.filled = t
	}
}

// hold reports whether a request may go at t under q, and if not, until
// when it waits.
func (qs *quotaState) hold(k *keyState, t int64, q Quota) (int64, bool) {
	if !q.valid() {
		return 0, true
	}
	lead := k.lead()
	qs.trim(t, lead, q)
	if len(qs.sends) >= q.Limit {
		// The slots free in order of their answers; one must.
		at := int64(never)
		for _, s := range qs.sends {
			at = min(at, s.frees(int64(q.Window), lead))
		}
		if at == never {
			at = t + int64(pollStep) // every slot in flight: an answer frees one
		}
		return at, false
	}
	if q.spaced() {
		qs.fill(t, q)
		if qs.tokens < 1 {
			return after(t, (1-qs.tokens)/q.rate()), false
		}
	}
	return 0, true
}

// sent records a request sent at t under lease seq.
func (qs *quotaState) sent(t int64, seq uint64, q Quota) {
	if !q.valid() {
		return
	}
	if len(qs.sends) >= q.Limit+maxQuotaInFlight {
		// Bounded: the oldest answered sends go first; only the Limit
		// newest can hold a slot.
		qs.sends = qs.sends[len(qs.sends)-q.Limit-maxQuotaInFlight+1:]
	}
	qs.sends = append(qs.sends, quotaSend{seq: seq, sent: t})
	if q.spaced() {
		qs.fill(t, q)
		qs.tokens--
	}
}

// answered records that lease seq's request was answered at t.
func (qs *quotaState) answered(seq uint64, t int64) {
	for i := range qs.sends {
		if qs.sends[i].seq == seq {
			qs.sends[i].recv = t
			return
		}
	}
}

// refund takes back the request of lease seq, which never left.
func (qs *quotaState) refund(seq uint64, q Quota) {
	for i := range qs.sends {
		if qs.sends[i].seq == seq {
			qs.sends = append(qs.sends[:i], qs.sends[i+1:]...)
			if q.spaced() && qs.filled != 0 {
				qs.tokens = min(qs.tokens+1, float64(q.Burst))
			}
			return
		}
	}
}

package ratelimittest

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts what the server did, for assertions.
type Stats struct {
	// Served counts admitted requests that reached the API handler.
	Served int64
	// Rejected counts requests refused for quota.
	Rejected int64
	// Failed counts admitted requests answered with an injected 5xx
	// (WithServerErrors); Dropped, those whose connection was closed
	// (WithDroppedConnections). Both were charged to the quota.
	Failed, Dropped int64
	// Keys holds the counts of each partition key ("" for the shared quota).
	Keys map[string]KeyStats
}

// Admitted is every request charged to the quota: Served + Failed + Dropped.
func (s Stats) Admitted() int64 { return s.Served + s.Failed + s.Dropped }

// KeyStats counts one partition key's requests.
type KeyStats struct {
	Admitted, Rejected int64
}

// Admission is one admitted request in the admission log.
type Admission struct {
	Time time.Time // the server clock's time of the decision (without skew)
	Key  string    // the partition key
}

type counters struct {
	served, rejected, failed, dropped atomic.Int64
	responses, admitted               atomic.Int64 // sequence numbers for the faults
	keys                              sync.Map     // string -> *keyCounters

	logMu   sync.Mutex
	log     []Admission // ring of the last logSize admissions
	logNext int         // next slot to write once the ring is full
	logSize int
}

type keyCounters struct{ admitted, rejected atomic.Int64 }

func (c *counters) key(k string) *keyCounters {
	if v, ok := c.keys.Load(k); ok {
		return v.(*keyCounters)
	}
	v, _ := c.keys.LoadOrStore(k, new(keyCounters))
	return v.(*keyCounters)
}

func (c *counters) record(a Admission) {
	if c.logSize == 0 {
		return
	}
	c.logMu.Lock()
	if len(c.log) < c.logSize {
		c.log = append(c.log, a)
	} else {
		c.log[c.logNext] = a
		c.logNext = (c.logNext + 1) % c.logSize
	}
	c.logMu.Unlock()
}

func (c *counters) stats() Stats {
	s := Stats{
		Served:   c.served.Load(),
		Rejected: c.rejected.Load(),
		Failed:   c.failed.Load(),
		Dropped:  c.dropped.Load(),
		Keys:     map[string]KeyStats{},
	}
	c.keys.Range(func(k, v any) bool {
		kc := v.(*keyCounters)
		s.Keys[k.(string)] = KeyStats{Admitted: kc.admitted.Load(), Rejected: kc.rejected.Load()}
		return true
	})
	return s
}

func (c *counters) admissions() []Admission {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	out := make([]Admission, 0, len(c.log))
	out = append(out, c.log[c.logNext:]...)
	out = append(out, c.log[:c.logNext]...)
	// Concurrent requests may log out of order; decisions are ordered by time.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

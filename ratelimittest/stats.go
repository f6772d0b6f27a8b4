package ratelimittest

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts what the server did, for assertions.
type Stats struct {
	// Served counts the requests admitted, and so charged to the quota.
	Served int64
	// Rejected counts the requests refused for quota.
	Rejected int64
	// Failed and Dropped count the served requests that a fault then
	// answered with a 5xx (WithServerErrors) or left unanswered
	// (WithDroppedConnections); the others reached the API.
	Failed, Dropped int64
	// Keys holds the counts of each partition key ("" for the shared quota),
	// for the first 65536 keys seen.
	Keys map[string]KeyStats
}

// KeyStats counts one partition key's requests.
type KeyStats struct {
	Served, Rejected int64
}

// Admission is one admitted request in the admission log.
type Admission struct {
	Time time.Time // the server clock's time of the decision (without skew)
	Key  string    // the partition key
}

type counters struct {
	served, rejected, failed, dropped atomic.Int64
	responses                         atomic.Int64 // sequence number for the faults
	keys                              sync.Map     // string -> *keyCounters
	nkeys                             atomic.Int64

	logMu   sync.Mutex
	log     []Admission // ring of the last logSize admissions
	logNext int         // next slot to write once the ring is full
	logSize int
}

type keyCounters struct{ served, rejected atomic.Int64 }

// maxKeyStats bounds how many keys Stats counts one by one, so a server
// partitioned by client address stays bounded under attack.
const maxKeyStats = 1 << 16

// key returns k's counters, or nil once maxKeyStats keys are counted.
func (c *counters) key(k string) *keyCounters {
	if v, ok := c.keys.Load(k); ok {
		return v.(*keyCounters)
	}
	if c.nkeys.Load() >= maxKeyStats {
		return nil
	}
	v, loaded := c.keys.LoadOrStore(k, new(keyCounters))
	if !loaded {
		c.nkeys.Add(1)
	}
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
		s.Keys[k.(string)] = KeyStats{Served: kc.served.Load(), Rejected: kc.rejected.Load()}
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

package bench

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/headway-go/headway/internal/testkit/sim"
)

// Names of the simulations, as filters match them: the goodput cases'
// (GoodputCase.Name, "Goodput/<algorithm>/<dialect>/<peer>"), and these
// prefixes followed by a peer's name.
const (
	AmplificationPrefix = "Outage/amplification/"
	RecoveryPrefix      = "Outage/recovery/"
)

// A GoodputCell is what the report says of one goodput case: the median of
// each figure over its runs, and the errors of all of them.
type GoodputCell struct {
	Runs      int
	Attempts  int
	Throttled float64 // 429s, share of attempts
	Failed    int
	Wall      time.Duration
	Ideal     time.Duration
	Slowdown  float64 // wall / ideal
	Errors    map[string]int
}

// SimResults holds every simulation that ran. It travels as JSON from the
// test binary that runs the simulations (TestSimulationsReport) to
// cmd/benchreport.
type SimResults struct {
	Goodput       map[string]GoodputCell         // by case name
	Amplification map[string]AmplificationResult // by peer
	Recovery      map[string]RecoveryResult      // by peer
	// The runs' parameters.
	AmplificationRun Amplification
	RecoveryRun      Recovery
	GoodputRuns      int
	Runs             int // simulation runs in all
	Elapsed          time.Duration
}

// Any reports whether any simulation ran.
func (s *SimResults) Any() bool {
	return s != nil && len(s.Goodput)+len(s.Amplification)+len(s.Recovery) > 0
}

// RunSimulations runs the simulations whose names match accepts (all, when
// it is nil): goodputRuns runs of each goodput case, summarised by
// MedianCell, and one of each outage run, for every peer. bubble must run
// its function in a testing/synctest bubble of its own (synctest.Test),
// which each run needs. A line per case goes to log.
func RunSimulations(match func(name string) bool, goodputRuns int, bubble func(func()), log io.Writer) *SimResults {
	s := &SimResults{
		Goodput: map[string]GoodputCell{}, Amplification: map[string]AmplificationResult{}, Recovery: map[string]RecoveryResult{},
		AmplificationRun: DefaultAmplification, RecoveryRun: DefaultRecovery, GoodputRuns: goodputRuns,
	}
	if match == nil {
		match = func(string) bool { return true }
	}
	start := time.Now()
	for _, c := range GoodputCases() {
		if !match(c.Name) {
			continue
		}
		var rs []sim.Result
		for range goodputRuns {
			bubble(func() { rs = append(rs, c.Run()) })
		}
		cell := MedianCell(rs)
		s.Goodput[c.Name] = cell
		s.Runs += len(rs)
		fmt.Fprintf(log, "%-50s %5d attempts %6.1f%% 429s %4d failed %6.2fs %5.2fx ideal\n",
			c.Name, cell.Attempts, 100*cell.Throttled, cell.Failed, cell.Wall.Seconds(), cell.Slowdown)
	}
	for _, p := range Peers() {
		if match(AmplificationPrefix + p.Name) {
			var r AmplificationResult
			bubble(func() { r = s.AmplificationRun.Run(p) })
			s.Amplification[p.Name] = r
			s.Runs++
			fmt.Fprintf(log, "%-50s %5d attempts %5.2f per request %4d failed %8.1fs\n",
				AmplificationPrefix+p.Name, r.Attempts, r.PerRequest(), r.Failed, r.Wall.Seconds())
		}
		if match(RecoveryPrefix + p.Name) {
			var r RecoveryResult
			bubble(func() { r = s.RecoveryRun.Run(p) })
			s.Recovery[p.Name] = r
			s.Runs++
			fmt.Fprintf(log, "%-50s first success %v, throughput back %v, %.2f attempts per request in the outage\n",
				RecoveryPrefix+p.Name, r.FirstSuccess, r.Recovered, r.OutagePerRequest())
		}
	}
	s.Elapsed = time.Since(start)
	return s
}

// MedianCell summarises runs of one goodput case by the median of each
// figure (the lower middle one of an even count), and the errors of all.
func MedianCell(rs []sim.Result) GoodputCell {
	if len(rs) == 0 {
		return GoodputCell{}
	}
	med := func(f func(sim.Result) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		slices.Sort(xs)
		return xs[(len(xs)-1)/2]
	}
	c := GoodputCell{
		Runs:      len(rs),
		Attempts:  int(med(func(r sim.Result) float64 { return float64(r.Attempts) })),
		Throttled: med(func(r sim.Result) float64 { return r.ThrottledShare() }),
		Failed:    int(med(func(r sim.Result) float64 { return float64(r.Failed) })),
		Wall:      time.Duration(med(func(r sim.Result) float64 { return float64(r.Wall) })),
		Ideal:     time.Duration(med(func(r sim.Result) float64 { return float64(r.Ideal) })),
		Slowdown:  med(func(r sim.Result) float64 { return r.Slowdown() }),
		Errors:    map[string]int{},
	}
	for _, r := range rs {
		for k, v := range r.Errors {
			c.Errors[k] += v
		}
	}
	return c
}

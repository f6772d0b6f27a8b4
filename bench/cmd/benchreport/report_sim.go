package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/headway-go/headway/bench"
	rlt "github.com/headway-go/headway/ratelimittest"
)

// The targets of the simulations (the pacing issue's and the benchmarks
// issue's).
const (
	targetShareHeaders    = 0.01 // 429s, share of attempts, with rate-limit headers
	targetSlowdownHeaders = 1.05 // wall / ideal, with rate-limit headers
	targetShareNone       = 0.05 // ... without any
	targetSlowdownNone    = 1.25
	targetAmplification   = 1.2 // attempts per request in a total outage
)

// goodputName is the name of the goodput case of alg, d and peer.
func goodputName(alg rlt.Algorithm, d rlt.Dialect, peer string) string {
	return goodputPrefix + string(alg) + "/" + string(d) + "/" + peer
}

// headerDialects returns the dialects that write rate-limit headers.
func headerDialects() []rlt.Dialect {
	var ds []rlt.Dialect
	for _, d := range rlt.Dialects() {
		if d != rlt.None {
			ds = append(ds, d)
		}
	}
	return ds
}

// worst is the worst of each figure over some goodput cells, and which
// dialect gave the worst 429 share and slowdown.
type worst struct {
	n                       int // cells found
	share, slowdown         float64
	failed                  int
	shareFrom, slowdownFrom rlt.Dialect
}

func worstOf(sims *bench.SimResults, alg rlt.Algorithm, ds []rlt.Dialect, peer string) worst {
	var w worst
	for _, d := range ds {
		c, ok := sims.Goodput[goodputName(alg, d, peer)]
		if !ok {
			continue
		}
		if w.n == 0 || c.Throttled > w.share {
			w.share, w.shareFrom = c.Throttled, d
		}
		if w.n == 0 || c.Slowdown > w.slowdown {
			w.slowdown, w.slowdownFrom = c.Slowdown, d
		}
		w.failed = max(w.failed, c.Failed)
		w.n++
	}
	return w
}

func pct(x float64) string   { return fmt.Sprintf("%.1f%%", 100*x) }
func times(x float64) string { return fmt.Sprintf("%.2f×", x) }
func goodputCellText(c bench.GoodputCell) string {
	return fmt.Sprintf("%s · %d · %s", pct(c.Throttled), c.Failed, times(c.Slowdown))
}

// peerName names a peer for people.
func peerName(p bench.Peer) string {
	if p.Name == baselinePeer {
		return "net/http"
	}
	return p.Name
}

// peerColumn names a peer in a table's header.
func peerColumn(p bench.Peer) string {
	switch p.Name {
	case baselinePeer:
		return "net/http"
	case headwayPeer:
		return "**headway**"
	}
	return p.Name
}

// simTargets returns the simulations' targets that can be judged.
func simTargets(sims *bench.SimResults) []target {
	if sims == nil {
		return nil
	}
	var ts []target
	for _, alg := range rlt.Algorithms() {
		for _, headers := range []bool{true, false} {
			ds, share, slow := headerDialects(), targetShareHeaders, targetSlowdownHeaders
			what := fmt.Sprintf("goodput, %s, with headers (%d dialects): ≤ %s 429s, wall ≤ %s ideal", alg, len(ds), pctTarget(share), times(slow))
			if !headers {
				ds, share, slow = []rlt.Dialect{rlt.None}, targetShareNone, targetSlowdownNone
				what = fmt.Sprintf("goodput, %s, no headers: ≤ %s 429s, wall ≤ %s ideal", alg, pctTarget(share), times(slow))
			}
			w := worstOf(sims, alg, ds, headwayPeer)
			if w.n == 0 {
				continue
			}
			measured := fmt.Sprintf("%s, %s", pct(w.share), times(w.slowdown))
			if headers {
				share := pct(w.share)
				if w.share > 0 {
					share += " (" + string(w.shareFrom) + ")"
				}
				measured = fmt.Sprintf("worst %s, %s (%s)", share, times(w.slowdown), w.slowdownFrom)
			}
			measured += fmt.Sprintf("; %d failed", w.failed)
			ts = append(ts, target{what, measured, w.share <= share && w.slowdown <= slow})
		}
	}
	if r, ok := sims.Amplification[headwayPeer]; ok {
		measured := fmt.Sprintf("%.2f", r.PerRequest())
		if rh, ok := sims.Amplification[retryablePeer]; ok {
			measured += fmt.Sprintf(" (go-retryablehttp %.2f)", rh.PerRequest())
		}
		ts = append(ts, target{
			fmt.Sprintf("total outage (every response 503; %d requests, %d workers): ≤ %.1f attempts per request",
				sims.AmplificationRun.Requests, sims.AmplificationRun.Workers, targetAmplification),
			measured, r.PerRequest() <= targetAmplification,
		})
	}
	return ts
}

func pctTarget(x float64) string { return fmt.Sprintf("%g%%", 100*x) }

// writeGoodput writes the goodput section.
func writeGoodput(w io.Writer, sims *bench.SimResults) {
	if sims == nil || len(sims.Goodput) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	peers := bench.Peers()
	p("\n## Goodput against rate-limited APIs\n\n")
	p("Each client sends %d GETs from %d goroutines to an emulated API (`ratelimittest`) that admits %d per second,\n",
		bench.GoodputRequests, bench.GoodputWorkers, bench.GoodputLimit)
	p("for every algorithm and every header dialect it writes; every exchange takes %v (an in-memory transport that\n", bench.SimRTT)
	p("waits half of it each way). It all runs in virtual time (`testing/synctest`), so a run of seconds costs\n")
	p("milliseconds and repeats: each figure is the median of %d runs. A 429 carries `Retry-After` in every dialect.\n\n", sims.GoodputRuns)
	p("- **429s**: the share of the attempts the server saw that it refused.\n")
	p("- **failed**: requests that did not end in a 2xx once the client gave up (each has a minute).\n")
	p("- **wall / ideal**: the time until the last request ended, over the least time in which the server would\n")
	p("  admit them all (`internal/testkit/sim`'s oracle: each request sent the first millisecond the server would admit it,\n")
	p("  plus one round trip, and never less than %d round trips). Below 1 means requests failed rather than waited.\n\n",
		(bench.GoodputRequests+bench.GoodputWorkers-1)/bench.GoodputWorkers)
	p("Clients are configured as their documentation has a user write them (see [below](#how-the-clients-are-configured)):\n")
	p("headway with its defaults, the others retrying 429 and 5xx. Cells: **429s · failed · wall / ideal**; with headers,\n")
	p("the worst of each figure over the %d dialects that write them.\n\n", len(headerDialects()))
	p("![429 share and wall / ideal per algorithm and client](goodput.svg)\n\n")
	p("| algorithm | headers |")
	for _, pr := range peers {
		p(" %s |", peerColumn(pr))
	}
	p("\n|---|---|%s\n", strings.Repeat("--:|", len(peers)))
	for _, alg := range rlt.Algorithms() {
		for _, headers := range []bool{true, false} {
			ds, label := headerDialects(), fmt.Sprintf("%d dialects, worst", len(headerDialects()))
			if !headers {
				ds, label = []rlt.Dialect{rlt.None}, "none"
			}
			var cells []string
			found := false
			for _, pr := range peers {
				wst := worstOf(sims, alg, ds, pr.Name)
				if wst.n == 0 {
					cells = append(cells, "")
					continue
				}
				found = true
				cells = append(cells, fmt.Sprintf("%s · %d · %s", pct(wst.share), wst.failed, times(wst.slowdown)))
			}
			if found {
				p("| %s | %s | %s |\n", alg, label, strings.Join(cells, " | "))
			}
		}
	}

	p("\n<details><summary>Every algorithm and dialect (429s · failed · wall / ideal; attempts; ideal)</summary>\n\n")
	p("| algorithm/dialect | ideal |")
	for _, pr := range peers {
		p(" %s |", peerColumn(pr))
	}
	p("\n|---|--:|%s\n", strings.Repeat("--:|", len(peers)))
	for _, alg := range rlt.Algorithms() {
		for _, d := range rlt.Dialects() {
			var cells []string
			ideal := ""
			for _, pr := range peers {
				c, ok := sims.Goodput[goodputName(alg, d, pr.Name)]
				if !ok {
					cells = append(cells, "")
					continue
				}
				ideal = fmt.Sprintf("%.2fs", c.Ideal.Seconds())
				cells = append(cells, fmt.Sprintf("%s; %d", goodputCellText(c), c.Attempts))
			}
			if ideal != "" {
				p("| %s/%s | %s | %s |\n", alg, d, ideal, strings.Join(cells, " | "))
			}
		}
	}
	p("\n</details>\n")

	// Why headway's requests failed, if any did: the errors say.
	var notes []string
	for _, alg := range rlt.Algorithms() {
		for _, d := range rlt.Dialects() {
			c, ok := sims.Goodput[goodputName(alg, d, headwayPeer)]
			if !ok || len(c.Errors) == 0 {
				continue
			}
			var es []string
			for _, k := range slices.Sorted(maps.Keys(c.Errors)) {
				es = append(es, fmt.Sprintf("%d × `%s`", c.Errors[k], k))
			}
			notes = append(notes, fmt.Sprintf("- %s/%s (over %d runs): %s", alg, d, c.Runs, strings.Join(es, "; ")))
		}
	}
	if len(notes) > 0 {
		p("\nheadway's failed requests, by error:\n\n%s\n", strings.Join(notes, "\n"))
	}
}

// writeOutage writes the outage section.
func writeOutage(w io.Writer, sims *bench.SimResults) {
	if sims == nil || len(sims.Amplification)+len(sims.Recovery) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	a, r := sims.AmplificationRun, sims.RecoveryRun
	p("\n## A total outage, and after it\n\n")
	p("The API answers every request `503 Service Unavailable` with no `Retry-After` and no rate-limit headers (a load\n")
	p("balancer with no healthy backend), over the same in-memory transport (%v round trips), in virtual time.\n", a.RTT)
	p("Clients as in the goodput runs.\n\n")
	p("![attempts per request in an outage, and successes over time through one](outage.svg)\n")
	if len(sims.Amplification) > 0 {
		p("\n### Amplification\n\n")
		p("%d GETs from %d goroutines while the outage lasts: every request fails; how many attempts did each cost the\n", a.Requests, a.Workers)
		p("server, and how long did its caller wait to learn it? Target: headway ≤ %.1f attempts per request.\n\n", targetAmplification)
		p("| client | attempts per request | attempts | failed | until the last request failed |\n|---|--:|--:|--:|--:|\n")
		for _, pr := range bench.Peers() {
			if res, ok := sims.Amplification[pr.Name]; ok {
				p("| %s | %.2f | %d | %d | %.1fs |\n", peerColumn(pr), res.PerRequest(), res.Attempts, res.Failed, res.Wall.Seconds())
			}
		}
	}
	if len(sims.Recovery) > 0 {
		p("\n### Recovery\n\n")
		p("%d goroutines each send a GET every %v (%.0f a second in all, evenly spread; a goroutine whose request is still\n",
			r.Workers, r.Interval, r.Offered())
		p("running at its next tick skips it). The API is down for the first %v, then healthy for %v. *First success*: from the\n",
			r.Outage, r.After)
		p("end of the outage to the first 2xx a caller got. *Throughput back*: from the end of the outage to the instant from\n")
		p("which every %v holds at least %.0f%% of the offered successes. *Load in the outage*: attempts per second the server\n",
			r.Window, 100*r.Share)
		p("saw while it was down (the callers offered %.0f).\n\n", r.Offered())
		p("| client | attempts per request in the outage | load in the outage | first success | throughput back | failed after the outage |\n")
		p("|---|--:|--:|--:|--:|--:|\n")
		for _, pr := range bench.Peers() {
			if res, ok := sims.Recovery[pr.Name]; ok {
				p("| %s | %.2f | %.0f/s | %s | %s | %d |\n", peerColumn(pr), res.OutagePerRequest(),
					float64(res.OutageAttempts)/r.Outage.Seconds(), after(res.FirstSuccess, r.After), after(res.Recovered, r.After), res.FailedAfter)
			}
		}
	}
}

// writeSimSummary prints the simulations' results to w in plain lines.
func writeSimSummary(w io.Writer, sims *bench.SimResults) {
	if !sims.Any() {
		return
	}
	var b strings.Builder
	writeGoodput(&b, sims)
	writeOutage(&b, sims)
	io.WriteString(w, b.String())
}

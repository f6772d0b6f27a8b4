package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// printTable prints one server's results, a row per client.
func printTable(w io.Writer, rs []result, cfg config) {
	fmt.Fprintf(w, "%-18s %8s %8s %6s %7s %8s %8s %7s\n", "client", "requests", "attempts", "429s", "failed", "wall", "ideal", "x ideal")
	for _, r := range rs {
		fmt.Fprintf(w, "%-18s %8d %8d %6d %7d %7.1fs %7.1fs %6.2fx\n", r.client, cfg.n, r.attempts, r.throttle, r.failed,
			r.wall.Seconds(), r.ideal.Seconds(), float64(r.wall)/float64(r.ideal))
	}
}

// bucket is the timeline's resolution.
const bucket = 100 * time.Millisecond

// buckets counts each result's sends per bucket: admitted, refused.
func buckets(r result) (ok, refused []int) {
	for _, s := range r.sends {
		i := int(s.at / bucket)
		for len(ok) <= i {
			ok, refused = append(ok, 0), append(refused, 0)
		}
		if s.refused {
			refused[i]++
		} else {
			ok[i]++
		}
	}
	return ok, refused
}

// printTimelines prints, per client, what the server saw per 100 ms: a
// digit (or '+' above 9) for the requests it admitted, and a red 'x' under
// the buckets where it refused some. The server admits limit/10 per 100 ms
// on average.
func printTimelines(w io.Writer, rs []result, cfg config) {
	fmt.Fprintf(w, "admitted per 100 ms (+: 10 or more; the server admits %g per 100 ms on average), and x where it refused some:\n", float64(cfg.limit)/10)
	for _, r := range rs {
		ok, refused := buckets(r)
		var top, bottom strings.Builder
		for i := range ok {
			switch n := ok[i]; {
			case n == 0:
				top.WriteByte('.')
			case n > 9:
				top.WriteByte('+')
			default:
				top.WriteByte(byte('0' + n))
			}
			if refused[i] > 0 {
				bottom.WriteByte('x')
			} else {
				bottom.WriteByte(' ')
			}
		}
		fmt.Fprintf(w, "  %-16s |%s\n", r.client, top.String())
		if strings.TrimSpace(bottom.String()) != "" {
			fmt.Fprintf(w, "  %-16s |%s\n", "  429s", strings.TrimRight(bottom.String(), " "))
		}
	}
}

package main

import (
	"bufio"
	"fmt"
	"html"
	"os"
	"time"
)

// writeSVG writes the timelines as an SVG chart: a panel per server, a row
// per client, a bar per 100 ms (green: admitted, red: refused), the
// server's average rate as a dashed line.
func writeSVG(path string, results [][]result, cfg config) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	var longest time.Duration
	for _, rs := range results {
		for _, r := range rs {
			for _, s := range r.sends {
				longest = max(longest, s.at)
			}
		}
	}
	const (
		left, rowH, gap, panelGap, width = 240.0, 60.0, 14.0, 34.0, 980.0
	)
	n := int(longest/bucket) + 1
	barW := (width - left - 20) / float64(n)
	height := 64 + float64(len(results))*(panelGap+float64(len(clients))*(rowH+gap))
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(w, `<text x="10" y="20" font-size="14" font-weight="bold">%s</text>`+"\n",
		html.EscapeString(fmt.Sprintf("%d GETs per client, %d workers, into APIs that admit %d per second", cfg.n, cfg.c, cfg.limit)))
	fmt.Fprintf(w, `<text x="10" y="36" fill="#666">%s</text>`+"\n",
		"requests the server saw per 100 ms: green admitted, red refused (429); dashed: the server's average rate; each row to its own scale")
	y := 52.0
	for si, rs := range results {
		fmt.Fprintf(w, `<text x="10" y="%.0f" font-weight="bold">%s</text>`+"\n", y+12, html.EscapeString(servers[si].name))
		y += panelGap - 10
		for _, r := range rs {
			ok, refused := buckets(r)
			most := 1 // each row on its own scale: its busiest 100 ms
			for i := range ok {
				most = max(most, ok[i]+refused[i])
			}
			base := y + rowH
			fmt.Fprintf(w, `<text x="10" y="%.0f">%s</text>`+"\n", base-rowH/2, html.EscapeString(r.client))
			fmt.Fprintf(w, `<text x="10" y="%.0f" fill="#666">%d attempts, %d 429s, %d failed</text>`+"\n", base-rowH/2+14, r.attempts, r.throttle, r.failed)
			fmt.Fprintf(w, `<text x="%.0f" y="%.0f" fill="#999" font-size="9" text-anchor="end">%d</text>`+"\n", left-4, base-rowH+8, most)
			fmt.Fprintf(w, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ccc"/>`+"\n", left, base, width-20, base)
			for i := range ok {
				x := left + float64(i)*barW
				hOK := rowH * float64(ok[i]) / float64(most)
				hRef := rowH * float64(refused[i]) / float64(most)
				if hOK > 0 {
					fmt.Fprintf(w, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#2e9d4a"/>`+"\n", x, base-hOK, barW*0.9, hOK)
				}
				if hRef > 0 {
					fmt.Fprintf(w, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#d6342a"/>`+"\n", x, base-hOK-hRef, barW*0.9, hRef)
				}
			}
			if avg := rowH * (float64(cfg.limit) / 10) / float64(most); avg <= rowH {
				fmt.Fprintf(w, `<line x1="%.0f" y1="%.2f" x2="%.0f" y2="%.2f" stroke="#333" stroke-dasharray="4 3"/>`+"\n", left, base-avg, width-20, base-avg)
			}
			y += rowH + gap
		}
		y += 10
	}
	for s := time.Duration(0); s <= longest; s += time.Second {
		x := left + float64(s/bucket)*barW
		fmt.Fprintf(w, `<text x="%.1f" y="%.0f" fill="#666" font-size="10">%ds</text>`+"\n", x, height-8, int(s.Seconds()))
	}
	fmt.Fprintln(w, `</svg>`)
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

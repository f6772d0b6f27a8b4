package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/headway-go/headway/bench"
)

// Chart layout, in SVG user units (pixels).
const (
	chartLabelW = 150 // the client names' column
	chartPanelW = 250 // one metric's panel
	chartGap    = 24  // between panels
	chartTop    = 92  // title, legend, panel titles
	chartRowH   = 36  // one client: a bar per shape
	chartBarH   = 13
	chartBottom = 34
	chartFont   = "system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"
)

var shapeColors = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759"}

// writeSVG draws the overhead results as grouped horizontal bars: one
// panel per metric (ns/op, B/op, allocs/op), one row per client, one bar
// per request shape, with the 95% interval of ns/op as a whisker.
func writeSVG(w io.Writer, res *results, env Env) error {
	shapes := bench.Shapes()
	peers := bench.Peers()
	type cell struct {
		s  [3]Summary
		ok bool
	}
	cells := make([][]cell, len(peers)) // peer, shape
	for i, p := range peers {
		cells[i] = make([]cell, len(shapes))
		for j, s := range shapes {
			ns, b, a, ok := res.get(overheadPrefix + s.Name + "/" + p.Name)
			cells[i][j] = cell{[3]Summary{ns, b, a}, ok}
		}
	}
	metrics := []string{"ns/op", "B/op", "allocs/op"}
	width := chartLabelW + len(metrics)*(chartPanelW+chartGap)
	height := chartTop + len(peers)*chartRowH + chartBottom

	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" font-size="12">`+"\n",
		width, height, width, height, chartFont)
	p(`<title>%s</title>`+"\n", esc("headway benchmarks: cost of one request per client"))
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	p(`<text x="12" y="22" font-size="15" font-weight="bold">%s</text>`+"\n",
		esc("Cost of one request over an in-memory transport (median; lower is better)"))
	p(`<text x="12" y="40" fill="#555555">%s</text>`+"\n", esc(fmt.Sprintf(
		"%s, %s, %s/%s; %d runs of %v each; whiskers: 95%% CI", env.GoVersion, env.CPU, env.OS, env.Arch, env.Count, env.Benchtime)))
	// Legend.
	x := 12
	for j, s := range shapes {
		p(`<rect x="%d" y="52" width="12" height="12" fill="%s"/>`, x, shapeColors[j%len(shapeColors)])
		label := shapeTitle(s)
		p(`<text x="%d" y="62">%s</text>`+"\n", x+16, esc(label))
		x += 16 + 7*len(label) + 24
	}
	p(`<path d="M%d 58H%d" stroke="#555555" stroke-dasharray="3 2"/>`, x, x+16)
	p(`<text x="%d" y="62">%s</text>`+"\n", x+22, esc("bare net/http, per shape"))
	// Row backgrounds and client names.
	for i, pr := range peers {
		y := chartTop + i*chartRowH
		fill := "#ffffff"
		if i%2 == 1 {
			fill = "#f6f7f9"
		}
		if pr.Name == headwayPeer {
			fill = "#fff4d6"
		}
		p(`<rect x="0" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", y, width, chartRowH, fill)
		name := pr.Name
		if pr.Name == baselinePeer {
			name = "net/http (bare)"
		}
		weight := "normal"
		if pr.Name == headwayPeer {
			weight = "bold"
		}
		p(`<text x="%d" y="%d" text-anchor="end" font-weight="%s">%s</text>`+"\n", chartLabelW-10, y+chartRowH/2+4, weight, esc(name))
	}
	// Panels.
	for m, metric := range metrics {
		x0 := chartLabelW + m*(chartPanelW+chartGap)
		maxV := 0.0
		for i := range peers {
			for j := range shapes {
				if c := cells[i][j]; c.ok {
					maxV = max(maxV, c.s[m].Median)
					if m == 0 && c.s[m].HasCI {
						maxV = max(maxV, c.s[m].Hi)
					}
				}
			}
		}
		if maxV <= 0 {
			maxV = 1
		}
		scale := 0.78 * chartPanelW / maxV // room for the value labels
		p(`<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0, chartTop-6, esc(metric))
		p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999999"/>`+"\n", x0, chartTop, x0, chartTop+len(peers)*chartRowH)
		for j := range shapes {
			if c := cells[0][j]; c.ok && peers[0].Name == baselinePeer {
				bx := float64(x0) + c.s[m].Median*scale
				p(`<path d="M%.1f %dV%d" stroke="%s" stroke-dasharray="3 2"/>`+"\n",
					bx, chartTop, chartTop+len(peers)*chartRowH, shapeColors[j%len(shapeColors)])
			}
		}
		for i := range peers {
			for j := range shapes {
				c := cells[i][j]
				if !c.ok {
					continue
				}
				s := c.s[m]
				y := chartTop + i*chartRowH + 4 + j*(chartBarH+2)
				bw := s.Median * scale
				p(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
					x0, y, bw, chartBarH, shapeColors[j%len(shapeColors)],
					esc(fmt.Sprintf("%s %s: %s %s", peers[i].Name, shapes[j].Name, withCI(s), metric)))
				end := bw
				if m == 0 && s.HasCI && s.Hi > s.Lo {
					lo, hi := float64(x0)+s.Lo*scale, float64(x0)+s.Hi*scale
					cy := float64(y) + chartBarH/2.0
					p(`<path d="M%.1f %.1fH%.1fM%.1f %.1fV%.1fM%.1f %.1fV%.1f" stroke="#222222" fill="none"/>`+"\n",
						lo, cy, hi, lo, cy-3, cy+3, hi, cy-3, cy+3)
					end = max(end, s.Hi*scale)
				}
				p(`<text x="%.1f" y="%d" font-size="11" stroke="#ffffff" stroke-width="3" paint-order="stroke">%s</text>`+"\n",
					float64(x0)+end+4, y+chartBarH-2, esc(num(s.Median)))
			}
		}
	}
	p(`<text x="12" y="%d" fill="#555555" font-size="11">%s</text>`+"\n", height-10,
		esc("cd bench && go run ./cmd/benchreport ("+env.Date.Format("2006-01-02")+"): every client retries 429/5xx up to 3 times; every response carries rate-limit headers"))
	p("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// esc escapes s for XML text and attribute values.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

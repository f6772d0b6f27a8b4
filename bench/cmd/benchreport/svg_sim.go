package main

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/headway-go/headway/bench"
	rlt "github.com/headway-go/headway/ratelimittest"
)

// peerColors are the peers' colours in the simulations' charts, in
// bench.Peers order (headway's stands out).
var peerColors = []string{"#9c9c9c", "#e8a600", "#4e79a7", "#59a14f", "#b07aa1"}

const targetColor = "#d62728"

// svgDoc is an SVG document being written.
type svgDoc struct {
	b strings.Builder
}

func (d *svgDoc) p(format string, args ...any) { fmt.Fprintf(&d.b, format, args...) }

func (d *svgDoc) start(width, height int, title, heading, sub string) {
	d.p(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	d.p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" font-size="12">`+"\n",
		width, height, width, height, chartFont)
	d.p(`<title>%s</title>`+"\n", esc(title))
	d.p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	d.p(`<text x="12" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", esc(heading))
	d.p(`<text x="12" y="40" fill="#555555">%s</text>`+"\n", esc(sub))
}

func (d *svgDoc) text(x, y float64, anchor, attrs, s string) {
	d.p(`<text x="%.1f" y="%.1f" text-anchor="%s"%s>%s</text>`+"\n", x, y, anchor, attrs, esc(s))
}

func (d *svgDoc) end(w io.Writer, footer string, height int) error {
	d.p(`<text x="12" y="%d" fill="#555555" font-size="11">%s</text>`+"\n", height-10, esc(footer))
	d.p("</svg>\n")
	_, err := io.WriteString(w, d.b.String())
	return err
}

// legend draws the peers' colours from x at y, returning where it ended.
func (d *svgDoc) legend(x, y int) int {
	for i, pr := range bench.Peers() {
		d.p(`<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`, x, y, peerColors[i%len(peerColors)])
		name := peerName(pr)
		d.text(float64(x+16), float64(y+10), "start", "", name)
		x += 16 + 7*len(name) + 20
	}
	return x
}

// niceMax rounds x up to 1, 2 or 5 times a power of ten.
func niceMax(x float64) float64 {
	if x <= 0 || math.IsNaN(x) {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if x <= m*e {
			return m * e
		}
	}
	return 10 * e
}

// writeGoodputSVG draws the goodput summary: per algorithm, one bar per
// peer, in four panels (429 share and wall / ideal, with headers (the worst
// dialect) and without), with headway's targets as dashed lines.
func writeGoodputSVG(w io.Writer, sims *bench.SimResults, env Env) error {
	const (
		labelW = 130
		panelW = 230
		gap    = 26
		top    = 100
		barH   = 8
		bottom = 34
	)
	peers := bench.Peers()
	algs := rlt.Algorithms()
	rowH := len(peers)*(barH+1) + 12
	type panel struct {
		title    string
		headers  bool
		slowdown bool
		target   float64
	}
	panels := []panel{
		{"429s, % of attempts: with headers", true, false, targetShareHeaders},
		{"wall / ideal: with headers", true, true, targetSlowdownHeaders},
		{"429s, % of attempts: no headers", false, false, targetShareNone},
		{"wall / ideal: no headers", false, true, targetSlowdownNone},
	}
	value := func(pn panel, alg rlt.Algorithm, peer string) (float64, bool) {
		ds := headerDialects()
		if !pn.headers {
			ds = []rlt.Dialect{rlt.None}
		}
		wst := worstOf(sims, alg, ds, peer)
		if pn.slowdown {
			return wst.slowdown, wst.n > 0
		}
		return wst.share, wst.n > 0
	}
	// One scale for the two 429 panels and one for the two slowdown ones.
	var maxShare, maxSlow float64
	for _, pn := range panels {
		for _, alg := range algs {
			for _, pr := range peers {
				if v, ok := value(pn, alg, pr.Name); ok {
					if pn.slowdown {
						maxSlow = max(maxSlow, v)
					} else {
						maxShare = max(maxShare, v)
					}
				}
			}
		}
	}
	maxShare, maxSlow = niceMax(max(maxShare, targetShareNone)), niceMax(max(maxSlow, targetSlowdownNone))

	width := labelW + len(panels)*(panelW+gap)
	height := top + len(algs)*rowH + bottom
	var d svgDoc
	d.start(width, height, "headway benchmarks: goodput against rate-limited APIs",
		fmt.Sprintf("Goodput: %d requests from %d goroutines into %d/s, %v round trips (lower is better)",
			bench.GoodputRequests, bench.GoodputWorkers, bench.GoodputLimit, bench.SimRTT),
		fmt.Sprintf("ratelimittest, virtual time, median of %d runs; with headers: the worst of %d dialects; dashed red: headway's targets",
			sims.GoodputRuns, len(headerDialects())))
	d.legend(12, 52)
	for i, alg := range algs {
		y := top + i*rowH
		if i%2 == 1 {
			d.p(`<rect x="0" y="%d" width="%d" height="%d" fill="#f6f7f9"/>`+"\n", y, width, rowH)
		}
		d.text(labelW-10, float64(y+rowH/2+4), "end", "", string(alg))
	}
	for m, pn := range panels {
		x0 := float64(labelW + m*(panelW+gap))
		scaleMax := maxShare
		if pn.slowdown {
			scaleMax = maxSlow
		}
		scale := 0.85 * panelW / scaleMax
		d.text(x0, top-8, "start", ` font-weight="bold"`, pn.title)
		d.p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999999"/>`+"\n", x0, top, x0, top+len(algs)*rowH)
		if pn.slowdown {
			// The ideal itself.
			d.p(`<path d="M%.1f %dV%d" stroke="#555555" stroke-dasharray="2 3"/>`+"\n", x0+scale, top, top+len(algs)*rowH)
		}
		tx := x0 + pn.target*scale
		d.p(`<path d="M%.1f %dV%d" stroke="%s" stroke-dasharray="4 3"/>`+"\n", tx, top-4, top+len(algs)*rowH, targetColor)
		label := times(pn.target)
		if !pn.slowdown {
			label = pctTarget(pn.target)
		}
		d.text(tx+3, top+float64(len(algs)*rowH)+12, "start", ` font-size="10" fill="`+targetColor+`"`, label)
		for i, alg := range algs {
			for j, pr := range peers {
				v, ok := value(pn, alg, pr.Name)
				if !ok {
					continue
				}
				y := top + i*rowH + 6 + j*(barH+1)
				bw := math.Min(v*scale, 0.97*panelW)
				txt := times(v)
				if !pn.slowdown {
					txt = pct(v)
				}
				d.p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
					x0, y, bw, barH, peerColors[j%len(peerColors)], esc(fmt.Sprintf("%s, %s: %s", pr.Name, alg, txt)))
				if pr.Name == headwayPeer {
					d.text(x0+bw+3, float64(y+barH-1), "start",
						` font-size="9" font-weight="bold" stroke="#ffffff" stroke-width="3" paint-order="stroke"`, txt)
				}
			}
		}
	}
	return d.end(w, "cd bench && go run ./cmd/benchreport ("+env.Date.Format("2006-01-02")+
		"): each client as its documentation has a user write it; labels: headway's figures", height)
}

// writeOutageSVG draws the outage runs: per peer, the attempts per
// request in a total outage, and the successes over time through an outage
// and after it.
func writeOutageSVG(w io.Writer, sims *bench.SimResults, env Env) error {
	const (
		labelW = 130
		ampW   = 230
		gap    = 30
		lineW  = 560
		top    = 84
		rowH   = 46
		bottom = 50
		textW  = 190
	)
	peers := bench.Peers()
	r := sims.RecoveryRun
	width := labelW + ampW + gap + lineW + gap + textW
	height := top + len(peers)*rowH + bottom
	var d svgDoc
	d.start(width, height, "headway benchmarks: a total outage, and after it",
		"An API that answers 503 to everything: attempts per request, and successes through a 10 s outage",
		fmt.Sprintf("virtual time, %v round trips; left: %d requests from %d goroutines, all failing (dashed red: headway's target); right: %.0f requests/s offered",
			sims.AmplificationRun.RTT, sims.AmplificationRun.Requests, sims.AmplificationRun.Workers, r.Offered()))
	maxAmp := targetAmplification
	for _, res := range sims.Amplification {
		maxAmp = max(maxAmp, res.PerRequest())
	}
	maxAmp = niceMax(maxAmp)
	ax := float64(labelW)
	lx := float64(labelW + ampW + gap)
	tx := lx + lineW + gap
	d.text(ax, top-8, "start", ` font-weight="bold"`, "attempts per request")
	d.text(lx, top-8, "start", ` font-weight="bold"`, fmt.Sprintf("successes per %v, 0 to %v (shaded: the outage)", r.Window, r.Outage+r.After))
	d.text(tx, top-8, "start", ` font-weight="bold"`, "after the outage")
	span := (r.Outage + r.After).Seconds()
	full := r.Offered() * r.Window.Seconds()
	for i, pr := range peers {
		y := float64(top + i*rowH)
		fill := "#ffffff"
		if i%2 == 1 {
			fill = "#f6f7f9"
		}
		if pr.Name == headwayPeer {
			fill = "#fff4d6"
		}
		d.p(`<rect x="0" y="%.1f" width="%d" height="%d" fill="%s"/>`+"\n", y, width, rowH, fill)
		weight := ""
		if pr.Name == headwayPeer {
			weight = ` font-weight="bold"`
		}
		d.text(labelW-10, y+rowH/2+4, "end", weight, peerName(pr))
		color := peerColors[i%len(peerColors)]
		if res, ok := sims.Amplification[pr.Name]; ok {
			bw := res.PerRequest() * 0.85 * ampW / maxAmp
			d.p(`<rect x="%.1f" y="%.1f" width="%.1f" height="16" fill="%s"/>`+"\n", ax, y+15, bw, color)
			d.text(ax+bw+4, y+27, "start", "", fmt.Sprintf("%.2f", res.PerRequest()))
		}
		if res, ok := sims.Recovery[pr.Name]; ok {
			h := float64(rowH - 10)
			base := y + rowH - 5
			d.p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f3c7c7"/>`+"\n",
				lx, base-h, r.Outage.Seconds()/span*lineW, h)
			d.p(`<path d="M%.1f %.1fH%.1f" stroke="#bbbbbb"/>`+"\n", lx, base-h, lx+lineW)
			var pts []string
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", lx, base))
			for k, n := range res.Timeline {
				x0 := lx + float64(k)*r.Window.Seconds()/span*lineW
				x1 := lx + float64(k+1)*r.Window.Seconds()/span*lineW
				yv := base - math.Min(float64(n)/full, 1.05)*h
				pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x0, yv, x1, yv))
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", lx+float64(len(res.Timeline))*r.Window.Seconds()/span*lineW, base))
			d.p(`<polygon points="%s" fill="%s" fill-opacity="0.85"/>`+"\n", strings.Join(pts, " "), color)
			d.p(`<path d="M%.1f %.1fH%.1f" stroke="#999999"/>`+"\n", lx, base, lx+lineW)
			d.text(tx, y+18, "start", ` font-size="11"`, "first success "+after(res.FirstSuccess, r.After))
			d.text(tx, y+34, "start", ` font-size="11"`, "throughput back "+after(res.Recovered, r.After))
		}
	}
	// Axes: the target, and the time ticks.
	bottomY := float64(top + len(peers)*rowH)
	tgt := ax + targetAmplification*0.85*ampW/maxAmp
	d.p(`<path d="M%.1f %dV%.1f" stroke="%s" stroke-dasharray="4 3"/>`+"\n", tgt, top-4, bottomY, targetColor)
	d.text(tgt+3, bottomY+12, "start", ` font-size="10" fill="`+targetColor+`"`, fmt.Sprintf("%.1f", targetAmplification))
	for s := 0.0; s <= span; s += 10 {
		x := lx + s/span*lineW
		d.p(`<path d="M%.1f %.1fv4" stroke="#555555"/>`+"\n", x, bottomY)
		d.text(x, bottomY+16, "middle", ` font-size="10"`, fmt.Sprintf("%gs", s))
	}
	return d.end(w, "cd bench && go run ./cmd/benchreport ("+env.Date.Format("2006-01-02")+
		"): each client as its documentation has a user write it; every response 503 without Retry-After", height)
}

package main

import (
	"fmt"
	"html"
	"math"
	"os"
	"runtime"
	"strings"
)

// chartColors gives each system its bar colour; others get chartOther.
var chartColors = map[string]string{
	sysQueueLeasehold: "#2b6cb0",
	sysQueueRiver:     "#dd6b20",
	sysQueueRaw:       "#718096",
}

const chartOther = "#38a169"

// Chart geometry: one panel per case, chartCols panels a row.
const (
	chartCols   = 3
	chartPanelW = 300
	chartPanelH = 230
	chartTop    = 70 // title, subtitle and legend
)

// writeChart writes rep as an SVG bar chart to path: one panel per case,
// each on its own scale, one bar per system with its value. Throughput
// cases show jobs/s (higher is better); idle-latency shows p50 in ms and
// hol the fast jobs' p99 in ms, fair tenant B's p99 wait (lower is better).
func writeChart(path, title, subtitle string, rep Report) error {
	return os.WriteFile(path, []byte(chartSVG(title, subtitle, rep)), 0o644)
}

// chartSVG renders the chart; see writeChart.
func chartSVG(title, subtitle string, rep Report) string {
	var cases, systems []string
	vals := map[[2]string]float64{}
	for _, r := range rep.Results {
		if !contains(cases, r.Case) {
			cases = append(cases, r.Case)
		}
		if !contains(systems, r.System) {
			systems = append(systems, r.System)
		}
		v := r.JobsPerSec
		switch r.Case {
		case caseIdleLatency:
			v = r.P50Ms
		case caseHOL, caseFair:
			v = r.P99Ms
		}
		vals[[2]string{r.System, r.Case}] = v
	}
	rows := (len(cases) + chartCols - 1) / chartCols
	w, h := chartCols*chartPanelW+20, chartTop+rows*chartPanelH+10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="10" y="40" font-size="11" fill="#4a5568">%s</text>`+"\n", html.EscapeString(subtitle))
	x := 10
	for _, s := range systems {
		fmt.Fprintf(&b, `<rect x="%d" y="50" width="12" height="12" fill="%s"/><text x="%d" y="60" font-size="12">%s</text>`+"\n",
			x, color(s), x+16, html.EscapeString(s))
		x += 30 + 8*len(s)
	}
	for i, c := range cases {
		px, py := 10+(i%chartCols)*chartPanelW, chartTop+(i/chartCols)*chartPanelH
		unit := "jobs/s (higher is better)"
		switch c {
		case caseIdleLatency:
			unit = "p50 ms, enqueue to start (lower is better)"
		case caseHOL:
			unit = "p99 ms, fast jobs, enqueue to done (lower is better)"
		case caseFair:
			unit = "p99 ms, tenant B, enqueue to start (lower is better)"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", px, py+14, html.EscapeString(c))
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10" fill="#4a5568">%s</text>`+"\n", px, py+28, unit)
		top := 0.0
		for _, s := range systems {
			top = math.Max(top, vals[[2]string{s, c}])
		}
		if top <= 0 {
			top = 1
		}
		const barArea = 150
		base := py + 40 + barArea
		barW := (chartPanelW - 40) / max(len(systems), 1)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#a0aec0"/>`+"\n", px, base, px+chartPanelW-30, base)
		for k, s := range systems {
			v, ok := vals[[2]string{s, c}]
			if !ok {
				continue
			}
			bh := int(math.Round(v / top * barArea))
			bx := px + 5 + k*barW
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
				bx, base-bh, barW-10, bh, color(s), html.EscapeString(s), html.EscapeString(c), chartValue(v))
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" text-anchor="middle">%s</text>`+"\n",
				bx+(barW-10)/2, base-bh-4, chartValue(v))
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10" text-anchor="middle" fill="#4a5568">%s</text>`+"\n",
				bx+(barW-10)/2, base+13, html.EscapeString(s))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func color(system string) string {
	if c, ok := chartColors[system]; ok {
		return c
	}
	return chartOther
}

// chartValue formats a bar's value: thousands as k, small values with
// one decimal.
func chartValue(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.0fk", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.1fk", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// machineShort describes the machine in one short line, for a chart.
func machineShort(pgVersion string) string {
	return fmt.Sprintf("%d CPUs, PostgreSQL %s, %s; medians over rounds", runtime.NumCPU(), pgVersion, runtime.Version())
}

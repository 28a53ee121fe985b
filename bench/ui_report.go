package main

import (
	"fmt"
	"strconv"
	"strings"
)

// uiReport is the ui suite's --json report.
type uiReport struct {
	Suite       string         `json:"suite"`
	Jobs        int            `json:"jobs"`
	Rounds      int            `json:"rounds"`
	Requests    int            `json:"requests_per_page_per_round"`
	Concurrency int            `json:"concurrency"`
	Server      ServerSettings `json:"server"`
	Shape       uiShape        `json:"shape"`
	Fleet       uiFleetStats   `json:"fleet"`
	TargetMs    float64        `json:"target_p99_ms"`
	Pages       []uiPageRow    `json:"pages"`
	// WorstP99Ms is the highest of the pages' P99Ms (medians over rounds),
	// on page WorstPage; WorstRoundP99Ms the highest p99 of any page in
	// any round.
	WorstP99Ms      float64 `json:"worst_p99_ms"`
	WorstPage       string  `json:"worst_page"`
	WorstRoundP99Ms float64 `json:"worst_round_p99_ms"`
}

// uiPageRow is one page's result: medians over the rounds of each
// round's p50, p95 and p99, the highest latency of all rounds, and each
// round's p99.
type uiPageRow struct {
	Page        string    `json:"page"`
	Path        string    `json:"path"`
	What        string    `json:"what"`
	Requests    int       `json:"requests"` // timed, all rounds
	P50Ms       float64   `json:"p50_ms"`
	P95Ms       float64   `json:"p95_ms"`
	P99Ms       float64   `json:"p99_ms"`
	MaxMs       float64   `json:"max_ms"`
	P99RoundsMs []float64 `json:"p99_rounds_ms"`
	Rows        int       `json:"rows"`      // job rows on the page (job lists)
	CutShort    bool      `json:"cut_short"` // the page showed #scan-note
	Bytes       int       `json:"bytes"`
	// Statements are the UI's statements per request of the page, the
	// most time first (--concurrency 1 only).
	Statements []StmtShare `json:"statements,omitempty"`
}

// uiFleetStats is what the fleet did while the pages were measured.
type uiFleetStats struct {
	Workers  int     `json:"workers"`
	Runs     int64   `json:"runs"`
	Failed   int64   `json:"failed"`
	Enqueued int64   `json:"enqueued"`
	Seconds  float64 `json:"seconds"`
}

func uiReportOf(f uiFlags, server ServerSettings, shape uiShape, fleet uiFleetStats, results []pageResult) uiReport {
	r := uiReport{Suite: "ui", Jobs: f.jobs, Rounds: f.rounds, Requests: f.requests, Concurrency: f.concurrency,
		Server: server, Shape: shape, Fleet: fleet, TargetMs: ms(f.target)}
	for _, res := range results {
		row := uiPageRow{Page: res.page.name, Path: res.page.path, What: res.page.what, Rows: res.rows, CutShort: res.cut, Bytes: res.bytes,
			Statements: res.stmts}
		var p50, p95, p99 []float64
		for _, s := range res.rounds {
			row.Requests += s.n
			p50, p95, p99 = append(p50, ms(s.p50)), append(p95, ms(s.p95)), append(p99, ms(s.p99))
			row.MaxMs = max(row.MaxMs, ms(s.max))
			r.WorstRoundP99Ms = max(r.WorstRoundP99Ms, ms(s.p99))
		}
		row.P50Ms, row.P95Ms, row.P99Ms, row.P99RoundsMs = median(p50), median(p95), median(p99), p99
		if row.P99Ms > r.WorstP99Ms || r.WorstPage == "" {
			r.WorstP99Ms, r.WorstPage = row.P99Ms, row.Page
		}
		r.Pages = append(r.Pages, row)
	}
	return r
}

// verdict is the report's last line: the worst page against the target.
func (r uiReport) verdict() string {
	v := "every page is under the target"
	if r.WorstP99Ms >= r.TargetMs {
		var over []string
		for _, p := range r.Pages {
			if p.P99Ms >= r.TargetMs {
				over = append(over, p.Page)
			}
		}
		v = "OVER THE TARGET: " + strings.Join(over, ", ")
	}
	return fmt.Sprintf("Worst p99 (median over rounds): %.1f ms (%s); worst p99 of any round: %.1f ms; target %.0f ms: %s.",
		r.WorstP99Ms, r.WorstPage, r.WorstRoundP99Ms, r.TargetMs, v)
}

// uiTable is the report's table: one row per page.
func uiTable(r uiReport) ptable {
	t := ptable{
		title: fmt.Sprintf("Page latency over HTTP, ms: %d requests per page per round x %d rounds, concurrency %d",
			r.Requests, r.Rounds, r.Concurrency),
		notes: []string{
			"p50, p95, p99: medians over the rounds of each round's value (nearest rank); max: of all rounds; " +
				"p99 per round: its spread. rows: job rows on the page (job lists); cut: the page said it stopped at the scan bound.",
		},
		header: []string{"page", "shows", "p50", "p95", "p99", "max", "p99 per round", "rows", "cut"},
	}
	for _, p := range r.Pages {
		var each []string
		for _, x := range p.P99RoundsMs {
			each = append(each, f1(x))
		}
		rows, cut := "", ""
		if strings.HasPrefix(p.Page, "jobs") {
			rows = strconv.Itoa(p.Rows)
			if p.CutShort {
				cut = "yes"
			}
		}
		t.add(p.Page, p.What, f1(p.P50Ms), f1(p.P95Ms), f1(p.P99Ms), f1(p.MaxMs), strings.Join(each, " "), rows, cut)
	}
	return t
}

// uiStmtTable is the report's second table: the statements behind each
// page, the three costliest per request (--concurrency 1 only; nil
// without statements).
func uiStmtTable(r uiReport) *ptable {
	t := ptable{
		title: "Database time per request, the costliest 3 statements of each page (named by their field in store.Statements)",
		notes: []string{"runs: per request; mean, max: of one run, ms; ms/req: all its runs' time per request, " +
			"from sending the statement until its last row was read."},
		header: []string{"page", "statement", "runs", "mean", "max", "ms/req"},
	}
	for _, p := range r.Pages {
		for i, s := range p.Statements {
			if i == 3 {
				break
			}
			t.add(p.Page, s.Statement, f1(s.PerRequest), f1(s.MeanMs), f1(s.MaxMs), f1(s.TotalPerRequestMs))
		}
	}
	if len(t.rows) == 0 {
		return nil
	}
	return &t
}

// uiDoc is the suite's generated section of a Markdown document.
func uiDoc(machine string, r uiReport, tables []ptable) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", machine)
	fmt.Fprintf(&b, "Command: `go run . ui --jobs %d --rounds %d --requests %d --concurrency %d`.\n\n",
		r.Jobs, r.Rounds, r.Requests, r.Concurrency)
	fmt.Fprintf(&b, "Data: %s. Server: %s.\n\n", r.Shape, r.Server)
	fmt.Fprintf(&b, "Fleet while measuring: %d workers ran %d jobs (%d failed) in %.0f s, while the producer enqueued %d.\n\n",
		r.Fleet.Workers, r.Fleet.Runs, r.Fleet.Failed, r.Fleet.Seconds, r.Fleet.Enqueued)
	for _, t := range tables {
		t.markdown(&b)
	}
	fmt.Fprintf(&b, "%s\n", r.verdict())
	return b.String()
}

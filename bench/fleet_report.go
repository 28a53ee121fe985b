package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// fleetReport is the fleet suite's outcome, printed and written as JSON.
type fleetReport struct {
	flags    fleetFlags
	env      *fleetEnv
	sizes    []fleetSizeResult
	maxRates []fleetMaxRate
}

// fleetMetric is one row of a size's table: a number per sample.
type fleetMetric struct {
	label, key string
	digits     int
	of         func(s fleetSample) float64
}

// fleetMetrics are the rows of each size's table, in order.
var fleetMetrics = []fleetMetric{
	{"ready after start (s)", "ready_s", 1, func(s fleetSample) float64 { return s.settle.Seconds() }},
	{"idle tx/s", "idle_xacts_per_sec", 1, func(s fleetSample) float64 { return perSec(int(s.idle.xacts), s.idle.elapsed) }},
	{"idle tx/s per member", "idle_xacts_per_sec_per_member", 2, func(s fleetSample) float64 {
		return perSec(int(s.idle.xacts), s.idle.elapsed) / float64(s.members)
	}},
	{"idle statements/s", "idle_statements_per_sec", 1, func(s fleetSample) float64 { return perSec(int(s.idle.calls), s.idle.elapsed) }},
	{"idle server CPU (cores)", "idle_server_cpu_cores", 3, func(s fleetSample) float64 { return cores(s.idle) }},
	{"idle server wakeups/s", "idle_server_switches_per_sec", 0, func(s fleetSample) float64 { return perSec(int(s.idle.switches), s.idle.elapsed) }},
	{"no-client server CPU before start (cores)", "baseline_server_cpu_cores", 3, func(s fleetSample) float64 { return cores(s.base) }},
	{"idle heap MiB per member", "heap_mib_per_member", 2, func(s fleetSample) float64 {
		return mib(s.mem.heap) / float64(s.members)
	}},
	{"server connections per idle member", "idle_connections_per_member", 1, func(s fleetSample) float64 {
		return float64(s.conns) / float64(s.members)
	}},
	{"idle goroutines per member", "goroutines_per_member", 1, func(s fleetSample) float64 {
		return float64(s.mem.goroutines) / float64(s.members)
	}},
	{"load: enqueued jobs/s", "enqueued_per_sec", 0, func(s fleetSample) float64 {
		return perSec(int(s.load.enqueued), s.load.cost.elapsed)
	}},
	{"load: finished jobs/s", "jobs_per_sec", 0, func(s fleetSample) float64 { return s.load.achieved() }},
	{"load: p50 ms", "p50_ms", 1, func(s fleetSample) float64 { return ms(s.load.quantile(0.5)) }},
	{"load: p99 ms", "p99_ms", 1, func(s fleetSample) float64 { return ms(s.load.quantile(0.99)) }},
	{"load: server CPU (cores)", "load_server_cpu_cores", 3, func(s fleetSample) float64 { return cores(s.load.cost) }},
	{"load: server CPU µs per job", "server_cpu_us_per_job", 0, func(s fleetSample) float64 {
		return perJob(s.load.cost.cpu.Seconds()*1e6, s.load.finished)
	}},
	{"load: server wakeups per job", "server_switches_per_job", 1, func(s fleetSample) float64 {
		return perJob(float64(s.load.cost.switches), s.load.finished)
	}},
	{"load: tx per job", "xacts_per_job", 2, func(s fleetSample) float64 {
		return perJob(float64(s.load.cost.xacts), s.load.finished)
	}},
	{"load: statements per job", "statements_per_job", 2, func(s fleetSample) float64 {
		return perJob(float64(s.load.cost.calls), s.load.finished)
	}},
}

// cpuPerJobKey is the metric whose leasehold / River ratio the report's
// ratios hold.
const cpuPerJobKey = "server_cpu_us_per_job"

// over returns the spread of metric m over samples.
func (m fleetMetric) over(samples []fleetSample) Spread {
	var xs []float64
	for _, s := range samples {
		xs = append(xs, m.of(s))
	}
	sp, _ := spreadOf(xs)
	return sp
}

// cell renders a spread: the median, and min–max for more than one round.
func cell(sp Spread, digits int) string {
	v := fmt.Sprintf("%.*f", digits, sp.Median)
	if sp.Rounds > 1 {
		v += fmt.Sprintf(" (%.*f–%.*f)", digits, sp.Min, digits, sp.Max)
	}
	return v
}

// ratio returns a / b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// table returns the table of one size: a row per metric, leasehold's
// and River's medians with their spreads, and leasehold / River.
func (r fleetReport) table(res fleetSizeResult) ptable {
	f := r.flags
	t := ptable{title: fmt.Sprintf("Fleet %s: %d members, %d partitions (leasehold)", res.size, res.size.members, res.size.partitions),
		notes: []string{fmt.Sprintf("Median (min–max) over %d round(s); idle window %v, load window %v at %.0f jobs/s offered, "+
			"handler %v.", f.rounds, f.idle, f.load, f.rate, f.handler)},
		header: []string{"metric", "leasehold", "river", "leasehold / river"}}
	for _, m := range fleetMetrics {
		lh, rv := m.over(res.samples["leasehold"]), m.over(res.samples["river"])
		t.add(m.label, cell(lh, m.digits), cell(rv, m.digits), f2(ratio(lh.Median, rv.Median)))
	}
	return t
}

// print writes the machine line, a table per size, the statements (with
// --statements) and the rate search.
func (r fleetReport) print(w io.Writer, began time.Time) {
	e := r.env
	settings := fmt.Sprintf("%s, %s; River %s at its defaults (MaxWorkers %d), leasehold workers at theirs%s; "+
		"pools at pgxpool's default size%s", e.srv.where, e.srv.settings, riverVersion, fleetRiverMaxWorkers, r.flags.tuned(),
		e.bouncerSettings())
	var tables []ptable
	for _, res := range r.sizes {
		tables = append(tables, r.table(res))
	}
	if mr := r.maxRateTable(); mr != nil {
		tables = append(tables, *mr)
	}
	printTables(w, "fleet", machineLine(e.srv.version, settings, began), true, tables)
	if r.flags.statements {
		r.printStatements(w)
	}
}

// printStatements writes the top 5 statements by total execution and
// planning time of each system's last idle and load windows at each size.
func (r fleetReport) printStatements(w io.Writer) {
	if !r.env.statements {
		fmt.Fprintln(w, "No statements: pg_stat_statements is not loaded.")
		return
	}
	for _, res := range r.sizes {
		for _, sys := range []string{"leasehold", "river"} {
			ss := res.samples[sys]
			if len(ss) == 0 {
				continue
			}
			last := ss[len(ss)-1]
			idle := ptable{title: fmt.Sprintf("Top statements, %s, %s, last round's idle window (%v)", sys, res.size, last.idle.elapsed.Round(time.Second)),
				header: []string{"calls", "plans", "execution ms", "planning ms", "calls/s", "statement"}}
			for _, st := range last.idle.top {
				idle.add(fmt.Sprint(st.Calls), fmt.Sprint(st.Plans), f1(st.TotalMs), f1(st.PlanMs), f2(perSec(int(st.Calls), last.idle.elapsed)), stmtCell(st.Query))
			}
			idle.markdown(w)
			l := last.load
			t := ptable{title: fmt.Sprintf("Top statements, %s, %s, last round's load window (%d jobs finished)", sys, res.size, l.finished),
				header: []string{"calls", "plans", "execution ms", "planning ms", "calls/job", "statement"}}
			for _, st := range l.cost.top {
				t.add(fmt.Sprint(st.Calls), fmt.Sprint(st.Plans), f1(st.TotalMs), f1(st.PlanMs), f2(perJob(float64(st.Calls), l.finished)), stmtCell(st.Query))
			}
			t.markdown(w)
		}
	}
}

// stmtCell is a statement's text as a markdown table cell.
func stmtCell(q string) string {
	return "`" + strings.ReplaceAll(clip(q, 110), "|", "\\|") + "`"
}

// clip returns s cut to n runes, marked with an ellipsis when cut.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// maxRateTable returns the --max-rate search's table, nil without one.
func (r fleetReport) maxRateTable() *ptable {
	if len(r.maxRates) == 0 {
		return nil
	}
	t := ptable{title: fmt.Sprintf("Highest sustained rate (finished >= 95%% of offered, p99 < %v, %v windows)",
		r.flags.maxRateP99, r.flags.maxRateWindow), header: []string{"system", "size", "max jobs/s", "steps (offered: finished/s, p99 ms)"}}
	for _, mr := range r.maxRates {
		var steps []string
		for _, s := range mr.Steps {
			mark := "✗"
			if s.Pass {
				mark = "✓"
			}
			steps = append(steps, fmt.Sprintf("%.0f: %.0f, %.0f %s", s.Offered, s.Achieved, s.P99Ms, mark))
		}
		t.add(mr.System, mr.Case, f0(mr.Rate), strings.Join(steps, "; "))
	}
	return &t
}

// fleetJSON is the fleet suite's --json output, in the shape of Report.
type fleetJSON struct {
	Suite   string             `json:"suite"`
	Rounds  int                `json:"rounds"`
	Results []fleetRow         `json:"results"`
	Ratios  map[string]float64 `json:"ratios"`
	Server  *ServerSettings    `json:"server,omitempty"`
	MaxRate []fleetMaxRate     `json:"max_rate,omitempty"`
}

// fleetRow is one system at one size (Case, "MxP"): medians over rounds,
// every metric's median under its key in Metrics and its spread in Spread,
// and the last round's top statements of the load window.
type fleetRow struct {
	Result
	Members    int                `json:"members"`
	Partitions int                `json:"partitions"`
	Metrics    map[string]float64 `json:"metrics"`
	Spread     map[string]Spread  `json:"spread"`
	Statements []fleetStmt        `json:"top_statements,omitempty"`
}

// json returns the report as written by --json; ratios hold leasehold's
// server CPU per job over River's, by size.
func (r fleetReport) json() fleetJSON {
	out := fleetJSON{Suite: "fleet", Rounds: r.flags.rounds, Ratios: map[string]float64{}, Server: &r.env.srv.settings,
		MaxRate: r.maxRates}
	for _, res := range r.sizes {
		cpu := map[string]float64{}
		for _, sys := range []string{"leasehold", "river"} {
			ss := res.samples[sys]
			row := fleetRow{Members: res.size.members, Partitions: res.size.partitions,
				Metrics: map[string]float64{}, Spread: map[string]Spread{}}
			for _, m := range fleetMetrics {
				sp := m.over(ss)
				row.Metrics[m.key], row.Spread[m.key] = sp.Median, sp
			}
			row.Result = Result{System: sys, Case: res.size.String(), JobsPerSec: row.Metrics["jobs_per_sec"],
				P50Ms: row.Metrics["p50_ms"], P99Ms: row.Metrics["p99_ms"]}
			if len(ss) > 0 {
				l := ss[len(ss)-1].load
				for _, st := range l.cost.top {
					st.PerJob = perJob(float64(st.Calls), l.finished)
					row.Statements = append(row.Statements, st)
				}
			}
			cpu[sys] = row.Metrics[cpuPerJobKey]
			out.Results = append(out.Results, row)
		}
		out.Ratios[res.size.String()] = ratio(cpu["leasehold"], cpu["river"])
	}
	return out
}

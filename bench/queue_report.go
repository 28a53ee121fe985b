package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// queueTargets are the leasehold/peer ratios the suite aims for, per case
// and peer (measured and reported, never asserted in tests).
var queueTargets = map[string]map[string]float64{
	caseNoopBurndown: {sysQueueRiver: 2, sysQueueRaw: 0.5},
	caseSteady:       {sysQueueRiver: 2, sysQueueRaw: 0.5},
	caseTxOneRow:     {sysQueueRiver: 1},
}

// idleLatencyTargetMs is the idle-latency target: leasehold's median
// enqueue-to-start time below this many milliseconds.
const idleLatencyTargetMs = 10.0

// queueReport builds the report: medians per system and case, and per peer
// the ratios leasehold/peer. For idle-latency the ratio is of speeds, peer
// p50 over leasehold p50, so that above 1 means leasehold is ahead, as for
// every other case. Ratios holds River's (or the first peer's).
func queueReport(f queueFlags, all []*series) Report {
	var peers []string
	for _, s := range f.systems {
		if s != sysQueueLeasehold {
			peers = append(peers, s)
		}
	}
	primary := peers[0]
	if slices.Contains(peers, sysQueueRiver) {
		primary = sysQueueRiver
	}
	rep := newReport("queue", f.rounds, all, sysQueueLeasehold, primary)
	byKey := map[[2]string]Result{}
	for _, r := range rep.Results {
		byKey[[2]string{r.System, r.Case}] = r
	}
	rep.RatiosByPeer = map[string]map[string]float64{}
	for _, peer := range peers {
		m := map[string]float64{}
		for _, c := range f.cases {
			lh, ok1 := byKey[[2]string{sysQueueLeasehold, c}]
			p, ok2 := byKey[[2]string{peer, c}]
			switch {
			case !ok1 || !ok2:
			case c == caseIdleLatency && lh.P50Ms > 0:
				m[c] = p.P50Ms / lh.P50Ms
			case c != caseIdleLatency && p.JobsPerSec > 0:
				m[c] = lh.JobsPerSec / p.JobsPerSec
			}
		}
		rep.RatiosByPeer[peer] = m
	}
	rep.Ratios = rep.RatiosByPeer[primary]
	return rep
}

// queueTables returns the results table and the ratios table.
func queueTables(rep Report, all []*series, systems []queueSystem) []ptable {
	res := ptable{
		title: "Results (medians over rounds)",
		notes: []string{
			"jobs/s: jobs finished (completion committed) per second; enqueue cases: jobs inserted per second; " +
				"idle-latency: jobs per second of the case (paced, not a throughput)",
			"p50/p99: burndown, steady, tx-one-row: from the fetch that returned a job (River: its attempted_at) until its " +
				"completion committed (River: reported by its completer); enqueue: per call; idle-latency: from the start of " +
				"the enqueue until the handler started",
			"client CPU: this process's user+system time per job (client and server share the machine)",
		},
		header: []string{"case", "system", "jobs", "jobs/s", "p50 ms", "p99 ms", "client CPU µs/job", "jobs/s per round"},
	}
	cut := false
	for i, s := range all {
		r := rep.Results[i]
		var rounds []string
		var cpu, jobs []float64
		for _, x := range s.samples {
			mark := ""
			if x.short {
				mark, cut = "*", true
			}
			rounds = append(rounds, fmt.Sprintf("%.0f%s", x.rate(), mark))
			cpu = append(cpu, float64(x.cpuPerOp())/float64(time.Microsecond))
			jobs = append(jobs, float64(x.ops))
		}
		res.add(r.Case, r.System, f0(median(jobs)), f0(r.JobsPerSec), f2(r.P50Ms), f2(r.P99Ms), f1(median(cpu)),
			strings.Join(rounds, " "))
	}
	if cut {
		res.notes = append(res.notes, "* the backlog was not finished within --duration: the rate is the jobs finished by then over the time")
	}
	ratios := ptable{
		title: "leasehold / peer (median jobs/s; idle-latency: peer p50 / leasehold p50, so above 1 favours leasehold everywhere)",
		notes: []string{fmt.Sprintf("targets: no-op burndown and steady state at least 2x River and 0.5x the raw-SQL limit; "+
			"tx-one-row at least 1x River; idle-latency: leasehold p50 under %.0f ms", idleLatencyTargetMs)},
		header: []string{"case"},
	}
	var peers []string
	for _, s := range systems {
		if s.name() != sysQueueLeasehold {
			peers = append(peers, s.name())
			ratios.header = append(ratios.header, "vs "+s.name(), "target")
		}
	}
	ratios.header = append(ratios.header, "verdict")
	lhP50 := map[string]float64{}
	for _, r := range rep.Results {
		if r.System == sysQueueLeasehold {
			lhP50[r.Case] = r.P50Ms
		}
	}
	seen := map[string]bool{}
	for _, r := range rep.Results {
		if seen[r.Case] {
			continue
		}
		seen[r.Case] = true
		row := []string{r.Case}
		verdict := "-"
		for _, peer := range peers {
			ratio, ok := rep.RatiosByPeer[peer][r.Case]
			cell, target := "-", "-"
			if ok {
				cell = fRatio(ratio)
			}
			if t, ok2 := queueTargets[r.Case][peer]; ok2 && ok {
				target = f2(t)
				if verdict == "-" {
					verdict = "ok"
				}
				if ratio < t {
					verdict = "BELOW TARGET"
				}
			}
			row = append(row, cell, target)
		}
		if r.Case == caseIdleLatency {
			verdict = fmt.Sprintf("p50 %.1f ms: ok", lhP50[r.Case])
			if lhP50[r.Case] >= idleLatencyTargetMs {
				verdict = fmt.Sprintf("p50 %.1f ms: ABOVE %.0f ms", lhP50[r.Case], idleLatencyTargetMs)
			}
		}
		ratios.add(append(row, verdict)...)
	}
	return []ptable{res, ratios}
}

// queueDoc returns the queue suite's generated section of the benchmarks
// document: the machine line, each system's settings, the chart and the
// tables.
func queueDoc(machine string, systems []queueSystem, tables []ptable, f queueFlags) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", machine)
	fmt.Fprintf(&b, "Command: `cd bench && go run . queue %s`\n\n", strings.Join(f.args, " "))
	b.WriteString("Settings per system:\n\n")
	for _, s := range systems {
		fmt.Fprintf(&b, "- **%s**: %s.\n", s.name(), s.settings())
	}
	b.WriteString("\n")
	if f.svgPath != "" && f.docPath != "" {
		rel, err := filepath.Rel(filepath.Dir(f.docPath), f.svgPath)
		if err != nil {
			rel = f.svgPath
		}
		fmt.Fprintf(&b, "![jobs/s per system and case](%s)\n\n", filepath.ToSlash(rel))
	}
	for _, t := range tables {
		t.markdown(&b)
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// fRatio formats a ratio with two decimals, three below 0.1.
func fRatio(x float64) string {
	if x < 0.1 {
		return fmt.Sprintf("%.3f", x)
	}
	return f2(x)
}

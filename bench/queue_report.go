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

// queueReport builds the report: medians per system and case (of River's
// tx-one-row variants, the faster), and per peer the per-round ratios
// leasehold/peer (see roundRatio: above 1 favours leasehold in every case),
// their medians and spreads; leasehold's hot-key over its noop-burndown
// round by round; the variants. Ratios and RatioSpread hold River's (or
// the first peer's).
func queueReport(f queueFlags, all []*series) Report {
	var peers []string
	for _, s := range f.systems {
		if isPeer(s) {
			peers = append(peers, s)
		}
	}
	primary := ""
	if len(peers) > 0 {
		primary = peers[0]
	}
	if slices.Contains(peers, sysQueueRiver) {
		primary = sysQueueRiver
	}
	chosen, picked := chooseVariants(all)
	rep := Report{Suite: "queue", Rounds: f.rounds}
	bySys := map[[2]string]*series{}
	for _, s := range chosen {
		rep.Results = append(rep.Results, s.result())
		bySys[[2]string{s.system, s.kase}] = s
	}
	for _, s := range all {
		if s.variant != "" {
			rep.Variants = append(rep.Variants, VariantResult{Result: s.result(), Chosen: picked[s]})
		}
	}
	rep.RatiosByPeer = map[string]map[string]float64{}
	rep.RatioSpreadByPeer = map[string]map[string]Spread{}
	for _, peer := range peers {
		m, sp := map[string]float64{}, map[string]Spread{}
		for _, c := range f.cases {
			lh, ok1 := bySys[[2]string{sysQueueLeasehold, c}]
			p, ok2 := bySys[[2]string{peer, c}]
			if !ok1 || !ok2 {
				continue
			}
			if s, ok := spreadOf(pairedRatios(c, lh.samples, p.samples)); ok {
				m[c], sp[c] = s.Median, s
			}
		}
		rep.RatiosByPeer[peer], rep.RatioSpreadByPeer[peer] = m, sp
	}
	rep.Ratios, rep.RatioSpread = rep.RatiosByPeer[primary], rep.RatioSpreadByPeer[primary]
	self := func(name string, s Spread) {
		if rep.SelfRatios == nil {
			rep.SelfRatios, rep.SelfRatioSpread = map[string]float64{}, map[string]Spread{}
		}
		rep.SelfRatios[name], rep.SelfRatioSpread[name] = s.Median, s
	}
	hot, ok1 := bySys[[2]string{sysQueueLeasehold, caseHotKey}]
	noop, ok2 := bySys[[2]string{sysQueueLeasehold, caseNoopBurndown}]
	if ok1 && ok2 {
		if s, ok := spreadOf(selfRatios(hot.samples, noop.samples)); ok {
			self(selfHotKey, s)
		}
	}
	// leasehold+limits over leasehold, round by round, oriented as the
	// peers' ratios (above 1 favours leasehold+limits).
	for _, c := range f.cases {
		lim, ok1 := bySys[[2]string{sysQueueLimits, c}]
		lh, ok2 := bySys[[2]string{sysQueueLeasehold, c}]
		if !ok1 || !ok2 {
			continue
		}
		if s, ok := spreadOf(pairedRatios(c, lim.samples, lh.samples)); ok {
			self(limitsRatioName(c), s)
		}
	}
	return rep
}

// isPeer reports whether system sys is one of leasehold's peers in the
// ratios (not leasehold itself, nor leasehold+limits, compared with
// leasehold in a table of its own).
func isPeer(sys string) bool { return sys != sysQueueLeasehold && sys != sysQueueLimits }

// queueTables returns the results table, the ratios table (if a peer
// ran), the fair case's table (if it ran), and when both cases ran,
// leasehold's hot-key against its own noop-burndown, and leasehold+limits
// against leasehold (if it ran).
func queueTables(rep Report, all []*series, systems []queueSystem) []ptable {
	_, picked := chooseVariants(all)
	res := ptable{
		title: "Results (medians over rounds)",
		notes: []string{
			"jobs/s: jobs finished (completion committed) per second; enqueue cases: jobs inserted per second; " +
				"idle-latency: jobs per second of the case (paced, not a throughput); hol: all its jobs over the time " +
				"until the last one finished; fair: tenant A's jobs completed within tenant B's window, over the window",
			"p50/p99: burndowns, steady, tx-one-row, io-10ms: from the fetch that returned a job (River: its attempted_at) " +
				"until its completion committed (River: reported by its completer); enqueue: per call; idle-latency: from " +
				"the start of the enqueue until the handler started; hol: fast jobs only, from the start of the one batched " +
				"enqueue of all its jobs (time zero) until the job's completion was observed committed (leasehold: the commit " +
				"of the statement completing it; River: its completion event), not when its handler returned; fair: " +
				"tenant B's jobs, from right after the insert returned until the handler started",
			"client CPU: this process's user+system time per job (client and server share the machine)",
		},
		header: []string{"case", "system", "jobs", "jobs/s", "p50 ms", "p99 ms", "client CPU µs/job", "jobs/s per round"},
	}
	cut := false
	for _, s := range all {
		r := s.result()
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
		name := r.System
		if s.variant != "" {
			name += " (" + s.variant + ")"
			if picked[s] {
				name += " ✓"
			}
		}
		res.add(r.Case, name, f0(median(jobs)), f0(r.JobsPerSec), f2(r.P50Ms), f2(r.P99Ms), f1(median(cpu)),
			strings.Join(rounds, " "))
	}
	for _, v := range rep.Variants {
		if v.Chosen {
			res.notes = append(res.notes, fmt.Sprintf("%s: %s ran with more than one setting; the one with the higher "+
				"median jobs/s, %s (marked ✓), is its result in the ratios", v.Case, v.System, v.Variant))
		}
	}
	if cut {
		res.notes = append(res.notes, "* the backlog was not finished within --duration (hol: within its cap): the rate "+
			"is the jobs finished by then over the time; in hol, fast jobs not completed count as completed at the cut; "+
			"in fair, a B job not started by the cap (--fair-cap) counts as started at the cap")
	}
	out := []ptable{res}
	if slices.ContainsFunc(systems, func(s queueSystem) bool { return isPeer(s.name()) }) {
		out = append(out, ratiosTable(rep, systems))
	}
	out = append(out, fairTable(all)...)
	out = append(out, selfTable(rep)...)
	return append(out, limitsTable(rep, all)...)
}

// ratiosTable returns the table of leasehold / peer ratios with their
// spreads, targets and verdicts.
func ratiosTable(rep Report, systems []queueSystem) ptable {
	t := ptable{
		title: "leasehold / peer: the median of the per-round ratios (round i of leasehold over round i of the peer), " +
			"and their min–max over the rounds",
		notes: []string{
			"every ratio is oriented so that above 1 favours leasehold: jobs/s over jobs/s; idle-latency: peer p50 / " +
				"leasehold p50; hol: peer p99 / leasehold p99 of the fast jobs' time from enqueue to completion; fair: " +
				"peer p99 / leasehold p99 of tenant B's wait",
			"a difference lies within the spread when the rounds fall on both sides of 1 (min < 1 < max): they do not " +
				"establish which system is ahead; the verdict says so",
			fmt.Sprintf("targets: no-op burndown and steady state at least 2x River and 0.5x the raw-SQL limit; "+
				"tx-one-row at least 1x River; idle-latency: leasehold p50 under %.0f ms; fair: leasehold's tenant B "+
				"p99 wait under %.0f ms", idleLatencyTargetMs, fairTargetMs),
		},
		header: []string{"case"},
	}
	var peers []string
	for _, s := range systems {
		if isPeer(s.name()) {
			peers = append(peers, s.name())
			t.header = append(t.header, "vs "+s.name(), "min–max", "target")
		}
	}
	t.header = append(t.header, "verdict")
	lhP50, lhP99 := map[string]float64{}, map[string]float64{}
	for _, r := range rep.Results {
		if r.System == sysQueueLeasehold {
			lhP50[r.Case], lhP99[r.Case] = r.P50Ms, r.P99Ms
		}
	}
	seen := map[string]bool{}
	for _, r := range rep.Results {
		if seen[r.Case] {
			continue
		}
		seen[r.Case] = true
		row := []string{r.Case}
		var verdict []string
		targetVerdict := ""
		for _, peer := range peers {
			sp, ok := rep.RatioSpreadByPeer[peer][r.Case]
			cell, spread, target := "-", "-", "-"
			if ok {
				cell, spread = fRatio(sp.Median), fRatio(sp.Min)+"–"+fRatio(sp.Max)
				if sp.Straddles(1) {
					verdict = append(verdict, "vs "+peer+": within the spread (min < 1 < max)")
				}
			}
			if tg, ok2 := queueTargets[r.Case][peer]; ok2 && ok {
				target = f2(tg)
				if targetVerdict == "" {
					targetVerdict = "ok"
				}
				if sp.Median < tg {
					targetVerdict = "BELOW TARGET"
				}
				if sp.Straddles(tg) {
					verdict = append(verdict, "vs "+peer+": target within the spread")
				}
			}
			row = append(row, cell, spread, target)
		}
		if targetVerdict != "" {
			verdict = append([]string{targetVerdict}, verdict...)
		}
		if r.Case == caseIdleLatency {
			v := fmt.Sprintf("p50 %.1f ms: ok", lhP50[r.Case])
			if lhP50[r.Case] >= idleLatencyTargetMs {
				v = fmt.Sprintf("p50 %.1f ms: ABOVE %.0f ms", lhP50[r.Case], idleLatencyTargetMs)
			}
			verdict = append([]string{v}, verdict...)
		}
		if r.Case == caseFair {
			v := fmt.Sprintf("B p99 %.1f ms: ok", lhP99[r.Case])
			if lhP99[r.Case] >= fairTargetMs {
				v = fmt.Sprintf("B p99 %.1f ms: ABOVE %.0f ms", lhP99[r.Case], fairTargetMs)
			}
			verdict = append([]string{v}, verdict...)
		}
		if len(verdict) == 0 {
			verdict = []string{"-"}
		}
		t.add(append(row, strings.Join(verdict, "; "))...)
	}
	return t
}

// limitsTable returns the table of leasehold+limits against leasehold,
// if both ran: per case the median of the per-round ratios, their
// min–max, and the target.
func limitsTable(rep Report, all []*series) []ptable {
	t := ptable{
		title: "leasehold+limits / leasehold: limits declared on every handler but never binding (KeyConcurrency " +
			"1000, KeyRate 1,000,000 per second), the median of the per-round ratios and their min–max",
		notes: []string{fmt.Sprintf("oriented as the peers' ratios, above 1 favouring leasehold+limits: jobs/s over "+
			"jobs/s; idle-latency: leasehold p50 / leasehold+limits p50; hol, fair: leasehold p99 / leasehold+limits p99; "+
			"target: at least %.2f (declaring limits that never bind costs at most 5%%)", limitsTarget)},
		header: []string{"case", "ratio", "min–max", "target", "verdict"},
	}
	seen := map[string]bool{}
	for _, s := range all {
		name := limitsRatioName(s.kase)
		sp, ok := rep.SelfRatioSpread[name]
		if !ok || seen[name] {
			continue
		}
		seen[name] = true
		verdict := "ok"
		if sp.Median < limitsTarget {
			verdict = "BELOW TARGET"
		}
		if sp.Straddles(limitsTarget) {
			verdict += "; target within the spread"
		}
		t.add(s.kase, fRatio(sp.Median), fRatio(sp.Min)+"–"+fRatio(sp.Max), f2(limitsTarget), verdict)
	}
	if len(t.rows) == 0 {
		return nil
	}
	return []ptable{t}
}

// selfTable returns the table of leasehold against itself, if any.
func selfTable(rep Report) []ptable {
	sp, ok := rep.SelfRatioSpread[selfHotKey]
	if !ok {
		return nil
	}
	t := ptable{
		title: "leasehold against itself: hot-key jobs/s / noop-burndown jobs/s in the same round",
		notes: []string{fmt.Sprintf("target: at least %.1f (a backlog of one key burns down at least half as fast "+
			"as one spread over many keys)", selfHotKeyTarget)},
		header: []string{"ratio", "median", "min–max", "target", "verdict"},
	}
	verdict := "ok"
	if sp.Median < selfHotKeyTarget {
		verdict = "BELOW TARGET"
	}
	if sp.Straddles(selfHotKeyTarget) {
		verdict += "; target within the spread"
	}
	t.add(selfHotKey, fRatio(sp.Median), fRatio(sp.Min)+"–"+fRatio(sp.Max), f2(selfHotKeyTarget), verdict)
	return []ptable{t}
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

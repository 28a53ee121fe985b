package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a suite's result, as written by --json. Every suite uses this
// shape so that results can be compared and plotted uniformly.
type Report struct {
	// Suite is the suite's name, e.g. "lease".
	Suite string `json:"suite"`
	// Rounds is how many times each case ran on each system.
	Rounds int `json:"rounds"`
	// Results holds one entry per system and case, medians over rounds.
	Results []Result `json:"results"`
	// Ratios maps each case to the measured system's rate divided by the
	// baseline's (for the lease suite: leasehold / raw-sql): the ratio of
	// their medians, or for suites that pair rounds (queue) the median of
	// the per-round ratios.
	Ratios map[string]float64 `json:"ratios"`
	// RatiosByPeer, for suites with more than one peer (queue: River and
	// the raw-SQL limit), maps each peer to its ratios as in Ratios, which
	// then holds the first peer's.
	RatiosByPeer map[string]map[string]float64 `json:"ratios_by_peer,omitempty"`
	// RatioSpread, for suites that pair rounds (queue), maps each case to
	// the spread of its per-round ratios (round i's measured system over
	// round i's baseline); Ratios then holds their medians.
	RatioSpread map[string]Spread `json:"ratio_spread,omitempty"`
	// RatioSpreadByPeer is RatioSpread for each peer, as RatiosByPeer.
	RatioSpreadByPeer map[string]map[string]Spread `json:"ratio_spread_by_peer,omitempty"`
	// SelfRatios compares the measured system with itself, one case over
	// another in the same round, by name ("hot-key/noop-burndown"): the
	// median of the per-round ratios.
	SelfRatios map[string]float64 `json:"self_ratios,omitempty"`
	// SelfRatioSpread is the spread of each self ratio's per-round ratios.
	SelfRatioSpread map[string]Spread `json:"self_ratio_spread,omitempty"`
	// Variants lists the results of systems run more than once in a case
	// with different settings; Results holds the one chosen.
	Variants []VariantResult `json:"variants,omitempty"`
	// Server holds the server's durability settings.
	Server *ServerSettings `json:"server,omitempty"`
}

// Spread sums up per-round ratios.
type Spread struct {
	// Min is the lowest per-round ratio.
	Min float64 `json:"min"`
	// Median is the median per-round ratio (the mean of the middle two for
	// an even count).
	Median float64 `json:"median"`
	// Max is the highest per-round ratio.
	Max float64 `json:"max"`
	// Rounds is how many rounds were paired.
	Rounds int `json:"rounds"`
}

// Straddles reports whether x lies within the spread, strictly between its
// min and max: the rounds fall on both sides of it.
func (s Spread) Straddles(x float64) bool { return s.Min < x && x < s.Max }

// VariantResult is the median outcome of one variant of a system in a case.
type VariantResult struct {
	Result
	// Chosen marks the variant whose result Results holds.
	Chosen bool `json:"chosen"`
}

// Result is the median outcome of one case on one system.
type Result struct {
	// System is the implementation measured, e.g. "leasehold" or "raw-sql".
	System string `json:"system"`
	// Case names what was measured, e.g. "acquire".
	Case string `json:"case"`
	// JobsPerSec is the rate of the case's unit of work per second (jobs
	// for queue suites, lease operations for the lease suite).
	JobsPerSec float64 `json:"jobs_per_sec"`
	// P50Ms and P99Ms are operation latencies in milliseconds.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// Variant names the system's settings when it ran the case in more
	// than one way (see Report.Variants).
	Variant string `json:"variant,omitempty"`
}

// series collects the samples of one case on one system over the rounds.
type series struct {
	system, kase string
	variant      string // settings, when the system runs the case in more than one way
	samples      []sample
}

// result returns the medians over the series' rounds.
func (s *series) result() Result {
	var rates, p50, p99 []float64
	for _, x := range s.samples {
		rates = append(rates, x.rate())
		p50 = append(p50, ms(x.quantile(0.50)))
		p99 = append(p99, ms(x.quantile(0.99)))
	}
	return Result{System: s.system, Case: s.kase, JobsPerSec: median(rates), P50Ms: median(p50), P99Ms: median(p99),
		Variant: s.variant}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median returns the median of xs (the mean of the middle two for an even
// count), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// newReport builds the report of suite from series, with ratios of system
// over baseline for every case both ran, in the order of cases.
func newReport(suite string, rounds int, all []*series, system, baseline string) Report {
	r := Report{Suite: suite, Rounds: rounds, Ratios: map[string]float64{}}
	byKey := map[[2]string]Result{}
	for _, s := range all {
		res := s.result()
		r.Results = append(r.Results, res)
		byKey[[2]string{res.System, res.Case}] = res
	}
	for _, res := range r.Results {
		if res.System != system {
			continue
		}
		if b, ok := byKey[[2]string{baseline, res.Case}]; ok && b.JobsPerSec > 0 {
			r.Ratios[res.Case] = res.JobsPerSec / b.JobsPerSec
		}
	}
	return r
}

// printTable writes the report as a table: one row per case and system
// with the medians and every round's rate, then the ratios.
func printTable(w io.Writer, r Report, all []*series, system, baseline string, target float64) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tsystem\tops/s\tp50 ms\tp99 ms\tclient CPU µs/op\tops/s per round\t")
	for i, s := range all {
		res := r.Results[i]
		var rounds []string
		var cpu []float64
		for _, x := range s.samples {
			cpu = append(cpu, float64(x.cpuPerOp())/float64(time.Microsecond))
			mark := ""
			if x.short {
				mark = "*"
			}
			rounds = append(rounds, fmt.Sprintf("%.0f%s", x.rate(), mark))
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.3f\t%.3f\t%.1f\t%s\t\n",
			res.Case, res.System, res.JobsPerSec, res.P50Ms, res.P99Ms, median(cpu), strings.Join(rounds, " "))
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%s / %s (median ops/s), target >= %.2f:\n", system, baseline, target)
	seen := map[string]bool{}
	for _, res := range r.Results {
		ratio, ok := r.Ratios[res.Case]
		if !ok || seen[res.Case] {
			continue
		}
		seen[res.Case] = true
		verdict := "ok"
		if ratio < target {
			verdict = "BELOW TARGET"
		}
		fmt.Fprintf(w, "  %-8s %.3f  %s\n", res.Case, ratio, verdict)
	}
	for _, s := range all {
		for _, x := range s.samples {
			if x.short {
				fmt.Fprintln(w, "\n* a worker ran out of pre-acquired leases before the duration ended; that round is shorter")
				return
			}
		}
	}
}

// writeJSON writes r (a suite's report) to path, indented.
func writeJSON(path string, r any) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// partitionsReport is the partitions suite's --json output. It has the
// shape of Report, with rows that carry the suite's own metrics.
type partitionsReport struct {
	Suite   string             `json:"suite"`
	Rounds  int                `json:"rounds"`
	Results []partitionsRow    `json:"results"`
	Ratios  map[string]float64 `json:"ratios"`
}

// partitionsRow is one result of the partitions suite. System is
// "assign(<replication factor>,<load>)" for the pure computation and
// "leasehold" for the parts run on PostgreSQL; Case names the measurement.
// Fields a case does not measure are left out.
type partitionsRow struct {
	System string `json:"system"`
	Case   string `json:"case"`

	Partitions        int     `json:"partitions,omitempty"`
	Members           int     `json:"members,omitempty"`
	ReplicationFactor int     `json:"replication_factor,omitempty"`
	Load              float64 `json:"load,omitempty"`
	Samples           int     `json:"samples,omitempty"`

	// Movement: partitions moved over the ideal n/(k+1), and the largest
	// member's partitions over the average after the change.
	MovedOverIdealMean float64 `json:"moved_over_ideal_mean,omitempty"`
	MovedOverIdealMax  float64 `json:"moved_over_ideal_max,omitempty"`
	MaxOverAvgLoadMean float64 `json:"max_over_avg_load_mean,omitempty"`
	MaxOverAvgLoadMax  float64 `json:"max_over_avg_load_max,omitempty"`
	// Sweep: the mean of moved/ideal over joins and over leaves, and the
	// median time of one assignment at the largest (n, k).
	JoinMovedOverIdealMean  float64 `json:"join_moved_over_ideal_mean,omitempty"`
	LeaveMovedOverIdealMean float64 `json:"leave_moved_over_ideal_mean,omitempty"`
	AssignMicros            float64 `json:"assign_us,omitempty"`

	// Handoff and failover: time from the change until the group converged.
	MinMs float64 `json:"min_ms,omitempty"`
	P50Ms float64 `json:"p50_ms,omitempty"`
	P99Ms float64 `json:"p99_ms,omitempty"`
	MaxMs float64 `json:"max_ms,omitempty"`

	// Load: committed plus rolled-back transactions in the bench database
	// (server side) and statements sent (client side), per member per second.
	XactsPerSecPerMember float64 `json:"xacts_per_sec_per_member,omitempty"`
	ConnsPerMember       float64 `json:"server_connections_per_member,omitempty"`
	StmtsPerSecPerMember float64 `json:"stmts_per_sec_per_member,omitempty"`
	WindowSeconds        float64 `json:"window_s,omitempty"`
}

// ptable is one table of the report, printed as aligned text or Markdown.
type ptable struct {
	title  string
	notes  []string // lines under the title
	header []string
	rows   [][]string
}

func (t *ptable) add(cells ...string) { t.rows = append(t.rows, cells) }

// text writes t as a title, notes and right-aligned columns.
func (t ptable) text(w io.Writer) {
	fmt.Fprintf(w, "%s\n", t.title)
	for _, n := range t.notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(t.header, "\t")+"\t")
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// markdown writes t as a bold title, notes and a Markdown table with
// right-aligned columns.
func (t ptable) markdown(w io.Writer) {
	fmt.Fprintf(w, "**%s**\n\n", t.title)
	for _, n := range t.notes {
		fmt.Fprintf(w, "%s\n", n)
	}
	if len(t.notes) > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(t.header, " | "))
	sep := make([]string, len(t.header))
	for i := range sep {
		sep[i] = "--:"
	}
	fmt.Fprintf(w, "|%s|\n", strings.Join(sep, "|"))
	for _, r := range t.rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	fmt.Fprintln(w)
}

func f2(x float64) string { return fmt.Sprintf("%.2f", x) }
func f0(x float64) string { return fmt.Sprintf("%.0f", x) }
func f1(x float64) string { return fmt.Sprintf("%.1f", x) }

// machineLine describes the machine, versions and settings of a run.
func machineLine(pg string, settings string, began time.Time) string {
	return fmt.Sprintf("Machine: nproc %d (GOMAXPROCS %d), PostgreSQL %s, %s %s/%s, %s. Settings: %s. Run time %v.",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), pg, runtime.Version(), runtime.GOOS, runtime.GOARCH,
		began.UTC().Format("2006-01-02"), settings, time.Since(began).Round(time.Second))
}

// printTables prints a suite's machine line and tables, as Markdown or text.
func printTables(w io.Writer, suite, machine string, markdown bool, tables []ptable) {
	if markdown {
		fmt.Fprintf(w, "%s\n\n", machine)
		for _, t := range tables {
			t.markdown(w)
		}
		return
	}
	fmt.Fprintf(w, "%s suite\n%s\n\n", suite, machine)
	for _, t := range tables {
		t.text(w)
	}
}

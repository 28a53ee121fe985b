package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgcluster"
)

// TestQueueSuite runs every case of the queue suite tiny on every system
// on a real server (one round, short caps) and checks the Markdown tables,
// the JSON report, the chart and the document section. Each measurement
// checks in the database that the system processed every job it counted,
// exactly once (and a burndown that was not cut: every job).
func TestQueueSuite(t *testing.T) {
	if os.Getenv(envURL) == "" {
		if _, err := pgcluster.FindBinDir(); errors.Is(err, pgcluster.ErrNotInstalled) {
			t.Skip(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	path, svg, doc := filepath.Join(dir, "queue.json"), filepath.Join(dir, "q.svg"), filepath.Join(dir, "b.md")
	if err := os.WriteFile(doc, []byte("# Benchmarks\n\nHand-written text.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := runQueue(ctx, []string{"--jobs", "500", "--tx-jobs", "100", "--io-jobs", "100", "--hot-jobs", "100",
		"--hol-jobs", "200", "--hol-slow", "100ms", "--fair-jobs", "300", "--fair-every", "100ms", "--partitions", "2", "--rounds", "1", "--keys", "50",
		"--duration", "1s", "--steady-backlog", "300", "--enqueue-size", "20", "--latency-jobs", "3",
		"--latency-spread", "10ms", "--lh-poll", "50ms", "--warmup=false",
		"--markdown", "--json", path, "--svg", svg, "--doc", doc}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Machine: nproc", "| noop-burndown | leasehold | 500 |", "| noop-burndown | river | 500 |",
		"| tx-one-row | raw-sql | 100 |", "| tx-one-row | river (MaxWorkers 2000)", "| tx-one-row | river (MaxWorkers 2)",
		"✓ |", "| idle-latency | river | 3 |", "| keyless | river | 500 |", "| io-10ms | river | 100 |",
		"| hol | leasehold | 200 |", "| hol | river | 200 |", "| fair | leasehold |", "| fair | river |",
		"fair: tenant B's wait", "| hot-key/noop-burndown | ",
		"| case | vs river | min–max | target | vs raw-sql | min–max | target | verdict |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Markdown output lacks %q:\n%s", want, out.String())
		}
	}
	checkQueueReport(t, path)
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "idle-latency", "hol", "p99 ms", "river", "</svg>"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	b, err = os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := docMarkers("queue")
	for _, want := range []string{"Hand-written text.", begin, end, "| enqueue-batch | river |", "](q.svg)", "**river**: River v0.51.2",
		"durable (fsync", "within the spread", "peer p99 / leasehold p99", "observed committed"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("document lacks %q:\n%s", want, b)
		}
	}
}

// checkQueueReport checks the queue suite's --json report: one round, a
// plausible result for every case on every system that runs it
// (burndowns complete: every job counted), ratios and their spreads per
// peer, River's two tx-one-row variants, the self ratio and the server.
func checkQueueReport(t *testing.T, path string) {
	t.Helper()
	rep := readReport(t, path)
	if rep.Suite != "queue" || rep.Rounds != 1 {
		t.Errorf("suite %q rounds %d, want queue 1", rep.Suite, rep.Rounds)
	}
	got := map[[2]string]Result{}
	for _, r := range rep.Results {
		got[[2]string{r.System, r.Case}] = r
	}
	want := 0
	for _, c := range queueCases {
		for _, sys := range queueSystems {
			if !caseRuns(c, sys) {
				if _, ok := got[[2]string{sys, c}]; ok {
					t.Errorf("a result for %s on %s, which does not run it", c, sys)
				}
				continue
			}
			want++
			r, ok := got[[2]string{sys, c}]
			switch {
			case !ok:
				t.Errorf("no result for %s on %s", c, sys)
			case r.JobsPerSec <= 0 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms:
				t.Errorf("%s on %s: implausible %+v", c, sys, r)
			}
			if sys == sysQueueLeasehold {
				continue
			}
			sp := rep.RatioSpreadByPeer[sys][c]
			if rep.RatiosByPeer[sys][c] <= 0 || sp.Rounds != 1 || sp.Min != sp.Median || sp.Max != sp.Median ||
				sp.Median != rep.RatiosByPeer[sys][c] {
				t.Errorf("ratio for %s vs %s is %v, spread %+v", c, sys, rep.RatiosByPeer[sys][c], sp)
			}
		}
		if rep.Ratios[c] != rep.RatiosByPeer[sysQueueRiver][c] || rep.RatioSpread[c] != rep.RatioSpreadByPeer[sysQueueRiver][c] {
			t.Errorf("ratios[%s] = %v, not River's %v", c, rep.Ratios[c], rep.RatiosByPeer[sysQueueRiver][c])
		}
	}
	if len(rep.Results) != want {
		t.Errorf("%d results, want %d", len(rep.Results), want)
	}
	chosen := 0
	for _, v := range rep.Variants {
		if v.System != sysQueueRiver || v.Case != caseTxOneRow || v.JobsPerSec <= 0 {
			t.Errorf("variant %+v", v)
		}
		if v.Chosen {
			chosen++
			if r := got[[2]string{sysQueueRiver, caseTxOneRow}]; r != v.Result {
				t.Errorf("River's tx-one-row result %+v is not the chosen variant's %+v", r, v.Result)
			}
		}
	}
	if len(rep.Variants) != 2 || chosen != 1 {
		t.Errorf("variants %+v: want River's two in tx-one-row, one chosen", rep.Variants)
	}
	if r := rep.SelfRatios[selfHotKey]; r <= 0 || rep.SelfRatioSpread[selfHotKey].Median != r {
		t.Errorf("self ratios %v, spread %v", rep.SelfRatios, rep.SelfRatioSpread)
	}
	if rep.Server == nil || (os.Getenv(envURL) == "" && !rep.Server.Durable) {
		t.Errorf("server %+v: want the default throwaway server durable", rep.Server)
	}
}

func TestQueueFlags(t *testing.T) {
	f, err := parseQueueFlags([]string{"--jobs", "1000", "--partitions", "4"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.txJobs != 200 || f.conns != 4 || len(f.cases) != len(queueCases) || f.jobsOf(caseTxOneRow) != 200 ||
		f.jobsOf(caseNoopBurndown) != 1000 || f.jobsOf(caseKeyless) != 1000 || f.jobsOf(caseIO) != 20000 ||
		f.jobsOf(caseHotKey) != 20000 || f.jobsOf(caseHOL) != 2000 || f.holSlow != 2*time.Second ||
		f.concurrency != 100 || f.rounds != 5 || f.nonDurable || strings.Join(f.systems, ",") != "leasehold,river,raw-sql" ||
		f.jobsOf(caseFair) != 100000 || f.fairEvery != 100*time.Millisecond || f.fairB != fairBKey(4) || f.limits ||
		f.fairCap(10*time.Second) != 20*time.Second {
		t.Errorf("defaults: %+v", f)
	}
	if f.holSleep(99) != 2*time.Second || f.holSleep(100) != holFast || f.holSleep(0) != holFast || f.holCap() != 10*time.Second {
		t.Errorf("hol sleeps %v %v %v, cap %v", f.holSleep(99), f.holSleep(100), f.holSleep(0), f.holCap())
	}
	f, err = parseQueueFlags([]string{"--systems", "leasehold,raw-sql", "--cases", "idle-latency,steady"}, io.Discard)
	if err != nil || strings.Join(f.systems, ",") != "leasehold,raw-sql" || strings.Join(f.cases, ",") != "steady,idle-latency" {
		t.Errorf("selection: %v %+v", err, f)
	}
	f, err = parseQueueFlags([]string{"--limits"}, io.Discard)
	if err != nil || strings.Join(f.systems, ",") != "leasehold,leasehold+limits,river,raw-sql" {
		t.Errorf("--limits: %v %v", err, f.systems)
	}
	f, err = parseQueueFlags([]string{"--systems", "river,leasehold", "--limits"}, io.Discard)
	if err != nil || strings.Join(f.systems, ",") != "river,leasehold,leasehold+limits" {
		t.Errorf("--limits after leasehold: %v %v", err, f.systems)
	}
	for _, bad := range [][]string{{"--cases", "nope"}, {"--jobs", "0"}, {"--rounds", "0"}, {"--duration", "0s"}, {"extra"},
		{"--fair-jobs", "0"}, {"--fair-every", "0s"}, {"--fair-cap", "-1s"},
		{"--systems", "river,raw-sql"}, {"--systems", "leasehold"}, {"--systems", "leasehold,nope"},
		{"--systems", "leasehold,river,river"}, {"--river-workers", "0"}, {"--lh-poll", "-1s"}, {"--concurrency", "0"},
		{"--io-jobs", "0"}, {"--hot-jobs", "0"}, {"--hol-jobs", "0"}, {"--hol-slow", "0s"}} {
		if _, err := parseQueueFlags(bad, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestReplaceSection(t *testing.T) {
	begin, end := docMarkers("queue")
	doc, err := replaceSection("# T\n\nintro\n", "queue", "one")
	if err != nil || doc != "# T\n\nintro\n\n"+begin+"\n\none\n\n"+end+"\n" {
		t.Fatalf("append: %v %q", err, doc)
	}
	doc2, err := replaceSection(doc+"\nafter\n", "queue", "two\n")
	if err != nil || doc2 != "# T\n\nintro\n\n"+begin+"\n\ntwo\n\n"+end+"\n\nafter\n" {
		t.Fatalf("replace: %v %q", err, doc2)
	}
	if _, err := replaceSection(begin+"\nno end\n", "queue", "x"); err == nil {
		t.Error("a section without its end marker was accepted")
	}
}

func TestChartSVG(t *testing.T) {
	rep := Report{Results: []Result{
		{System: sysQueueLeasehold, Case: caseNoopBurndown, JobsPerSec: 100000},
		{System: sysQueueRiver, Case: caseNoopBurndown, JobsPerSec: 25000},
		{System: sysQueueLeasehold, Case: caseIdleLatency, JobsPerSec: 3, P50Ms: 4.5},
		{System: sysQueueRiver, Case: caseIdleLatency, JobsPerSec: 3, P50Ms: 9},
	}}
	s := chartSVG("t <&>", "sub", rep)
	for _, want := range []string{"t &lt;&amp;&gt;", ">100k<", ">25k<", ">4.5<", ">9.0<", "lower is better", `fill="#dd6b20"`} {
		if !strings.Contains(s, want) {
			t.Errorf("chart lacks %q:\n%s", want, s)
		}
	}
	// The tallest bar of a panel fills it; the others are to scale.
	if !strings.Contains(s, `height="150" fill="#2b6cb0"`) || !strings.Contains(s, `height="38" fill="#dd6b20"`) {
		t.Errorf("bars not to scale:\n%s", s)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgbouncer"
	"github.com/leasehold/leasehold/internal/pgtest"
)

// TestFleetSuite runs the fleet suite tiny (2 members, 8 partitions, idle
// 1s, load 2s at 50 jobs/s, one round) on a real server and checks that
// the report has both systems, each of which finished jobs, with
// latencies, server CPU and transactions per job above 0.
func TestFleetSuite(t *testing.T) {
	t.Parallel() // a throwaway server of its own; checks the report's shape, not its speed
	out, path, err := runFleetBrief(t, "--load", "2s", "--statements")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**Fleet 2x8: 2 members, 8 partitions (leasehold)**", "| load: server CPU µs per job |",
		"Top statements, leasehold, 2x8", "Top statements, river, 2x8"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	rep := readFleetJSON(t, path)
	checkFleetReport(t, rep)
}

// fleetReportProblems returns what is wrong with a fleet report of one
// size, 2x8: a system missing, no jobs finished, no latencies, server CPU
// or transactions, no statements, no CPU ratio.
func fleetReportProblems(rep fleetJSON) []string {
	var bad []string
	seen := map[string]bool{}
	for _, r := range rep.Results {
		seen[r.System] = true
		if r.Case != "2x8" || r.Members != 2 || r.Partitions != 8 {
			bad = append(bad, fmt.Sprintf("%s: case %q, %d members, %d partitions; want 2x8", r.System, r.Case, r.Members, r.Partitions))
		}
		if r.JobsPerSec <= 0 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms {
			bad = append(bad, fmt.Sprintf("%s: %.1f jobs/s, p50 %.2fms, p99 %.2fms; want jobs finished and latencies",
				r.System, r.JobsPerSec, r.P50Ms, r.P99Ms))
		}
		for _, k := range []string{cpuPerJobKey, "xacts_per_job", "load_server_cpu_cores", "idle_xacts_per_sec"} {
			if r.Metrics[k] <= 0 {
				bad = append(bad, fmt.Sprintf("%s: %s = %v, want > 0", r.System, k, r.Metrics[k]))
			}
		}
		if len(r.Statements) == 0 {
			bad = append(bad, r.System+": no top statements")
		}
	}
	if !seen["leasehold"] || !seen["river"] || len(rep.Results) != 2 {
		bad = append(bad, fmt.Sprintf("%d results: want one row of each system", len(rep.Results)))
	}
	if rep.Ratios["2x8"] <= 0 {
		bad = append(bad, fmt.Sprintf("ratios %v: want leasehold / river CPU per job for 2x8", rep.Ratios))
	}
	return bad
}

// checkFleetReport fails t with the report's problems, then checks that
// doctored copies are caught (negative controls): River's row dropped,
// leasehold's server CPU zeroed.
func checkFleetReport(t *testing.T, rep fleetJSON) {
	t.Helper()
	for _, p := range fleetReportProblems(rep) {
		t.Error(p)
	}
	noRiver := rep
	noRiver.Results = slices.DeleteFunc(slices.Clone(rep.Results), func(r fleetRow) bool { return r.System == "river" })
	noCPU := rep
	noCPU.Results = slices.Clone(rep.Results)
	for i := range noCPU.Results {
		noCPU.Results[i].Metrics = maps.Clone(noCPU.Results[i].Metrics)
		noCPU.Results[i].Metrics[cpuPerJobKey] = 0
	}
	for name, doctored := range map[string]fleetJSON{"no river": noRiver, "no CPU": noCPU} {
		if len(fleetReportProblems(doctored)) == 0 {
			t.Errorf("negative control %q: the doctored report passed", name)
		}
	}
}

// TestFleetSuiteBehindPgBouncer runs the fleet suite briefly with
// --pgbouncer: both systems' workers through the pooler, leasehold's
// ready (every partition held by its owner) and finishing jobs, and each
// leasehold worker's server connections counted: its LISTEN session at
// least. Skipped when pgbouncer is not installed, unless
// LEASEHOLD_REQUIRE_PGBOUNCER is set.
func TestFleetSuiteBehindPgBouncer(t *testing.T) {
	t.Parallel() // a throwaway server of its own; checks the report's shape, not its speed
	// 3 s of load: River's workers poll (PollOnly, behind the pooler) once
	// a second, and in a 1 s window they once finished nothing (CI).
	out, path, err := runFleetBrief(t, "--load", "3s", "--pgbouncer")
	if errors.Is(err, pgbouncer.ErrNotInstalled) && os.Getenv(pgtest.EnvRequirePgBouncer) == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "workers through PgBouncer 1.18 in transaction mode") {
		t.Errorf("the settings line does not say the workers went through PgBouncer:\n%s", out)
	}
	rep := readFleetJSON(t, path)
	for _, r := range rep.Results {
		if r.JobsPerSec <= 0 {
			t.Errorf("%s behind PgBouncer finished no jobs", r.System)
		}
		if c := r.Metrics["idle_connections_per_member"]; r.System == "leasehold" && c < 1 {
			t.Errorf("leasehold behind PgBouncer: %.2f server connections per idle member; want at least its LISTEN session", c)
		}
	}
}

// readFleetJSON reads the fleet suite's JSON report at path.
func readFleetJSON(t *testing.T, path string) fleetJSON {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep fleetJSON
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// runFleetBrief runs the fleet suite tiny (--quick, 2 members x 8
// partitions, idle 1s, 50 jobs/s) with the further args on a server of its
// own, and returns its output and the path of its JSON report.
func runFleetBrief(t *testing.T, args ...string) (out, path string, err error) {
	t.Helper()
	needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	path = filepath.Join(t.TempDir(), "fleet.json")
	var b bytes.Buffer
	err = runFleet(ctx, append([]string{"--quick", "--sizes", "2x8", "--idle", "1s", "--rate", "50", "--json", path}, args...),
		&b, io.Discard)
	return b.String(), path, err
}

package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/leasehold/leasehold/internal/pgtest"
)

// envWorker makes the test binary a worker process: Command re-executes
// it with this variable set and the worker's flags after "--".
const envWorker = "LEASEHOLD_CHAOS_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(envWorker) != "" {
		os.Exit(workerMain(os.Args[1:]))
	}
	os.Exit(pgtest.Run(m))
}

// fakeCommand is a Command for configuration tests.
func fakeCommand(args ...string) *exec.Cmd { return exec.Command("true", args...) }

// testCommand starts this test binary as a worker process.
func testCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envWorker+"=1")
	return cmd
}

// workerMain parses the flags the orchestrator passes, as the CLI's
// hidden worker command does, and runs the worker.
func workerMain(args []string) int {
	var cfg WorkerConfig
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	WorkerFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := RunWorker(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

// tinyRun runs a short chaos run on its own throwaway cluster (the
// pg_restart fault needs a server it may restart).
func tinyRun(t *testing.T, workload string, unfenced bool) *Report {
	t.Helper()
	if testing.Short() {
		t.Skip("a chaos run of worker processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out strings.Builder
	rep, err := Run(ctx, Config{
		Workload: workload, Workers: 3, Partitions: 8, Keys: 32, Jobs: 300, Duration: 16 * time.Second, TTL: time.Second,
		Seed: 7, Faults: []Kind{Pause, Hold, Kill}, StallProbability: 0.25, Unfenced: unfenced,
		Command: testCommand, Out: &out, Dir: os.Getenv("CHAOS_TEST_DIR"),
	})
	t.Logf("run:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report: verdict %s, %d jobs, %d lost, %d duplicates, %d refused, %d stale accepted, %d overlaps; violations %q",
		rep.Verdict, rep.Jobs, rep.Lost, rep.Duplicates, rep.StaleRefused, rep.StaleAccepted, rep.Overlaps, rep.Violations)
	if rep.Jobs < 300 || len(rep.FaultLog) != 3 {
		t.Fatalf("%d jobs, %d faults: the run did not happen as planned", rep.Jobs, len(rep.FaultLog))
	}
	return rep
}

// A short run under SIGSTOP, a held connection and kill -9: every job is
// applied exactly once and no stale commit lands.
func TestFencedRunKeepsTheInvariants(t *testing.T) {
	t.Parallel()
	fencedRun(t, "queue")
}

// The same for the Kafka workload: every record applied exactly once, in
// offset order, and every stored offset at its log end.
func TestKafkaFencedRunKeepsTheInvariants(t *testing.T) {
	t.Parallel()
	rep := fencedRun(t, "kafka")
	if rep.OffsetMismatches != 0 {
		t.Fatalf("%d stored offsets not at the log end", rep.OffsetMismatches)
	}
}

func fencedRun(t *testing.T, workload string) *Report {
	t.Helper()
	rep := tinyRun(t, workload, false)
	if rep.Verdict == VerdictFail || rep.Lost+rep.Duplicates+rep.StaleAccepted+rep.Overlaps+rep.OrderViolations > 0 {
		t.Fatalf("invariants violated: %q", rep.Violations)
	}
	// The queue workload's plain jobs have no ledger row: their fenced
	// completion is what is checked (see plain.go).
	if rep.Applied+rep.PlainCompleted != rep.Jobs || workload == "queue" && rep.PlainCompleted == 0 {
		t.Fatalf("%d of %d jobs applied, %d plain jobs completed", rep.Applied, rep.Jobs, rep.PlainCompleted)
	}
	if rep.Verdict == VerdictInconclusive {
		t.Log("inconclusive: no stale commit was refused in this short run")
	}
	return rep
}

// The negative control: the same faults with the effect applied outside the
// fence (as an at-least-once queue does) must be caught applying jobs twice.
func TestUnfencedControlShowsDuplicates(t *testing.T) {
	t.Parallel()
	unfencedRun(t, "queue")
}

// The Kafka control: the ledger rows commit on their own before the batch's
// fenced offset advance, as a consumer that writes to a database and then
// commits offsets does.
func TestKafkaUnfencedControlShowsDuplicates(t *testing.T) {
	t.Parallel()
	unfencedRun(t, "kafka")
}

func unfencedRun(t *testing.T, workload string) {
	t.Helper()
	rep := tinyRun(t, workload, true)
	if rep.Duplicates == 0 || rep.Verdict != VerdictFail {
		t.Fatalf("the unfenced control found no duplicates (verdict %s): the faults or the checker cannot catch a violation",
			rep.Verdict)
	}
}

// The batch workload: every item applied exactly once, the batch's
// progress exact at the end, each follow-up run once and after the last
// item, although the producer crashed halfway and submitted every item
// again.
func TestBatchFencedRunKeepsTheInvariants(t *testing.T) {
	t.Parallel()
	rep := fencedRun(t, "batch")
	if rep.FollowupsExpected != 2 || rep.FollowupsRun != 2 || rep.FollowupViolations+rep.ProgressViolations > 0 {
		t.Fatalf("follow-ups run %d of %d expected, %d follow-up and %d progress violations: %q",
			rep.FollowupsRun, rep.FollowupsExpected, rep.FollowupViolations, rep.ProgressViolations, rep.Violations)
	}
}

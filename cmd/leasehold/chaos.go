package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/chaos"
)

func newChaosCmd(opts *rootOptions) *cobra.Command {
	var (
		url, faults, jsonPath, dir, workload string
		cfg                                  chaos.Config
	)
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run a fleet of worker processes under injected faults and check that no job is lost or applied twice",
		Long: "chaos starts worker OS processes on loopback, each connected to PostgreSQL through its own\n" +
			"fault proxy, feeds them jobs whose transactional handler appends one row per job to a ledger,\n" +
			"and injects faults from a seeded schedule: SIGSTOP past the lease TTL, kill -9 and restart, a\n" +
			"held connection, latency, clock skew forwards and backwards, a PostgreSQL restart. Handlers\n" +
			"sometimes stall past the TTL ignoring their context, then commit. The checker then reports\n" +
			"jobs lost, jobs applied more than once, stale commits refused and accepted, overlapping\n" +
			"ownership windows and recovery times.\n\n" +
			"--workload kafka runs the same faults against the Kafka source instead: the orchestrator runs\n" +
			"an in-process Kafka (kfake) with a topic of --partitions partitions and produces --jobs records\n" +
			"to it; the workers consume it with kafka, appending one ledger row per record in each\n" +
			"batch's transaction, and the checker also requires every stored offset at its log end.\n\n" +
			"--workload kafka-out adds exactly-once output into Kafka: per input record, the handler also\n" +
			"appends one output record to the fenced outbox (outbox.Add), which each worker's kafka.Relay\n" +
			"publishes to an output topic through a transactional producer per partition. Workers also kill\n" +
			"themselves right after a relay's Kafka commit (started again at once), and stop themselves\n" +
			"just before a relay's commit, past the lease (resumed after 2 to 3 TTLs: Kafka must refuse the\n" +
			"stale commit). The checker reads the output read_committed and requires each input's output\n" +
			"exactly once, in input order per key.\n\n" +
			"--workload batch runs them against a queue batch: --jobs items with both follow-ups, submitted\n" +
			"by a producer that crashes halfway and submits every item again, then sealed. The checker also\n" +
			"requires the batch's progress exact and each follow-up run once, after the last item's effect.\n\n" +
			"Without --database-url or $DATABASE_URL it runs on a throwaway cluster (which it restarts\n" +
			"once per pg_restart fault); on an existing server it uses, and first drops, the schema\n" +
			"leasehold_chaos, and skips the pg_restart fault.\n\n" +
			"Exit status 0 only for a pass. A run in which no stale commit was refused is inconclusive\n" +
			"(exit status 1, verdict \"inconclusive\"): the faults never put the fence to the test.\n" +
			"See docs/reliability.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kinds, err := chaos.ParseKinds(faults)
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("chaos: find this program to start workers: %w", err)
			}
			cfg.DatabaseURL, cfg.Faults, cfg.Dir, cfg.Workload = databaseURL(url), kinds, dir, workload
			cfg.Out, cfg.Logger = cmd.ErrOrStderr(), opts.logger(cmd.ErrOrStderr())
			verbose := opts.verbose
			cfg.Command = func(args ...string) *exec.Cmd {
				a := append([]string{"chaos", "worker"}, args...)
				if verbose {
					a = append(a, "--verbose")
				}
				return exec.Command(exe, a...)
			}
			ctx, stop := stopSignals(cmd.Context())
			defer stop()
			rep, err := chaos.Run(ctx, cfg)
			if err != nil {
				return err
			}
			if jsonPath == "-" {
				printChaos(cmd.ErrOrStderr(), rep) // standard output carries the JSON
			} else {
				printChaos(cmd.OutOrStdout(), rep)
			}
			if jsonPath != "" {
				if err := writeChaosJSON(cmd.OutOrStdout(), jsonPath, rep); err != nil {
					return err
				}
			}
			switch rep.Verdict {
			case chaos.VerdictFail:
				return fmt.Errorf("chaos: invariants violated (%d lost, %d duplicates, %d stray, %d stale accepted, %d refused yet applied, %d overlaps, %d token, %d order, %d offsets, %d follow-up, %d progress%s)",
					rep.Lost, rep.Duplicates, rep.Stray, rep.StaleAccepted, rep.FencedApplied, rep.Overlaps, rep.TokenViolations, rep.OrderViolations, rep.OffsetMismatches,
					rep.FollowupViolations, rep.ProgressViolations, outputViolations(rep))
			case chaos.VerdictInconclusive:
				return errors.New("chaos: inconclusive: no stale commit was refused, so the faults never tested the fence; " +
					"run longer or with other seeds")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "database-url", "", "run against this PostgreSQL server (schema leasehold_chaos) instead of a throwaway cluster (default $DATABASE_URL)")
	f.DurationVar(&cfg.Duration, "duration", 90*time.Second, "length of the fault phase (jobs fed and faults injected)")
	f.Int64Var(&cfg.Seed, "seed", 1, "seed of the fault schedule and the handler stalls")
	f.IntVar(&cfg.Workers, "workers", 3, "worker processes")
	f.IntVar(&cfg.Partitions, "partitions", 16, "partitions of the group")
	f.IntVar(&cfg.Jobs, "jobs", 0, "jobs (records, batch items) fed evenly over the fault phase (default 30 per second of --duration)")
	f.DurationVar(&cfg.TTL, "ttl", 2*time.Second, "lease TTL; fault durations scale with it")
	f.DurationVar(&cfg.Drain, "drain", 60*time.Second, "how long to wait, after the fault phase, for every job to finish")
	f.Float64Var(&cfg.StallProbability, "stall", 0.05, "probability that a handler stalls past the TTL, ignoring its context, then commits")
	f.StringVar(&faults, "faults", "all", "comma-separated fault kinds: "+kindNames())
	f.StringVar(&workload, "workload", "queue", "workload: queue (jobs appending to a ledger), kafka (an in-process Kafka topic consumed into a ledger), "+
		"kafka-out (the same, each record's output published to a Kafka topic through the outbox and its relay) or batch (a queue batch's items and follow-ups)")
	f.StringVar(&jsonPath, "json", "", "write the report as JSON to this file (- for standard output)")
	f.StringVar(&dir, "dir", "", "keep the workers' histories and logs in this directory (default: a temporary one, kept only if the run does not pass)")
	f.BoolVar(&cfg.PgBouncer, "pgbouncer", false, "run the workers behind a PgBouncer in transaction pooling mode, started for the run (needs the pgbouncer package); they poll instead of LISTENing")
	f.BoolVar(&cfg.Unfenced, "unfenced", false, "control run: apply effects outside the fence, as an at-least-once queue does; must show duplicates")
	_ = f.MarkHidden("unfenced")
	cmd.AddCommand(newChaosWorkerCmd(opts))
	return cmd
}

func kindNames() string {
	s := make([]string, len(chaos.Kinds))
	for i, k := range chaos.Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}

func writeChaosJSON(w io.Writer, path string, rep *chaos.Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = w.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("chaos: write report: %w", err)
	}
	return nil
}

// checkRows are the rows of a report that show the checker's Result, for
// the jobs of the queue workload, the records of the Kafka workloads or the
// items of the batch workload.
func checkRows(r chaos.Result, workload string) [][2]string {
	rows := [][2]string{
		{unitOf(workload), fmt.Sprint(r.Jobs)},
		{"applied", fmt.Sprintf("%d (ledger rows by worker: %s)", r.Applied, byWorker(r.AppliedBy))},
		{"lost", fmt.Sprintf("%d (unfinished %d)", r.Lost, r.Unfinished)},
		{"applied more than once", fmt.Sprintf("%d (%d extra rows)", r.Duplicates, r.Extra)},
		{"applied, not completed", fmt.Sprint(r.Stray)},
		{"stale commits refused", fmt.Sprint(r.StaleRefused)},
		{"stale commits accepted", fmt.Sprintf("%d (refused, yet applied: %d)", r.StaleAccepted, r.FencedApplied)},
		{"overlapping ownership", fmt.Sprint(r.Overlaps)},
		{"token / order violations", fmt.Sprintf("%d / %d", r.TokenViolations, r.OrderViolations)},
		{"grants / commit attempts", fmt.Sprintf("%d / %d", r.Grants, r.Commits)},
	}
	switch workload {
	case "queue":
		rows = append(rows,
			[2]string{"plain jobs completed (handler runs)", fmt.Sprintf("%d (%d)", r.PlainCompleted, r.PlainRuns)},
			[2]string{"plain completions stale / expired / unrun", fmt.Sprintf("%d / %d / %d", r.PlainStale, r.PlainExpired, r.PlainUnrun)},
			[2]string{"plain outcomes misreported", fmt.Sprint(r.PlainMisreported)})
	case "kafka":
		rows = append(rows, [2]string{"stored offsets not at log end", fmt.Sprint(r.OffsetMismatches)})
	case "kafka-out":
		rows = append(rows,
			[2]string{"stored offsets not at log end", fmt.Sprint(r.OffsetMismatches)},
			[2]string{"outputs (read_committed)", fmt.Sprintf("%d (read_uncommitted: %d)", r.Outputs, r.OutputsUncommitted)},
			[2]string{"outputs duplicated", fmt.Sprintf("%d (%d extra records)", r.OutputDuplicates, r.OutputExtra)},
			[2]string{"outputs missing / reordered", fmt.Sprintf("%d / %d (foreign: %d)", r.OutputMissing, r.OutputReordered, r.OutputForeign)},
			[2]string{"relay transactions", fmt.Sprintf("%d (failed %d)", r.RelayTransactions, r.RelayFailed)},
			[2]string{"stale relays refused by Kafka", fmt.Sprintf("%d (%d requests: %s; counted by the relays: %d)",
				r.RelayRefused, r.RelayRefusedRequests, byWorker(r.RelayRefusedBy), r.RelayFenced)},
			[2]string{"relays killed / paused", fmt.Sprintf("%d / %d", r.RelayKills, r.RelayPauses)})
	case "batch":
		rows = append(rows,
			[2]string{"follow-ups run / expected", fmt.Sprintf("%d / %d (%d violations)", r.FollowupsRun, r.FollowupsExpected, r.FollowupViolations)},
			[2]string{"batch progress violations", fmt.Sprint(r.ProgressViolations)})
	}
	return rows
}

// byWorker lists counts by worker (or by name), in the workers' order;
// "none" if there are none.
func byWorker(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	names := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, m[n])
	}
	return strings.Join(parts, ", ")
}

// outputViolations lists a kafka-out run's output violations for the error
// message ("" for the other workloads).
func outputViolations(r *chaos.Report) string {
	if r.Workload != "kafka-out" {
		return ""
	}
	return fmt.Sprintf(", %d outputs duplicated, %d missing, %d reordered, %d foreign",
		r.OutputDuplicates, r.OutputMissing, r.OutputReordered, r.OutputForeign)
}

// unitOf names the items of a workload.
func unitOf(workload string) string {
	switch workload {
	case "kafka", "kafka-out":
		return "records"
	case "batch":
		return "items"
	}
	return "jobs"
}

// printChaos prints the report for a person.
func printChaos(w io.Writer, r *chaos.Report) {
	mode := "fenced"
	if r.Unfenced {
		mode = "UNFENCED control"
	}
	if r.PgBouncer {
		mode += ", behind PgBouncer (transaction mode)"
	}
	fmt.Fprintf(w, "leasehold chaos: %s (%s workload, %s, seed %d, %d workers, %d partitions, TTL %dms, %.0fs of faults)\n\n",
		strings.ToUpper(r.Verdict), r.Workload, mode, r.Seed, r.Workers, r.Partitions, r.TTLMS, r.DurationS)
	rows := append(checkRows(r.Result, r.Workload),
		[2]string{"recovery p50 / p99 / max", fmt.Sprintf("%d / %d / %d ms (%d unrecovered)", r.RecoveryP50MS, r.RecoveryP99MS, r.RecoveryMaxMS, r.Unrecovered)},
		[2]string{"throughput", fmt.Sprintf("%.0f %s/s during faults", r.ThroughputPerS, unitOf(r.Workload))})
	for _, row := range rows {
		fmt.Fprintf(w, "  %-30s %s\n", row[0], row[1])
	}
	fmt.Fprintf(w, "\n  %-14s %8s %8s %8s %8s %8s\n", "fault", "injected", "skipped", "p50 ms", "p99 ms", "max ms")
	kinds := make([]string, 0, len(r.Faults))
	for k := range r.Faults {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		s := r.Faults[chaos.Kind(k)]
		fmt.Fprintf(w, "  %-14s %8d %8d %8d %8d %8d\n", k, s.Injected, s.Skipped, s.RecoveryP50MS, s.RecoveryP99MS, s.RecoveryMaxMS)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "  violation: %s\n", v)
	}
	if r.Dir != "" {
		fmt.Fprintf(w, "\n  histories and worker logs kept in %s\n", r.Dir)
	}
}

package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/queue"
)

func newJobsCmd() *cobra.Command {
	db := &dbFlags{}
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "Inspect, list, retry and cancel jobs",
		Long: "jobs inspects and lists jobs, lists the keys whose jobs wait behind a limit (limited), puts\n" +
			"discarded or cancelled jobs back to pending (retry) and cancels pending jobs.",
	}
	db.add(cmd, true)
	cmd.AddCommand(newJobsShowCmd(db), newJobsListCmd(db), newJobsLimitedCmd(db), newJobsRetryCmd(db), newJobsCancelCmd(db))
	return cmd
}

func newJobsShowCmd(db *dbFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID...",
		Short: "Show jobs: state, attempts, errors, args, run-at time, finishing token",
		Args:  minArgs(1, "job id (leasehold jobs list lists them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := admin.ParseIDs(args)
			if err != nil {
				return err
			}
			h, ctx, done, err := db.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer done()
			views, err := admin.ShowJobs(ctx, h, ids)
			var missing *admin.MissingError
			if err != nil && !errors.As(err, &missing) {
				return admin.Explain(ctx, err)
			}
			w := cmd.OutOrStdout()
			if db.json {
				if perr := printJSON(w, views); perr != nil {
					return perr
				}
			} else {
				for i, v := range views {
					if i > 0 {
						fmt.Fprintln(w)
					}
					printJob(w, v)
				}
			}
			return err
		},
	}
}

// printJob writes the job for people.
func printJob(w io.Writer, v admin.JobView) {
	t := newTable(w)
	t.row("job", v.ID)
	t.row("group", v.Group)
	t.row("partition", v.Partition)
	t.row("key", fmt.Sprintf("%q", v.Key))
	ordering := v.Ordering
	if v.Key == "" {
		ordering += " (ignored: no key)"
	}
	t.row("ordering", ordering)
	t.row("kind", v.Kind)
	t.row("state", v.State)
	if r := v.Running; r != nil {
		t.row("running", fmt.Sprintf("on worker %s since %s (token %d)", r.Worker, r.Since.Format(time.RFC3339Nano), r.Token))
	}
	if v.WaitingBehind != 0 {
		t.row("waits behind", fmt.Sprintf("job %d (key %q)", v.WaitingBehind, v.Key))
	}
	attempts := fmt.Sprintf("%d of %d", v.Attempt, v.MaxAttempts)
	if v.DefaultMaxAttempts {
		attempts += " (default; a kind's policy may override)"
	}
	t.row("attempts", attempts)
	t.row("priority", v.Priority)
	t.row("run at", v.RunAt.Format(time.RFC3339Nano))
	t.row("created at", v.CreatedAt.Format(time.RFC3339Nano))
	if v.FinishedAt != nil {
		by := "by an operator (no token)"
		if v.FinishedToken != nil {
			by = fmt.Sprint("by the grant with token ", *v.FinishedToken)
		}
		t.row("finished at", v.FinishedAt.Format(time.RFC3339Nano)+", "+by)
	}
	t.row("unique key", orDash(v.UniqueKey))
	t.row("args", string(v.Args))
	if len(v.Errors) == 0 {
		t.row("errors", "none")
		t.flush()
		return
	}
	t.flush()
	fmt.Fprintln(w, "errors")
	for _, e := range v.Errors {
		msg := strings.ReplaceAll(strings.TrimRight(e.Error, "\n"), "\n", "\n      ")
		fmt.Fprintf(w, "  attempt %d at %s:\n      %s\n", e.Attempt, e.At.Format(time.RFC3339Nano), msg)
	}
}

func newJobsListCmd(db *dbFlags) *cobra.Command {
	var f queue.Filter
	var state string
	cmd := &cobra.Command{
		Use:   "list --group G",
		Short: "List the jobs of a group, newest first",
		Long: "list lists the jobs of a group, newest first, filtered by state, kind, key and partitions, at most\n" +
			"--limit (default 50, at most 10000); --before ID gives the next page. --state running lists the\n" +
			"jobs running now, with their worker and start.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.Group == "" {
				return fmt.Errorf("%w: --group is required", admin.ErrBadInput)
			}
			f.State = queue.JobState(state)
			if f.Limit < 1 || f.Limit > queue.MaxListLimit {
				return usageErr(cmd, fmt.Sprintf("--limit %d is not in 1..%d", f.Limit, queue.MaxListLimit))
			}
			h, ctx, done, err := db.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer done()
			jobs, err := admin.ListJobs(ctx, h, f)
			if err != nil {
				return admin.Explain(ctx, err)
			}
			w := cmd.OutOrStdout()
			if db.json {
				return printJSON(w, jobs)
			}
			if len(jobs) == 0 {
				fmt.Fprintln(w, "no jobs")
				return nil
			}
			if f.State == queue.StateRunning {
				return printRunning(w, jobs, f.Limit)
			}
			t := newTable(w, "ID", "PARTITION", "KEY", "KIND", "STATE", "PRI", "ATTEMPTS", "RUN AT", "FINISHED AT")
			for _, j := range jobs {
				fin := "-"
				if j.FinishedAt != nil {
					fin = j.FinishedAt.Format(time.RFC3339)
				}
				t.row(j.ID, j.Partition, fmt.Sprintf("%q", j.Key), j.Kind, j.State, j.Priority,
					attempts(j.Attempt, j), j.RunAt.Format(time.RFC3339), fin)
			}
			if err := t.flush(); err != nil {
				return err
			}
			defaultNote(w, jobs)
			if limit := orDefault(f.Limit, 50); len(jobs) == limit {
				fmt.Fprintf(w, "(%d jobs, the limit: --before %d lists the next ones)\n", limit, jobs[len(jobs)-1].ID)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.Group, "group", "", "the jobs' group (required)")
	fs.StringVar(&state, "state", "", "only jobs in this state: pending, completed, discarded or cancelled; or running (pending jobs\n"+
		"their partitions' owners publish as running, about once a second)")
	fs.StringVar(&f.Kind, "kind", "", "only jobs of this kind")
	fs.StringVar(&f.Key, "key", "", "only jobs of this key")
	fs.IntSliceVar(&f.Partitions, "partition", nil, "only jobs of these partitions (repeatable, or comma-separated)")
	fs.Int64Var(&f.Before, "before", 0, "only jobs with an id below this one (the next page)")
	fs.IntVar(&f.Limit, "limit", 50, fmt.Sprintf("the most jobs listed (1 to %d)", queue.MaxListLimit))
	return cmd
}

func newJobsLimitedCmd(db *dbFlags) *cobra.Command {
	var group string
	var limit int
	cmd := &cobra.Command{
		Use:   "limited --group G",
		Short: "List the keys whose jobs wait behind a limit, busiest first",
		Long: "limited lists the keys of a group whose due jobs wait behind a limit (key_concurrency, key_rate,\n" +
			"group_concurrency), as the partitions' owners published them (about once a second): the key, the\n" +
			"kind of its next job, the limit, how many jobs wait, the partition and its owner, busiest first,\n" +
			"at most --limit (default 50, at most 10000), after the jobs held back per limit.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if group == "" {
				return fmt.Errorf("%w: --group is required", admin.ErrBadInput)
			}
			if limit < 1 || limit > queue.MaxListLimit {
				return usageErr(cmd, fmt.Sprintf("--limit %d is not in 1..%d", limit, queue.MaxListLimit))
			}
			h, ctx, done, err := db.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer done()
			l, err := admin.ReadLimits(ctx, h, group, limit)
			if err != nil {
				return admin.Explain(ctx, err)
			}
			w := cmd.OutOrStdout()
			if db.json {
				return printJSON(w, l)
			}
			if l.Total() == 0 {
				fmt.Fprintln(w, "no job is held back by a limit")
				return nil
			}
			return printLimits(w, l, false, "a larger --limit")
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&group, "group", "", "the group (required)")
	fs.IntVar(&limit, "limit", 50, fmt.Sprintf("the most keys listed (1 to %d)", queue.MaxListLimit))
	return cmd
}

// printRunning writes the running jobs of `jobs list --state running`.
func printRunning(w io.Writer, jobs []admin.JobView, limit int) error {
	t := newTable(w, "ID", "PARTITION", "KEY", "KIND", "WORKER", "SINCE", "ATTEMPT")
	for _, j := range jobs {
		worker, since := "-", "-"
		if r := j.Running; r != nil {
			worker, since = r.Worker, r.Since.Format(time.RFC3339)
		}
		t.row(j.ID, j.Partition, fmt.Sprintf("%q", j.Key), j.Kind, worker, since, attempts(j.Attempt+1, j))
	}
	if err := t.flush(); err != nil {
		return err
	}
	defaultNote(w, jobs)
	if limit = orDefault(limit, 50); len(jobs) == limit {
		fmt.Fprintf(w, "(%d jobs, the limit: --before %d lists the next ones)\n", limit, jobs[len(jobs)-1].ID)
	}
	return nil
}

// orDefault returns v, or def when v is 0.
func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// attempts renders attempt n of job j's limit, "3/25", marked "3/25*" when
// the limit is the client's default, which a kind's policy may replace
// (the CLI does not know the workers' policies).
func attempts(n int, j admin.JobView) string {
	s := fmt.Sprintf("%d/%d", n, j.MaxAttempts)
	if j.DefaultMaxAttempts {
		s += "*"
	}
	return s
}

// defaultNote explains the mark of attempts, if a job has it.
func defaultNote(w io.Writer, jobs []admin.JobView) {
	for _, j := range jobs {
		if j.DefaultMaxAttempts {
			fmt.Fprintln(w, "(*: the default attempt limit; a kind's policy may override it)")
			return
		}
	}
}

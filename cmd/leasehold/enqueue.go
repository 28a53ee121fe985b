package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/admin"
)

func newEnqueueCmd() *cobra.Command {
	var db dbFlags
	var jf admin.JobFlags
	var stdin bool
	cmd := &cobra.Command{
		Use:   "enqueue [-]",
		Short: "Enqueue jobs given by flags, or as JSON lines on standard input",
		Long: "enqueue enqueues one job described by flags, or, with - or --stdin, one job per line of standard\n" +
			"input, each a JSON object:\n\n" +
			`  {"group":"emails","kind":"welcome","key":"user-42","ordering":"strict","args":{"user_id":42},` + "\n" +
			`   "run_at":"2026-12-01T09:00:00Z","delay":"5m","max_attempts":5,"unique_key":"welcome:42"}` + "\n\n" +
			"Only kind is required (and group, unless --group gives it). All lines are read and checked first;\n" +
			"a malformed line (bad JSON, an unknown field, no kind, a bad ordering, an unknown group) fails the\n" +
			"command, naming the line, and nothing is enqueued. The jobs are then enqueued in one transaction,\n" +
			"in statements of 1000: all of them or, on any error, none. Delays count on the database clock.\n\n" +
			"ordering (strict by default) says what a keyed job does to the later jobs of its key while it waits\n" +
			"for a retry, a snooze or its run-at time: strict keeps them waiting behind it, non-blocking lets them\n" +
			"run meanwhile. It is ignored for a job without a key, which waits for no job.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, pos []string) error {
			if len(pos) == 1 {
				if pos[0] != "-" {
					return fmt.Errorf("unexpected argument %q (use - or --stdin to read jobs from standard input)", pos[0])
				}
				stdin = true
			}
			var jobs []admin.InputJob
			if stdin {
				for _, f := range []string{"kind", "key", "ordering", "args", "run-at", "delay", "max-attempts", "unique-key", "priority"} {
					if cmd.Flags().Changed(f) {
						return fmt.Errorf("--%s with --stdin: give it on each line (only --group is a default for the lines)", f)
					}
				}
				var err error
				if jobs, err = admin.ReadJobs(cmd.InOrStdin(), jf.Group); err != nil {
					return err
				}
			} else {
				jf.DelaySet = cmd.Flags().Changed("delay")
				j, err := jf.Job()
				if err != nil {
					return err
				}
				jobs = []admin.InputJob{j}
			}
			h, ctx, done, err := db.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer done()
			res, err := admin.Enqueue(ctx, h, jobs)
			if err != nil {
				return admin.Explain(ctx, err)
			}
			return printEnqueued(cmd.OutOrStdout(), res, db.json)
		},
	}
	db.add(cmd, false)
	f := cmd.Flags()
	f.StringVar(&jf.Group, "group", "", "the job's group (with --stdin: of lines that name none)")
	f.StringVar(&jf.Kind, "kind", "", "the job's kind (its handler's)")
	f.StringVar(&jf.Key, "key", "", "the job's key: decides its partition and order (default none: no order)")
	f.StringVar(&jf.Ordering, "ordering", "strict", "while the job waits, its key's later jobs wait behind it (strict) or run (non-blocking)")
	f.StringVar(&jf.Args, "args", "{}", "the job's arguments, JSON")
	f.StringVar(&jf.RunAt, "run-at", "", "when the job is due, RFC 3339 (default now)")
	f.DurationVar(&jf.Delay, "delay", 0, "make the job due this long from now (database clock)")
	f.IntVar(&jf.MaxAttempts, "max-attempts", 0, "how many times the job may run (default the queue's, 25)")
	f.IntVar(&jf.Priority, "priority", 0, "1 (first) to 4: the order of its partition's due jobs (default 1)")
	f.StringVar(&jf.UniqueKey, "unique-key", "", "enqueue nothing while a pending job of the group has this key")
	f.BoolVar(&stdin, "stdin", false, "read jobs from standard input, one JSON object per line")
	return cmd
}

func printEnqueued(w io.Writer, res []admin.EnqueueResult, asJSON bool) error {
	if asJSON {
		if res == nil {
			res = []admin.EnqueueResult{}
		}
		return printJSON(w, res)
	}
	if len(res) == 0 {
		fmt.Fprintln(w, "no jobs in the input")
		return nil
	}
	t := newTable(w, "LINE", "ID", "GROUP", "PARTITION", "DUPLICATE")
	for _, r := range res {
		line, id, dup := "-", fmt.Sprint(r.ID), "no"
		if r.Line > 0 {
			line = fmt.Sprint(r.Line)
		}
		if r.Duplicate {
			id, dup = "-", "yes"
		}
		t.row(line, id, r.Group, r.Partition, dup)
	}
	return t.flush()
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// enqueueBatch is how many jobs one statement of `enqueue --stdin` inserts.
const enqueueBatch = 1000

// enqueueResult is one job of `leasehold enqueue --json`'s output.
type enqueueResult struct {
	Line      int    `json:"line,omitempty"` // the input line; absent for a job given by flags
	Group     string `json:"group"`
	ID        int64  `json:"id"` // 0 for a duplicate
	Partition int    `json:"partition"`
	Duplicate bool   `json:"duplicate"` // a pending job of the group has the unique key: nothing enqueued
}

func newEnqueueCmd() *cobra.Command {
	var db dbFlags
	var group, kind, key, ordering, args, runAt, uniqueKey string
	var delay time.Duration
	var maxAttempts int
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
			var jobs []inputJob
			if stdin {
				for _, f := range []string{"kind", "key", "ordering", "args", "run-at", "delay", "max-attempts", "unique-key"} {
					if cmd.Flags().Changed(f) {
						return fmt.Errorf("--%s with --stdin: give it on each line (only --group is a default for the lines)", f)
					}
				}
				var err error
				if jobs, err = readJobs(cmd.InOrStdin(), group); err != nil {
					return err
				}
			} else {
				j, err := flagJob(cmd, group, kind, key, ordering, args, runAt, delay, maxAttempts, uniqueKey)
				if err != nil {
					return err
				}
				jobs = []inputJob{j}
			}
			h, ctx, done, err := db.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			res, err := enqueue(ctx, h, jobs)
			if err != nil {
				return dbErr(ctx, err)
			}
			return printEnqueued(cmd.OutOrStdout(), res, db.json)
		},
	}
	db.add(cmd, false)
	f := cmd.Flags()
	f.StringVar(&group, "group", "", "the job's group (with --stdin: of lines that name none)")
	f.StringVar(&kind, "kind", "", "the job's kind (its handler's)")
	f.StringVar(&key, "key", "", "the job's key: decides its partition and order (default none: no order)")
	f.StringVar(&ordering, "ordering", "strict", "while the job waits, its key's later jobs wait behind it (strict) or run (non-blocking)")
	f.StringVar(&args, "args", "{}", "the job's arguments, JSON")
	f.StringVar(&runAt, "run-at", "", "when the job is due, RFC 3339 (default now)")
	f.DurationVar(&delay, "delay", 0, "make the job due this long from now (database clock)")
	f.IntVar(&maxAttempts, "max-attempts", 0, "how many times the job may run (default the queue's, 25)")
	f.StringVar(&uniqueKey, "unique-key", "", "enqueue nothing while a pending job of the group has this key")
	f.BoolVar(&stdin, "stdin", false, "read jobs from standard input, one JSON object per line")
	return cmd
}

// flagJob is the job described by enqueue's flags.
func flagJob(cmd *cobra.Command, group, kind, key, ordering, args, runAt string, delay time.Duration,
	maxAttempts int, uniqueKey string) (inputJob, error) {
	bad := func(err error) error { return fmt.Errorf("%w: %v", errBadInput, err) }
	if group == "" || kind == "" {
		return inputJob{}, bad(errors.New("--group and --kind are required (or - / --stdin to read jobs from standard input)"))
	}
	var at time.Time
	if runAt != "" {
		var err error
		if at, err = time.Parse(time.RFC3339Nano, runAt); err != nil {
			return inputJob{}, bad(fmt.Errorf("--run-at %q is not an RFC 3339 time (e.g. 2026-12-01T09:00:00Z)", runAt))
		}
	}
	if cmd.Flags().Changed("delay") && runAt != "" {
		return inputJob{}, bad(errors.New("--run-at and --delay exclude each other"))
	}
	if delay < 0 {
		return inputJob{}, bad(fmt.Errorf("--delay %v is negative", delay))
	}
	if maxAttempts < 0 {
		return inputJob{}, bad(fmt.Errorf("--max-attempts %d is negative", maxAttempts))
	}
	ord, err := orderingOf("--ordering", ordering)
	if err != nil {
		return inputJob{}, bad(err)
	}
	j, err := jobOf(group, kind, key, ord, json.RawMessage(args), at, "", maxAttempts, uniqueKey)
	if err != nil {
		return inputJob{}, bad(err)
	}
	j.delay = delay
	return j, nil
}

// enqueue enqueues jobs in one transaction, in statements of enqueueBatch.
func enqueue(ctx context.Context, h *leasehold.DB, jobs []inputJob) ([]enqueueResult, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	pool := h.Pool()
	known, err := partition.Groups(ctx, h)
	if err != nil {
		return nil, err
	}
	delayed := false
	for _, j := range jobs {
		if !slices.Contains(known, j.job.Group) {
			return nil, inputErr(j.line, fmt.Errorf("%w: %q (a worker creates its group when it starts)", queue.ErrUnknownGroup, j.job.Group))
		}
		delayed = delayed || j.delay > 0
	}
	if delayed {
		now, err := dbNow(ctx, pool)
		if err != nil {
			return nil, err
		}
		for i := range jobs {
			if jobs[i].delay > 0 {
				jobs[i].job.RunAt = now.Add(jobs[i].delay)
			}
		}
	}
	q, err := queue.New(h, queue.Config{})
	if err != nil {
		return nil, err
	}
	out := make([]enqueueResult, 0, len(jobs))
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for start := 0; start < len(jobs); start += enqueueBatch {
			batch := jobs[start:min(start+enqueueBatch, len(jobs))]
			qj := make([]queue.Job, len(batch))
			for i, j := range batch {
				qj[i] = j.job
			}
			res, err := q.EnqueueTx(ctx, tx, qj...)
			var je *queue.JobError
			if errors.As(err, &je) && je.Index >= 0 && je.Index < len(batch) {
				return jobErr(batch[je.Index].line, je)
			}
			if err != nil {
				return err
			}
			for i, r := range res {
				out = append(out, enqueueResult{Line: batch[i].line, Group: batch[i].job.Group,
					ID: r.ID, Partition: r.Partition, Duplicate: r.Duplicate})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// jobErr reports a job the queue refused, by its input line.
func jobErr(line int, je *queue.JobError) error {
	reason := strings.ToLower(je.Field) + ": " + je.Reason
	if je.Err != nil {
		reason += ": " + je.Err.Error()
	}
	return &lineError{Line: line, Reason: reason, Err: je}
}

// inputErr names the input line of a job that cannot be enqueued.
func inputErr(line int, err error) error {
	if line == 0 {
		return fmt.Errorf("%w (nothing was enqueued)", err)
	}
	return fmt.Errorf("line %d: %w (nothing was enqueued)", line, err)
}

func printEnqueued(w io.Writer, res []enqueueResult, asJSON bool) error {
	if asJSON {
		if res == nil {
			res = []enqueueResult{}
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

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/queue"
)

// errNotChanged is returned by `jobs retry` and `jobs cancel` when some of
// the jobs named were left alone; the output says which and why.
var errNotChanged = errors.New("some jobs were left alone")

// changeResult is one job of `jobs retry --json` or `jobs cancel --json`.
type changeResult struct {
	ID      int64 `json:"id"`
	Changed bool  `json:"changed"`
	// State is the job's state as read after the change; "" if not found.
	State string `json:"state"`
	// Reason says why the job was left alone.
	Reason string `json:"reason,omitempty"`
}

func newJobsRetryCmd(db *dbFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "retry ID...",
		Short: "Put discarded or cancelled jobs back to pending, due now, attempts reset",
		Long: "retry puts discarded or cancelled jobs back to pending, due now, with their attempts reset and\n" +
			"their recorded errors kept. It says which jobs it left alone and why, and then exits with status 1.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeJobs(cmd, db, args, "retried", (*queue.Client).Retry, func(j queue.JobInfo) string {
				switch j.State {
				case "pending":
					return "pending: nothing to retry"
				case "completed":
					return "completed: nothing to retry"
				}
				if j.UniqueKey != "" {
					return fmt.Sprintf("a pending job of the group has its unique key %q", j.UniqueKey)
				}
				return "changed by someone else meanwhile"
			})
		},
	}
}

func newJobsCancelCmd(db *dbFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID...",
		Short: "Cancel pending jobs",
		Long: "cancel finishes pending jobs as cancelled, recording \"cancelled by an operator\". A job running when\n" +
			"it is cancelled stays cancelled: a transactional handler's effects roll back, a plain handler's\n" +
			"external effects may have happened. It says which jobs it left alone and why, and then exits with\n" +
			"status 1.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeJobs(cmd, db, args, "cancelled", (*queue.Client).Cancel, func(j queue.JobInfo) string {
				if j.State != "pending" {
					return "already " + j.State
				}
				return "changed by someone else meanwhile"
			})
		},
	}
}

// changeJobs runs change on the jobs named by args, then reads the jobs it
// left alone to say why.
func changeJobs(cmd *cobra.Command, db *dbFlags, args []string, verb string,
	change func(*queue.Client, context.Context, ...int64) ([]int64, error), why func(queue.JobInfo) string) error {
	ids, err := parseIDs(args)
	if err != nil {
		return err
	}
	q, ctx, done, err := db.queue(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	changed, err := change(q, ctx, ids...)
	if err != nil {
		return dbErr(ctx, err)
	}
	res := make([]changeResult, len(ids))
	left := 0
	for i, id := range ids {
		r := changeResult{ID: id, Changed: slices.Contains(changed, id)}
		j, err := q.JobInfo(ctx, id)
		switch {
		case errors.Is(err, queue.ErrNotFound):
			r.Reason = "not found (never enqueued, or deleted by retention)"
		case err != nil:
			return dbErr(ctx, fmt.Errorf("%s %v; reading the jobs back: %w", verb, changed, err))
		default:
			r.State = j.State
			if !r.Changed {
				r.Reason = why(j)
			}
		}
		if !r.Changed {
			left++
		}
		res[i] = r
	}
	if err := printChanges(cmd.OutOrStdout(), res, verb, db.json); err != nil {
		return err
	}
	if left > 0 {
		return fmt.Errorf("%w: %d of %d not %s", errNotChanged, left, len(ids), verb)
	}
	return nil
}

func printChanges(w io.Writer, res []changeResult, verb string, asJSON bool) error {
	if asJSON {
		return printJSON(w, res)
	}
	t := newTable(w, "ID", "RESULT", "STATE", "REASON")
	for _, r := range res {
		result := verb
		if !r.Changed {
			result = "not " + verb
		}
		t.row(r.ID, result, orDash(r.State), orDash(r.Reason))
	}
	return t.flush()
}

package main

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/admin"
)

func newJobsRetryCmd(db *dbFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "retry ID...",
		Short: "Put discarded or cancelled jobs back to pending, due now, attempts reset",
		Long: "retry puts discarded or cancelled jobs back to pending, due now, with their attempts reset and\n" +
			"their recorded errors kept. It says which jobs it left alone and why, and then exits with status 1.",
		Args: minArgs(1, "job id (leasehold jobs list lists them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeJobs(cmd, db, args, "retried", admin.RetryJobs)
		},
	}
}

func newJobsCancelCmd(db *dbFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID...",
		Short: "Cancel pending jobs, running ones included",
		Long: "cancel finishes pending jobs as cancelled, recording \"cancelled by an operator\". A job running when\n" +
			"it is cancelled stays cancelled: its owner cancels the handler's context (cause\n" +
			"queue.ErrJobCancelled) within about a second, a transactional handler's effects roll back, a plain\n" +
			"handler's external effects done before it stopped have happened. It says which jobs it left alone\n" +
			"and why, and then exits with status 1.",
		Args: minArgs(1, "job id (leasehold jobs list lists them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeJobs(cmd, db, args, "cancelled", admin.CancelJobs)
		},
	}
}

// changeJobs runs change (admin.RetryJobs or admin.CancelJobs) on the jobs
// named by args and prints its results; verb says what it does to a job.
func changeJobs(cmd *cobra.Command, db *dbFlags, args []string, verb string,
	change func(context.Context, *leasehold.DB, []int64) ([]admin.ChangeResult, error)) error {
	ids, err := admin.ParseIDs(args)
	if err != nil {
		return err
	}
	h, ctx, done, err := db.connect(cmd.Context(), nil)
	if err != nil {
		return err
	}
	defer done()
	res, err := change(ctx, h, ids)
	if err != nil && !errors.Is(err, admin.ErrNotChanged) {
		return admin.Explain(ctx, err)
	}
	if perr := printChanges(cmd.OutOrStdout(), res, verb, db.json); perr != nil {
		return perr
	}
	return err
}

func printChanges(w io.Writer, res []admin.ChangeResult, verb string, asJSON bool) error {
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

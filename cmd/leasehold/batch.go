package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/queue"
)

func newBatchCmd(opts *rootOptions) *cobra.Command {
	db := &dbFlags{opts: opts}
	cmd := &cobra.Command{
		Use:   "batch",
		Short: "Submit, follow, list, seal, cancel, retry and delete batches of jobs",
		Long: "batch submits a batch's items from JSON lines (creating it if needed), shows its progress, lists\n" +
			"the batches, and seals, cancels, retries and deletes one. A batch is named by its group and its name; the\n" +
			"group may be left out when one group only has a batch of that name.",
	}
	db.add(cmd, true)
	cmd.AddCommand(newBatchSubmitCmd(db), newBatchStatusCmd(db), newBatchListCmd(db),
		newBatchSealCmd(db), newBatchCancelCmd(db), newBatchRetryCmd(db), newBatchDeleteCmd(db))
	return cmd
}

// batchArgs accepts [GROUP] NAME.
func batchArgs(cmd *cobra.Command, args []string) error {
	switch len(args) {
	case 1, 2:
		return nil
	case 0:
		return usageErr(cmd, "no batch name given")
	}
	return usageErr(cmd, fmt.Sprintf("%d arguments given, want [GROUP] NAME", len(args)))
}

// groupName splits [GROUP] NAME: the group is "" when not given.
func groupName(args []string) (group, name string) {
	if len(args) == 1 {
		return "", args[0]
	}
	return args[0], args[1]
}

func newBatchSubmitCmd(db *dbFlags) *cobra.Command {
	var spec admin.SubmitSpec
	cmd := &cobra.Command{
		Use:   "submit GROUP NAME",
		Short: "Create a batch unless it exists, and add the items of standard input (JSON lines)",
		Long: "submit creates batch NAME of GROUP unless it exists with the same description and follow-ups,\n" +
			"then adds its items from standard input, one JSON object a line:\n\n" +
			`  {"item":"user-42","kind":"reprice","key":"","args":{"user_id":42},"max_attempts":0}` + "\n\n" +
			"item (the item's key, unique in the batch) and kind are required; key, args (default {}) and\n" +
			"max_attempts are optional; another field is an error. The items are added in chunks of --chunk, one\n" +
			"transaction each, as they are read: the first malformed line or refused item stops the command,\n" +
			"naming the line, and the chunks before it stay added. Running the same command again resumes: the\n" +
			"items the batch has already count as duplicates. --seal seals the batch after the last line. Every\n" +
			"kind, of items and follow-ups, must be handled by a worker of the group that has started.\n" +
			"--timeout bounds each step (creating, each chunk, sealing), not the whole command.",
		Args: exactArgs(2, "GROUP NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec.Group, spec.Name = args[0], args[1]
			if spec.Chunk < 0 || spec.Chunk > queue.MaxListLimit {
				return usageErr(cmd, fmt.Sprintf("--chunk %d is not in 1..%d", spec.Chunk, queue.MaxListLimit))
			}
			for _, f := range []string{"on-complete", "on-success"} {
				if cmd.Flags().Changed(f+"-args") && !cmd.Flags().Changed(f) {
					return usageErr(cmd, fmt.Sprintf("--%s-args without --%s KIND", f, f))
				}
			}
			h, _, done, err := db.connect(cmd.Context(), db.opts.logger(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			defer done()
			spec.StepTimeout = db.timeout
			if in, ok := cmd.InOrStdin().(*os.File); ok && isTerminal(in) {
				// Not redirected: say what the command waits for.
				fmt.Fprintln(cmd.ErrOrStderr(), "leasehold: reading the items from the terminal, one JSON object a line (Ctrl-D ends)")
			}
			res, err := admin.SubmitBatch(cmd.Context(), h, spec, cmd.InOrStdin())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if db.json {
				return printJSON(w, res)
			}
			sealed := "not sealed (`leasehold batch seal` seals it)"
			if res.Sealed {
				sealed = "sealed"
			}
			fmt.Fprintf(w, "batch %s of group %s (id %d): added %d, duplicates %d, %s; %d items in all, %s\n",
				res.Name, res.Group, res.ID, res.Added, res.Duplicates, sealed, res.Total, res.State)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.Description, "description", "", "the batch's description (fixed when it is created)")
	f.StringVar(&spec.OnComplete, "on-complete", "", "the kind of the job enqueued once every item is finished (default none)")
	f.StringVar(&spec.OnCompleteArgs, "on-complete-args", "", "its arguments, a JSON object (default {})")
	f.StringVar(&spec.OnSuccess, "on-success", "", "the kind of the job enqueued once every item is completed (default none)")
	f.StringVar(&spec.OnSuccessArgs, "on-success-args", "", "its arguments, a JSON object (default {})")
	f.BoolVar(&spec.Seal, "seal", false, "seal the batch after the last line: every item is added")
	f.IntVar(&spec.Chunk, "chunk", 0, fmt.Sprintf("items per transaction, 1 to %d (default the queue's, 1000)", queue.MaxListLimit))
	return cmd
}

func newBatchListCmd(db *dbFlags) *cobra.Command {
	var f queue.BatchFilter
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the batches, newest first, with their progress",
		Long: "list lists the batches (of --group, else of every group), newest first, at most --limit (default\n" +
			"50, at most 10000); --before ID gives the next page.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.Limit < 1 || f.Limit > queue.MaxListLimit {
				return usageErr(cmd, fmt.Sprintf("--limit %d is not in 1..%d", f.Limit, queue.MaxListLimit))
			}
			if f.Before < 0 {
				return usageErr(cmd, fmt.Sprintf("--before %d is negative", f.Before))
			}
			h, ctx, done, err := db.connect(cmd.Context(), db.opts.logger(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			defer done()
			bs, err := admin.ListBatches(ctx, h, f)
			if err != nil {
				return admin.Explain(ctx, err)
			}
			w := cmd.OutOrStdout()
			if db.json {
				return printJSON(w, bs)
			}
			return printBatches(w, bs, f.Limit)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.Group, "group", "", "only the batches of this group")
	fs.Int64Var(&f.Before, "before", 0, "only batches with an id below this one (the next page)")
	fs.IntVar(&f.Limit, "limit", 50, fmt.Sprintf("the most batches listed (1 to %d)", queue.MaxListLimit))
	return cmd
}

// printBatches writes the batches as a table.
func printBatches(w io.Writer, bs []admin.BatchView, limit int) error {
	if len(bs) == 0 {
		fmt.Fprintln(w, "no batches")
		return nil
	}
	t := newTable(w, "ID", "NAME", "GROUP", "STATE", "PROGRESS", "TOTAL", "PENDING", "FAILED", "CREATED")
	for _, b := range bs {
		t.row(b.ID, b.Name, b.Group, b.State, percent(b.Done(), b.Total), b.Total, b.Pending, b.Failed,
			b.CreatedAt.Format(time.RFC3339))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(bs) == limit {
		fmt.Fprintf(w, "(%d batches, the limit: --before %d lists the next ones)\n", limit, bs[len(bs)-1].ID)
	}
	return nil
}

func newBatchSealCmd(db *dbFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "seal [GROUP] NAME",
		Short: "Seal a batch: every item is added (for a submit run without --seal)",
		Long: "seal seals the batch: no item can be added any more, and it finishes once every item is\n" +
			"finished (at once if they are: its follow-ups are enqueued then). Sealing a sealed batch changes\n" +
			"nothing.",
		Args: batchArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			group, name := groupName(args)
			h, ctx, done, err := db.connect(cmd.Context(), db.opts.logger(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			defer done()
			v, err := admin.SealBatch(ctx, h, group, name)
			if err != nil {
				return admin.Explain(ctx, err)
			}
			w := cmd.OutOrStdout()
			if db.json {
				return printJSON(w, v)
			}
			fmt.Fprintf(w, "batch %s of group %s sealed: %d items, %d pending, %s\n", v.Name, v.Group, v.Total, v.Pending, v.State)
			return nil
		},
	}
}

func newBatchCancelCmd(db *dbFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel [GROUP] NAME",
		Short: "Cancel a batch: seal it and cancel its pending items",
		Long: "cancel seals the batch and cancels its pending items, a thousand per transaction; it finishes\n" +
			"then (items running count as cancelled): its on-complete follow-up still runs, once, its on-success\n" +
			"one never. An item running meanwhile is cancelled as `jobs cancel` cancels a running job: a plain\n" +
			"handler may still be running when the on-complete follow-up runs.",
		Args: batchArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeBatch(cmd, db, args, admin.CancelBatch)
		},
	}
}

func newBatchRetryCmd(db *dbFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "retry [GROUP] NAME",
		Short: "Put a batch's discarded items back to pending",
		Long: "retry puts the batch's discarded items back to pending, due now, their attempts reset and their\n" +
			"errors kept. Once every item is completed, the on-success follow-up is enqueued (the on-complete\n" +
			"one is not enqueued again). A cancelled batch is not retried.",
		Args: batchArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeBatch(cmd, db, args, admin.RetryBatch)
		},
	}
}

// changeBatch runs cancel or retry and prints what it did.
func changeBatch(cmd *cobra.Command, db *dbFlags, args []string,
	op func(ctx context.Context, h *leasehold.DB, group, name string) (admin.BatchChange, error)) error {
	group, name := groupName(args)
	h, ctx, done, err := db.connect(cmd.Context(), db.opts.logger(cmd.ErrOrStderr()))
	if err != nil {
		return err
	}
	defer done()
	c, err := op(ctx, h, group, name)
	if err != nil {
		return admin.Explain(ctx, err)
	}
	w := cmd.OutOrStdout()
	switch {
	case db.json:
		return printJSON(w, c)
	case c.Cancelled != nil:
		fmt.Fprintf(w, "batch %s of group %s cancelled: %d pending items cancelled\n", c.Name, c.Group, *c.Cancelled)
	default:
		fmt.Fprintf(w, "batch %s of group %s: %d discarded items back to pending\n", c.Name, c.Group, *c.Retried)
	}
	return nil
}

// batchDeleted is what `batch delete` prints with --json.
type batchDeleted struct {
	Group string `json:"group"`
	Name  string `json:"name"`
	Items int64  `json:"items_deleted"`
}

func newBatchDeleteCmd(db *dbFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete [GROUP] NAME",
		Short: "Delete a finished batch: its row, counters and items left",
		Long: "delete deletes a finished batch with no item pending: its items left (retention may have deleted\n" +
			"them), its row and its counters; its name can then be taken again. Its follow-up jobs are left to\n" +
			"retention. A batch not finished is refused (queue.ErrBatchNotFinished): cancel it first.",
		Args: batchArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			group, name := groupName(args)
			h, ctx, done, err := db.connect(cmd.Context(), db.opts.logger(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			defer done()
			group, err = admin.BatchGroup(ctx, h, group, name)
			if err != nil {
				return admin.Explain(ctx, err)
			}
			q, err := queue.New(h, queue.Config{})
			if err != nil {
				return err
			}
			n, err := q.DeleteBatch(ctx, group, name)
			if err != nil {
				return admin.Explain(ctx, err)
			}
			w := cmd.OutOrStdout()
			if db.json {
				return printJSON(w, batchDeleted{Group: group, Name: name, Items: n})
			}
			fmt.Fprintf(w, "batch %s of group %s deleted, with %d items\n", name, group, n)
			return nil
		},
	}
}

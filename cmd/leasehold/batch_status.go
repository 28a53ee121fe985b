package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/queue"
)

// barWidth is the progress bar's width in cells.
const barWidth = 40

// watchInterval is how often a live status reads the batch again.
const watchInterval = time.Second

func newBatchStatusCmd(db *dbFlags) *cobra.Command {
	var watch, once bool
	cmd := &cobra.Command{
		Use:   "status [GROUP] NAME",
		Short: "Show a batch's progress: state, counts, a progress bar, rate and ETA",
		Long: "status shows the batch's state, its items' counts (total, pending, completed, failed, cancelled),\n" +
			"whether it is sealed, a progress bar, its rate (items finished per second) and the time left at\n" +
			"that rate. When standard output is a terminal it is live: it reads the batch again every second,\n" +
			"the rate measured over the last ten reads, until the batch is sealed with every item finished (or\n" +
			"an interrupt); otherwise it prints once, the rate averaged since the batch was created. --watch\n" +
			"and --once force either. With --json it prints one object, or with --watch one a line per read.\n" +
			"Live, --timeout bounds each read.",
		Args: batchArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if watch && once {
				return usageErr(cmd, "--watch and --once exclude each other")
			}
			group, name := groupName(args)
			h, ctx, done, err := db.connect(cmd.Context(), db.opts.logger(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			defer done()
			if group, err = admin.BatchGroup(ctx, h, group, name); err != nil {
				return admin.Explain(ctx, err)
			}
			w := cmd.OutOrStdout()
			live := watch || !once && !db.json && isTerminal(w)
			read := func(ctx context.Context) (queue.BatchInfo, error) {
				b, err := admin.ReadBatch(ctx, h, group, name)
				return b, admin.Explain(ctx, err)
			}
			if !live {
				b, err := read(ctx)
				if err != nil {
					return err
				}
				v := admin.ViewOf(b, admin.AverageRate(b))
				if db.json {
					return printJSON(w, v)
				}
				_, err = io.WriteString(w, batchFrame(v))
				return err
			}
			timeout := db.timeout
			return watchBatch(cmd.Context(), w, func(ctx context.Context) (queue.BatchInfo, error) {
				ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("reading the batch took longer than %v (--timeout)", timeout))
				defer cancel()
				return read(ctx)
			}, db.json, isTerminal(w))
		},
	}
	cmd.Flags().BoolVar(&watch, "watch", false, "live, even when standard output is not a terminal")
	cmd.Flags().BoolVar(&once, "once", false, "print once, even on a terminal")
	return cmd
}

// watchBatch shows the batch read by read every watchInterval until it is
// over (sealed, every item finished) or ctx ends: on a terminal (term) it
// redraws the frame in place, otherwise it prints frame after frame; as
// JSON, an object a line.
func watchBatch(ctx context.Context, w io.Writer, read func(context.Context) (queue.BatchInfo, error), asJSON, term bool) error {
	var meter admin.RateMeter
	drawn := 0 // lines of the frame on screen
	for first := true; ; first = false {
		b, err := read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: the watch is over
			}
			return err
		}
		v := admin.ViewOf(b, meter.Add(b))
		switch {
		case asJSON:
			err = json.NewEncoder(w).Encode(v)
		case term:
			frame := batchFrame(v)
			if drawn > 0 {
				// Up to the previous frame's first line, and clear below.
				fmt.Fprintf(w, "\r\033[%dA\033[J", drawn)
			}
			drawn = strings.Count(frame, "\n")
			_, err = io.WriteString(w, frame)
		default:
			if !first {
				fmt.Fprintln(w)
			}
			_, err = io.WriteString(w, batchFrame(v))
		}
		if err != nil || v.Over() {
			return err
		}
		t := time.NewTimer(watchInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// batchFrame renders the batch for people.
func batchFrame(v admin.BatchView) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "batch %s of group %s (id %d): %s\n", v.Name, v.Group, v.ID, v.State)
	if v.Description != "" {
		fmt.Fprintf(&sb, "%s\n", v.Description)
	}
	fmt.Fprintf(&sb, "%s %4s  %d of %d items finished\n", progressBar(v.Done(), v.Total, barWidth),
		percent(v.Done(), v.Total), v.Done(), v.Total)
	t := newTable(&sb)
	t.row("pending", v.Pending)
	t.row("completed", v.Completed)
	t.row("failed", v.Failed)
	t.row("cancelled", v.Cancelled)
	sealed := "no: items may still be added (`leasehold batch seal` seals it)"
	if v.SealedAt != nil {
		sealed = "yes, " + v.SealedAt.Format(time.RFC3339)
	}
	t.row("sealed", sealed)
	t.row("created", v.CreatedAt.Format(time.RFC3339))
	if v.CancelledAt != nil {
		t.row("cancelled at", v.CancelledAt.Format(time.RFC3339))
	}
	t.row("finished", timeOrDash(v.FinishedAt))
	t.row("succeeded", timeOrDash(v.SucceededAt))
	t.row("rate", fmt.Sprintf("%.1f items/s", v.Rate))
	eta := "unknown (no item finished yet)"
	if v.ETASeconds != nil {
		eta = human(time.Duration(*v.ETASeconds * float64(time.Second)))
	}
	t.row("eta", eta)
	t.row("follow-ups", fmt.Sprintf("on complete: %s; on success: %s", jobOrDash(v.CompleteJob), jobOrDash(v.SuccessJob)))
	t.flush()
	return sb.String()
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func jobOrDash(id *int64) string {
	if id == nil {
		return "-"
	}
	return fmt.Sprint("job ", *id)
}

// progressBar draws done of total as width cells between brackets: '#'
// for the finished share, rounded down (full only when done == total), '.'
// for the rest. A total of 0 draws an empty bar; a width below 1, none.
func progressBar(done, total int64, width int) string {
	if width < 1 {
		return ""
	}
	fill := 0
	if total > 0 {
		done = min(max(done, 0), total)
		fill = int(done * int64(width) / total)
	}
	return "[" + strings.Repeat("#", fill) + strings.Repeat(".", width-fill) + "]"
}

// percent is done of total in whole percent, rounded down (100% only when
// done == total); "-" for a total of 0.
func percent(done, total int64) string {
	if total <= 0 {
		return "-"
	}
	return fmt.Sprintf("%d%%", min(max(done, 0), total)*100/total)
}

package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/admin"
)

func newPauseCmd() *cobra.Command {
	var db dbFlags
	var kind, reason string
	cmd := &cobra.Command{
		Use:   "pause GROUP",
		Short: "Pause a group, or one kind of its jobs",
		Long: "pause stops the group's owners starting its jobs (with --kind, the jobs of that kind) within about\n" +
			"a second. Running jobs finish. The pause is stored: it outlives every worker, until `leasehold resume`.\n" +
			"A keyed job waits behind a paused job of its key. Pausing what is paused already changes nothing.",
		Args: exactArgs(1, "group"),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, ctx, done, err := db.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer done()
			known, err := admin.Pause(ctx, h, args[0], kind, reason)
			if err != nil {
				return admin.Explain(ctx, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "paused %s\n", what(args[0], kind))
			if !known {
				// Paused all the same: the handler may not be deployed yet.
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: no worker of group %s has recorded a handler for kind %q "+
					"(a typo?); it is paused, and stays paused until `leasehold resume %s --kind %s`\n", args[0], kind, args[0], kind)
			}
			return nil
		},
	}
	db.add(cmd, false)
	cmd.Flags().StringVar(&kind, "kind", "", "pause only the jobs of this kind")
	cmd.Flags().StringVar(&reason, "reason", "", "why, shown by `leasehold status`")
	return cmd
}

func newResumeCmd() *cobra.Command {
	var db dbFlags
	var kind string
	cmd := &cobra.Command{
		Use:   "resume GROUP",
		Short: "Resume a paused group, or a paused kind",
		Long: "resume ends a pause made by `leasehold pause` with the same --kind: the owners start the jobs again\n" +
			"at once. Resuming the group leaves the kinds paused on their own paused. Resuming what is not paused\n" +
			"changes nothing.",
		Args: exactArgs(1, "group"),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, ctx, done, err := db.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer done()
			if err := admin.Resume(ctx, h, args[0], kind); err != nil {
				return admin.Explain(ctx, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "resumed %s\n", what(args[0], kind))
			return nil
		},
	}
	db.add(cmd, false)
	cmd.Flags().StringVar(&kind, "kind", "", "resume only the jobs of this kind")
	return cmd
}

func what(group, kind string) string {
	if kind == "" {
		return "group " + group
	}
	return fmt.Sprintf("kind %s of group %s", kind, group)
}

// printPauses writes a group's pauses, one line each, for status.
func printPauses(w io.Writer, ps []admin.PauseStatus) {
	for _, p := range ps {
		what := "PAUSED: the whole group"
		if p.Kind != "" {
			what = "PAUSED: kind " + p.Kind
		}
		fmt.Fprintf(w, "%s since %s by %s", what, p.At.Format(time.RFC3339), orDash(p.By))
		if p.Reason != "" {
			fmt.Fprintf(w, ": %s", p.Reason)
		}
		fmt.Fprintln(w)
	}
	if len(ps) > 0 {
		fmt.Fprintln(w)
	}
}

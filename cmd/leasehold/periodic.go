package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/admin"
)

func newPeriodicCmd() *cobra.Command {
	db := &dbFlags{}
	cmd := &cobra.Command{
		Use:   "periodic",
		Short: "Inspect periodic jobs (schedules declared by workers)",
		Long: "periodic lists the schedules that the workers of a group declare (worker.Config.Schedules):\n" +
			"their leader, last and next slots, and the slots missed while no leader ran.",
	}
	db.add(cmd, true)
	cmd.AddCommand(newPeriodicListCmd(db))
	return cmd
}

func newPeriodicListCmd(db *dbFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list [GROUP]",
		Short: "List the schedules of GROUP (of every group without one)",
		Long: "list prints each schedule: its spec and missed-slot policy, the group's leader (the holder of\n" +
			"the lease periodic/GROUP and its token; \"-\" when none holds it), the latest slot recorded and its\n" +
			"job (\"skipped\" under the skip policy, \"duplicate\" when a pending job had its UniqueKey), the next slot, and how many slots no leader enqueued\n" +
			"(MISSED: before the latest slot / over the retained records).",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := ""
			if len(args) == 1 {
				group = args[0]
			}
			h, ctx, done, err := db.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer done()
			scheds, err := admin.ListSchedules(ctx, h, group)
			if err != nil {
				return admin.Explain(ctx, err)
			}
			w := cmd.OutOrStdout()
			if db.json {
				return printJSON(w, scheds)
			}
			if len(scheds) == 0 {
				fmt.Fprintln(w, "no schedules yet (the leader of a group's workers records them when it starts)")
				return nil
			}
			ts := func(t *time.Time) string {
				if t == nil {
					return "-"
				}
				return t.Format(time.RFC3339Nano)
			}
			t := newTable(w, "GROUP", "SCHEDULE", "SPEC", "POLICY", "LEADER", "LAST SLOT", "LAST JOB", "NEXT SLOT", "MISSED")
			for _, s := range scheds {
				leader := "-"
				if s.LeaderLive {
					leader = fmt.Sprintf("%s (token %d)", s.Leader, s.LeaderToken)
				}
				job := "-"
				switch {
				case s.LastJobID != 0:
					job = fmt.Sprint(s.LastJobID)
				case s.LastOutcome != "":
					job = s.LastOutcome // skipped, or duplicate
				}
				t.row(s.Group, s.Name, s.Spec, s.Missed, leader, ts(s.LastSlot), job, ts(s.Next),
					fmt.Sprintf("%d/%d", s.LastMissed, s.MissedTotal))
			}
			return t.flush()
		},
	}
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/partition"
)

func newGroupsCmd() *cobra.Command {
	db := &dbFlags{}
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "Create and list partition groups",
		Long: "groups creates a group ahead of its workers, so that producers can enqueue into it before\n" +
			"any worker of it has started, and lists the groups.",
	}
	db.add(cmd, true)
	cmd.AddCommand(newGroupsCreateCmd(db), newGroupsListCmd(db))
	return cmd
}

func newGroupsCreateCmd(db *dbFlags) *cobra.Command {
	var partitions int
	cmd := &cobra.Command{
		Use:   "create GROUP --partitions N",
		Short: "Create a group with N partitions, unless it exists with N partitions",
		Long: "create creates the group with N partitions (1 to 65536), so that jobs can be enqueued into it\n" +
			"before any worker of it has started. It does nothing when the group exists with N partitions,\n" +
			"and fails when it exists with another count: the count is fixed when a group is created, and\n" +
			"its workers must be configured with it (worker.Config.Partitions).",
		Args: exactArgs(1, "the group's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("partitions") {
				return usageErr(cmd, "--partitions is required")
			}
			if partitions < 1 || partitions > partition.MaxPartitions {
				return usageErr(cmd, fmt.Sprintf("--partitions %d is not in 1..%d", partitions, partition.MaxPartitions))
			}
			h, ctx, done, err := db.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer done()
			res, err := admin.CreateGroup(ctx, h, args[0], partitions)
			if err != nil {
				return admin.Explain(ctx, err)
			}
			w := cmd.OutOrStdout()
			switch {
			case db.json:
				return printJSON(w, res)
			case res.Created:
				fmt.Fprintf(w, "group %s created with %d partitions\n", res.Group, res.Partitions)
			default:
				fmt.Fprintf(w, "group %s exists with %d partitions: nothing to do\n", res.Group, res.Partitions)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&partitions, "partitions", 0, fmt.Sprintf("the group's partition count, 1 to %d (required)", partition.MaxPartitions))
	return cmd
}

func newGroupsListCmd(db *dbFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the groups: partitions, partitions held, live members, pending jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, ctx, done, err := db.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer done()
			groups, err := admin.ListGroups(ctx, h)
			if err != nil {
				return admin.Explain(ctx, err)
			}
			w := cmd.OutOrStdout()
			if db.json {
				return printJSON(w, groups)
			}
			if len(groups) == 0 {
				fmt.Fprintln(w, noGroups)
				return nil
			}
			t := newTable(w, "GROUP", "PARTITIONS", "HELD", "LIVE MEMBERS", "PENDING")
			for _, g := range groups {
				t.row(g.Group, g.Partitions, g.Held, g.LiveMembers, g.Pending)
			}
			return t.flush()
		},
	}
}

// noGroups is what status and groups list print when there is no group.
const noGroups = "no groups yet (a worker creates its group when it starts; `leasehold groups create` creates one ahead)"

package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/kafka"
)

func newOutboxCmd() *cobra.Command {
	db := &dbFlags{}
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "Operate the fenced outbox's relay",
		Long: "outbox operates the relay that publishes the fenced outbox to Kafka (docs/kafka.md). What waits\n" +
			"in a group's outbox is shown by `leasehold status`.",
	}
	db.add(cmd, true)
	cmd.AddCommand(newOutboxClearCmd(db))
	return cmd
}

func newOutboxClearCmd(db *dbFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "clear GROUP [PARTITION]",
		Short: "Let the relay publish a partition it refused (progress that does not belong to the outbox)",
		Long: "clear clears the refusal a relay recorded for a partition of GROUP (every refused partition\n" +
			"without PARTITION): the progress committed in Kafka did not belong to the outbox (its tables\n" +
			"were reset, the database was restored from an older backup, or another deployment publishes\n" +
			"under the same transactional id prefix), and publishing would have skipped records silently.\n" +
			"Clear it once you have decided what to do (docs/kafka.md, \"Progress that does not belong to\n" +
			"the outbox\"): the relay then publishes what follows the progress in Kafka.",
		Args: rangeArgs(1, 2, "GROUP [PARTITION]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			partition := -1
			if len(args) == 2 {
				p, err := strconv.Atoi(args[1])
				if err != nil || p < 0 {
					return usageErr(cmd, fmt.Sprintf("PARTITION %q is not a partition number", args[1]))
				}
				partition = p
			}
			h, ctx, done, err := db.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer done()
			cleared, err := kafka.ClearRefusal(ctx, h, args[0], partition)
			if err != nil {
				return admin.Explain(ctx, err)
			}
			w := cmd.OutOrStdout()
			if db.json {
				return printJSON(w, map[string]any{"group": args[0], "cleared": cleared})
			}
			if len(cleared) == 0 {
				fmt.Fprintf(w, "no refused partition of group %s to clear\n", args[0])
				return nil
			}
			fmt.Fprintf(w, "cleared the refusal of group %s partitions %v: their relays publish them again\n", args[0], cleared)
			return nil
		},
	}
}

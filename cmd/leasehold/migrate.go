package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/admin"
)

// migrateResult is what migrate did, as --json prints it.
type migrateResult struct {
	Schema string `json:"schema"`
	From   int    `json:"from_version"`
	To     int    `json:"version"`
}

func newMigrateCmd(opts *rootOptions) *cobra.Command {
	var db dbFlags
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade leasehold's schema",
		Long: "migrate creates or upgrades leasehold's schema in the database named by --database-url\n" +
			"or $DATABASE_URL and prints the version reached. It is safe to run concurrently.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, ctx, done, err := db.open(cmd.Context(), opts.logger(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			defer done()
			before, after, err := admin.Migrate(ctx, h)
			if err != nil {
				return admin.Explain(ctx, err)
			}
			w := cmd.OutOrStdout()
			switch {
			case db.json:
				return printJSON(w, migrateResult{Schema: db.schema, From: before, To: after})
			case after == before:
				fmt.Fprintf(w, "schema %q is at version %d: up to date\n", db.schema, after)
			default:
				fmt.Fprintf(w, "schema %q migrated from version %d to version %d\n", db.schema, before, after)
			}
			return nil
		},
	}
	db.add(cmd, false)
	return cmd
}

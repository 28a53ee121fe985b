package main

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/migrations"
)

func newMigrateCmd(opts *rootOptions) *cobra.Command {
	var url, schema string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade leasehold's schema",
		Long: "migrate creates or upgrades leasehold's schema in the database named by --database-url\n" +
			"or $DATABASE_URL and prints the version reached. It is safe to run concurrently.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u := databaseURL(url)
			if u == "" {
				return errNoDatabase
			}
			if schema == "" {
				schema = migrations.DefaultSchema
			}
			ctx := cmd.Context()
			pool, err := pgxpool.New(ctx, u)
			if err != nil {
				return fmt.Errorf("database URL: %w", err)
			}
			defer pool.Close()
			before, err := leasehold.SchemaVersion(ctx, pool, schema)
			if err != nil {
				return err
			}
			if err := leasehold.Migrate(ctx, pool, leasehold.MigrateConfig{
				Schema: schema, Logger: opts.logger(cmd.ErrOrStderr()),
			}); err != nil {
				return err
			}
			after, err := leasehold.SchemaVersion(ctx, pool, schema)
			if err != nil {
				return err
			}
			if after == before {
				fmt.Fprintf(cmd.OutOrStdout(), "schema %q is at version %d: up to date\n", schema, after)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "schema %q migrated from version %d to version %d\n", schema, before, after)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "database-url", "", "PostgreSQL connection URL (default $DATABASE_URL)")
	cmd.Flags().StringVar(&schema, "schema", migrations.DefaultSchema, "schema holding leasehold's tables")
	return cmd
}

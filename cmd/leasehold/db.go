package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/store"
)

// dbFlags are the flags of the commands that work on a database.
type dbFlags struct {
	url            string
	schema         string
	connectTimeout time.Duration
	timeout        time.Duration
	json           bool
	// opts are the root's flags, for the commands whose components log
	// (batch: a cancel or seal that finishes a batch logs it).
	opts *rootOptions
}

// add registers the flags on cmd, as persistent flags when the command has
// subcommands sharing them.
func (f *dbFlags) add(cmd *cobra.Command, persistent bool) {
	fs := cmd.Flags()
	if persistent {
		fs = cmd.PersistentFlags()
	}
	f.addConnection(fs)
	fs.DurationVar(&f.timeout, "timeout", time.Minute, "give up the command's database work after this long")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of tables")
}

// addConnection registers the flags that say which database to reach, and
// how long to try: for a command that serves (ui), whose work has no end
// and prints no table. It leaves timeout to the command.
func (f *dbFlags) addConnection(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "database-url", "", "PostgreSQL connection URL (default $DATABASE_URL)")
	fs.StringVar(&f.schema, "schema", store.DefaultSchema, "schema holding leasehold's tables")
	fs.DurationVar(&f.connectTimeout, "connect-timeout", 10*time.Second, "give up reaching the database after this long")
}

// connect connects as the flags say (admin.Connect), with logger as the
// handle's logger (nil for leasehold's default), and checks that the schema
// is migrated (admin.CheckSchema). It returns the handle, a context bounded
// by --timeout for the command's database work, and the function to call
// when done.
func (f *dbFlags) connect(ctx context.Context, logger *slog.Logger) (*leasehold.DB, context.Context, func(), error) {
	h, wctx, done, err := f.open(ctx, logger)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := admin.CheckSchema(wctx, h); err != nil {
		err = admin.Explain(wctx, err)
		done()
		return nil, nil, nil, err
	}
	return h, wctx, done, nil
}

// open is connect without the schema check, for migrate.
func (f *dbFlags) open(ctx context.Context, logger *slog.Logger) (*leasehold.DB, context.Context, func(), error) {
	return admin.Connect(ctx, admin.ConnectConfig{URL: databaseURL(f.url), Schema: f.schema,
		ConnectTimeout: f.connectTimeout, Timeout: f.timeout, Logger: logger})
}

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/queue"
)

// dbFlags are the flags of the commands that work on a database.
type dbFlags struct {
	url            string
	schema         string
	connectTimeout time.Duration
	timeout        time.Duration
	json           bool
}

// add registers the flags on cmd, as persistent flags when the command has
// subcommands sharing them.
func (f *dbFlags) add(cmd *cobra.Command, persistent bool) {
	fs := cmd.Flags()
	if persistent {
		fs = cmd.PersistentFlags()
	}
	fs.StringVar(&f.url, "database-url", "", "PostgreSQL connection URL (default $DATABASE_URL)")
	fs.StringVar(&f.schema, "schema", store.DefaultSchema, "schema holding leasehold's tables")
	fs.DurationVar(&f.connectTimeout, "connect-timeout", 10*time.Second, "give up reaching the database after this long")
	fs.DurationVar(&f.timeout, "timeout", time.Minute, "give up the command's database work after this long")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of tables")
}

// errUnreachable wraps the error of a database that cannot be reached within
// --connect-timeout.
var errUnreachable = errors.New("cannot reach the database")

// connect opens a small pool on the database and checks that it answers
// within --connect-timeout. It returns leasehold's handle on it, for
// --schema, and a context bounded by --timeout for the command's database
// work; call the returned function when done.
func (f *dbFlags) connect(ctx context.Context) (*leasehold.DB, context.Context, func(), error) {
	u := databaseURL(f.url)
	if u == "" {
		return nil, nil, nil, errNoDatabase
	}
	if _, err := store.Quote(f.schema); err != nil {
		return nil, nil, nil, fmt.Errorf("--schema: %w", err)
	}
	if f.connectTimeout <= 0 || f.timeout <= 0 {
		return nil, nil, nil, fmt.Errorf("--connect-timeout and --timeout must be positive")
	}
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("database URL: %w", err)
	}
	cfg.MaxConns, cfg.MinConns = 4, 0
	cfg.ConnConfig.ConnectTimeout = f.connectTimeout
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "leasehold-cli"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("database URL: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, f.connectTimeout)
	err = pool.Ping(pctx)
	cancel()
	if err != nil {
		pool.Close()
		if ctx.Err() != nil {
			return nil, nil, nil, ctx.Err()
		}
		return nil, nil, nil, fmt.Errorf("%w within %v (--connect-timeout): %v", errUnreachable, f.connectTimeout, err)
	}
	h, err := leasehold.Open(pool, leasehold.Config{Schema: f.schema})
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	wctx, cancel := context.WithTimeoutCause(ctx, f.timeout, fmt.Errorf("the database work took longer than %v (--timeout)", f.timeout))
	return h, wctx, func() { cancel(); pool.Close() }, nil
}

// dbErr makes the error of database work cut short by --timeout say so.
func dbErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
			return fmt.Errorf("%v: %w", cause, err)
		}
	}
	return err
}

// dbNow reads the database clock: lease expiries and heartbeats are shown
// relative to it, not to this machine's clock.
func dbNow(ctx context.Context, pool *pgxpool.Pool) (time.Time, error) {
	var now time.Time
	err := pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now)
	return now, err
}

// queue connects as connect does and returns a queue client on the pool
// for --schema.
func (f *dbFlags) queue(ctx context.Context) (*queue.Client, context.Context, func(), error) {
	h, qctx, done, err := f.connect(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	q, err := queue.New(h, queue.Config{})
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	return q, qctx, done, nil
}

// Package exampledb opens the database the examples run on: the one
// $DATABASE_URL names, or else a throwaway PostgreSQL cluster started from
// the installed server binaries (removed when the example ends), with
// leasehold's schema migrated.
package exampledb

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgcluster"
)

// Open returns leasehold's handle on the examples' database, logging to
// log, and a function that closes its pool (and removes the throwaway
// cluster, if one was started).
func Open(ctx context.Context, log *slog.Logger) (*leasehold.DB, func(), error) {
	url := os.Getenv("DATABASE_URL")
	cleanup := func() {}
	if url == "" {
		fmt.Fprintln(os.Stderr, "DATABASE_URL is not set: starting a throwaway PostgreSQL cluster...")
		c, err := pgcluster.Start(ctx, pgcluster.Config{})
		if err != nil {
			return nil, nil, err
		}
		url, cleanup = c.URL("postgres"), func() { c.Remove() }
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("database URL: %w", err)
	}
	db, err := leasehold.Open(pool, leasehold.Config{Logger: log})
	if err == nil {
		err = db.Migrate(ctx)
	}
	if err != nil {
		pool.Close()
		cleanup()
		return nil, nil, err
	}
	return db, func() { pool.Close(); cleanup() }, nil
}

// Main runs an example's run function the way each example's main does: on
// the examples' database, with a context cancelled by SIGINT or SIGTERM,
// stdout for the example's output and warnings-only logs on stderr. It
// exits with status 1 on an error.
func Main(run func(ctx context.Context, db *leasehold.DB, out io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, closeDB, err := Open(ctx, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	err = run(ctx, db, os.Stdout)
	closeDB()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

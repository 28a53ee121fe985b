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

// Open returns a pool on the examples' database and a function that closes
// it (and removes the throwaway cluster, if one was started).
func Open(ctx context.Context) (*pgxpool.Pool, func(), error) {
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
	if err := leasehold.Migrate(ctx, pool, leasehold.MigrateConfig{}); err != nil {
		pool.Close()
		cleanup()
		return nil, nil, err
	}
	return pool, func() { pool.Close(); cleanup() }, nil
}

// Main runs an example's run function the way each example's main does: on
// the examples' database, with a context cancelled by SIGINT or SIGTERM,
// stdout for the example's output and warnings-only logs on stderr. It
// exits with status 1 on an error.
func Main(run func(ctx context.Context, pool *pgxpool.Pool, out io.Writer, log *slog.Logger) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, closeDB, err := Open(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	err = run(ctx, pool, os.Stdout, log)
	closeDB()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

package pgtest

import (
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
)

// DB creates a database for this test, migrates leasehold's schema into it
// and returns a handle on it whose logs are discarded.
func DB(t testing.TB) *leasehold.DB {
	t.Helper()
	return Open(t, Pool(t), leasehold.Config{})
}

// Open returns a handle on pool; a nil cfg.Logger discards the logs.
func Open(t testing.TB, pool *pgxpool.Pool, cfg leasehold.Config) *leasehold.DB {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	db, err := leasehold.Open(pool, cfg)
	if err != nil {
		t.Fatalf("pgtest: open: %v", err)
	}
	return db
}

// DBOn returns a handle on pool, in the default schema, whose logs are
// discarded.
func DBOn(t testing.TB, pool *pgxpool.Pool) *leasehold.DB {
	t.Helper()
	return Open(t, pool, leasehold.Config{})
}

package main

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
)

// lhDB returns leasehold's handle on pool, in schema ("" for the default),
// with its logs discarded: the suite measures, it does not log.
func lhDB(pool *pgxpool.Pool, schema string) (*leasehold.DB, error) {
	return leasehold.Open(pool, leasehold.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
}

// migrate creates or upgrades leasehold's schema in the database of pool.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	db, err := lhDB(pool, schema)
	if err != nil {
		return err
	}
	return db.Migrate(ctx)
}

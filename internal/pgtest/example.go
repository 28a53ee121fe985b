package pgtest

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
)

var (
	exMu      sync.Mutex
	exCleanup []func()
)

// ExampleDB returns a handle on a fresh, migrated database for a runnable
// Example (which has no *testing.T), with its logs discarded. The database
// is dropped when Run returns. It returns an error instead of failing a
// test.
func ExampleDB() (*leasehold.DB, error) {
	admin, err := ServerURL()
	if err != nil {
		return nil, err
	}
	name := randomName("lh_example_")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("pgtest: connect: %w", err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	conn.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgtest: create database: %w", err)
	}
	pool, err := pgxpool.New(ctx, WithDatabase(admin, name))
	if err != nil {
		return nil, fmt.Errorf("pgtest: pool: %w", err)
	}
	exMu.Lock()
	exCleanup = append(exCleanup, func() {
		pool.Close()
		dropDatabase(admin, name) // best effort: the cluster goes next
	})
	exMu.Unlock()
	db, err := leasehold.Open(pool, leasehold.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx); err != nil {
		return nil, err
	}
	return db, nil
}

// dropExamples drops the databases of ExampleDB.
func dropExamples() {
	exMu.Lock()
	defer exMu.Unlock()
	for _, f := range exCleanup {
		f()
	}
	exCleanup = nil
}

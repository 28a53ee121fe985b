package leaseholdtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/queue"
)

// EnvURL names the variable Pool reads for the server to test on. Its
// role must be allowed to create schemas. DATABASE_URL is deliberately not
// read: it often names a developer's working database, in which tests
// would create and drop schemas.
const EnvURL = pgtest.EnvURL // LEASEHOLD_TEST_DATABASE_URL

// Run runs the tests of m and then removes the throwaway PostgreSQL
// cluster Pool started, if it started one. Use it as
// os.Exit(leaseholdtest.Run(m)) in TestMain. (Without it the cluster's
// server still stops when the test binary exits, but its temporary
// directory is left behind.)
func Run(m *testing.M) int { return pgtest.Run(m) }

// Pool returns a pool, closed when the test ends, on the database that
// LEASEHOLD_TEST_DATABASE_URL names (DATABASE_URL is not read); when it is
// not set, on a throwaway PostgreSQL cluster started once per test binary from
// the installed server binaries (initdb and postgres on PATH or under
// /usr/lib/postgresql/*/bin; as the "postgres" user when run as root),
// removed by Run. The test fails if no server can be had. Use DB for a
// schema of the test's own on it.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := os.Getenv(EnvURL)
	if url == "" {
		var err error
		if url, err = pgtest.ServerURL(); err != nil {
			t.Fatalf("leaseholdtest: no PostgreSQL server: %v", err)
			return nil
		}
	}
	return pgtest.PoolURL(t, url)
}

// DB creates a schema of a unique name ("leaseholdtest_" and 12 hex
// digits) on pool, migrates leasehold's tables into it and returns a
// handle on it whose logs are discarded. The schema and everything in it
// is dropped when the test ends. Tests, parallel or not, each with a DB of
// their own, never see each other's jobs, leases or groups. The test fails
// if the schema cannot be made.
//
// Tables of the application's own (not leasehold's) are not in the schema:
// give them one of their own if tests share a database.
func DB(t testing.TB, pool *pgxpool.Pool) *leasehold.DB {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	schema := "leaseholdtest_" + hex.EncodeToString(b[:])
	db, err := leasehold.Open(pool, leasehold.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("leaseholdtest: open: %v", err)
		return nil
	}
	// Registered before the migration, which may fail half way.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := store.DropSchema(ctx, pool, schema); err != nil {
			t.Logf("leaseholdtest: drop schema %s: %v", schema, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("leaseholdtest: migrate schema %s: %v", schema, err)
		return nil
	}
	return db
}

// Group creates the partition group name with the given partition count in
// db's schema unless it exists (queue.Client.EnsureGroup), so that jobs can
// be enqueued into it. The test fails on an error, such as a group of
// another count.
func Group(ctx context.Context, t testing.TB, db *leasehold.DB, name string, partitions int) {
	t.Helper()
	c, err := queue.New(db, queue.Config{})
	if err == nil {
		_, err = c.EnsureGroup(ctx, name, partitions)
	}
	if err != nil {
		t.Fatalf("leaseholdtest: group %q: %v", name, err)
	}
}

// Tx begins a transaction on db's pool for the test, rolled back when the
// test ends unless it was committed or rolled back before. Its search_path
// is db's schema, then public: tables the test creates in it without a
// schema land in the throwaway schema, and go with the rollback. The test
// fails if it cannot begin.
func Tx(ctx context.Context, t testing.TB, db *leasehold.DB) pgx.Tx {
	t.Helper()
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatalf("leaseholdtest: begin: %v", err)
		return nil
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tx.Rollback(ctx) // after a commit or a rollback: ErrTxClosed, ignored
	})
	if err := store.SearchPath(ctx, tx, db.Schema()); err != nil {
		t.Fatalf("leaseholdtest: set the transaction's search_path: %v", err)
		return nil
	}
	return tx
}

package leasehold_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func open(t *testing.T, pool *pgxpool.Pool, schema string) *leasehold.DB {
	t.Helper()
	db, err := leasehold.Open(pool, leasehold.Config{Schema: schema})
	pgtest.Must(t, err)
	return db
}

func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.PoolURL(t, pgtest.URL(t))

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- open(t, pool, "custom_lh").Migrate(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent migrate: %v", err)
		}
	}
	v, err := open(t, pool, "custom_lh").SchemaVersion(ctx)
	if err != nil || v != leasehold.LatestSchemaVersion() {
		t.Fatalf("version = %d, %v; want %d", v, err, leasehold.LatestSchemaVersion())
	}
	var rows int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM custom_lh.schema_migrations`).Scan(&rows))
	if want := len(store.All()); rows != want { // versions may skip a number
		t.Fatalf("schema_migrations has %d rows, want one per migration (%d)", rows, want)
	}
	// The default schema is untouched.
	if v, err := open(t, pool, "").SchemaVersion(ctx); err != nil || v != 0 {
		t.Fatalf("default schema version = %d, %v; want 0", v, err)
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.PoolURL(t, pgtest.URL(t))
	pgtest.Must(t, open(t, pool, "").Migrate(ctx))
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.schema_migrations (version, name) VALUES ($1, 'from_the_future')`,
		leasehold.LatestSchemaVersion()+1)
	pgtest.Must(t, err)

	err = open(t, pool, "").Migrate(ctx)
	var ve *leasehold.SchemaVersionError
	if !errors.Is(err, leasehold.ErrSchemaTooNew) || !errors.As(err, &ve) || ve.Database != leasehold.LatestSchemaVersion()+1 {
		t.Fatalf("Migrate on a newer schema = %v; want *SchemaVersionError wrapping ErrSchemaTooNew", err)
	}
}

func TestMigrateRejectsBadSchemaName(t *testing.T) {
	t.Parallel()
	pool := pgtest.PoolURL(t, pgtest.URL(t))
	for _, s := range []string{"x; DROP TABLE y", "1abc", "has-dash", string(make([]byte, 64))} {
		if _, err := leasehold.Open(pool, leasehold.Config{Schema: s}); !errors.Is(err, leasehold.ErrInvalidSchema) {
			t.Errorf("Open(schema %q) = %v; want an error wrapping ErrInvalidSchema", s, err)
		}
	}
}

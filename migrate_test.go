package leasehold_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

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
			errs <- leasehold.Migrate(ctx, pool, leasehold.MigrateConfig{Schema: "custom_lh"})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent migrate: %v", err)
		}
	}
	v, err := leasehold.SchemaVersion(ctx, pool, "custom_lh")
	if err != nil || v != leasehold.LatestSchemaVersion() {
		t.Fatalf("version = %d, %v; want %d", v, err, leasehold.LatestSchemaVersion())
	}
	var rows int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM custom_lh.schema_migrations`).Scan(&rows))
	if rows != leasehold.LatestSchemaVersion() {
		t.Fatalf("schema_migrations has %d rows, want one per version (%d)", rows, leasehold.LatestSchemaVersion())
	}
	// The default schema is untouched.
	if v, err := leasehold.SchemaVersion(ctx, pool, ""); err != nil || v != 0 {
		t.Fatalf("default schema version = %d, %v; want 0", v, err)
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.PoolURL(t, pgtest.URL(t))
	pgtest.Must(t, leasehold.Migrate(ctx, pool, leasehold.MigrateConfig{}))
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.schema_migrations (version, name) VALUES ($1, 'from_the_future')`,
		leasehold.LatestSchemaVersion()+1)
	pgtest.Must(t, err)

	err = leasehold.Migrate(ctx, pool, leasehold.MigrateConfig{})
	var ve *leasehold.SchemaVersionError
	if !errors.Is(err, leasehold.ErrSchemaTooNew) || !errors.As(err, &ve) || ve.Database != leasehold.LatestSchemaVersion()+1 {
		t.Fatalf("Migrate on a newer schema = %v; want *SchemaVersionError wrapping ErrSchemaTooNew", err)
	}
}

func TestMigrateRejectsBadSchemaName(t *testing.T) {
	t.Parallel()
	pool := pgtest.PoolURL(t, pgtest.URL(t))
	for _, s := range []string{"x; DROP TABLE y", "1abc", "has-dash", string(make([]byte, 64))} {
		if err := leasehold.Migrate(context.Background(), pool, leasehold.MigrateConfig{Schema: s}); err == nil {
			t.Errorf("Migrate(schema %q) = nil; want an error", s)
		}
	}
}

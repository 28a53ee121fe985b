package leasehold

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/migrations"
)

// ErrSchemaTooNew is returned (wrapped in a *SchemaVersionError) when the
// database schema is newer than this build of leasehold knows.
var ErrSchemaTooNew = migrations.ErrSchemaTooNew

// ErrNotMigrated is returned by components whose tables are missing.
var ErrNotMigrated = migrations.ErrNotMigrated

// SchemaVersionError reports a database schema version this build cannot use.
type SchemaVersionError = migrations.VersionError

// MigrateConfig configures [Migrate].
type MigrateConfig struct {
	// Schema is the PostgreSQL schema holding leasehold's tables. It must be
	// a plain identifier. Defaults to "leasehold".
	Schema string
	// Logger receives one record per applied version. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Migrate creates or upgrades leasehold's schema to the version this build
// knows. It is safe to call from several processes at once: they serialise
// on an advisory lock and all but the first find nothing to do. A database
// whose schema is newer than this build gives a *SchemaVersionError.
func Migrate(ctx context.Context, pool *pgxpool.Pool, cfg MigrateConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	applied, err := migrations.Apply(ctx, pool, cfg.Schema)
	if err != nil {
		return err
	}
	schema := cfg.Schema
	if schema == "" {
		schema = migrations.DefaultSchema
	}
	for _, v := range applied {
		log.InfoContext(ctx, "leasehold: schema migrated", "schema", schema, "version", v)
	}
	return nil
}

// SchemaVersion returns the version of leasehold's schema in the database,
// 0 when it has not been migrated.
func SchemaVersion(ctx context.Context, pool *pgxpool.Pool, schema string) (int, error) {
	return migrations.Version(ctx, pool, schema)
}

// LatestSchemaVersion returns the newest schema version this build knows.
func LatestSchemaVersion() int { return migrations.Latest() }

package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence"
)

//go:embed sql/*.sql
var files embed.FS

// Migration is one versioned schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string // with {{schema}} placeholders
}

// All returns every known migration in version order.
func All() []Migration {
	entries, err := fs.ReadDir(files, "sql")
	if err != nil {
		panic(err) // embedded at build time: cannot fail
	}
	var ms []Migration
	for _, e := range entries {
		base := strings.TrimSuffix(e.Name(), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("store: bad migration file name " + e.Name()) // embedded at build time: a test reads them all
		}
		b, _ := files.ReadFile("sql/" + e.Name())
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms
}

// Latest returns the newest version this code knows.
func Latest() int {
	all := All()
	return all[len(all)-1].Version
}

// Beginner starts a transaction: a *pgxpool.Pool or *pgx.Conn.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Apply brings schema up to the newest version, in one transaction holding a
// transaction-scoped advisory lock, so concurrent callers serialise and the
// schema is never half migrated. It returns the versions it applied.
func Apply(ctx context.Context, db Beginner, schema string) (applied []int, err error) {
	q, err := Quote(schema)
	if err != nil {
		return nil, err
	}
	if schema == "" {
		schema = DefaultSchema
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("leasehold: migrate: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('leasehold.migrate.' || $1, 0))`, schema); err != nil {
		return nil, fmt.Errorf("leasehold: migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, Render(`
		CREATE SCHEMA IF NOT EXISTS {{schema}};
		CREATE TABLE IF NOT EXISTS {{schema}}.schema_migrations (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`, q)); err != nil {
		return nil, fmt.Errorf("leasehold: migrate: %w", err)
	}
	var current int
	if err := tx.QueryRow(ctx, Render(`SELECT coalesce(max(version), 0) FROM {{schema}}.schema_migrations`, q)).Scan(&current); err != nil {
		return nil, fmt.Errorf("leasehold: migrate: %w", err)
	}
	if latest := Latest(); current > latest {
		return nil, &VersionError{Schema: schema, Database: current, Known: latest}
	}
	for _, m := range All() {
		if m.Version <= current {
			continue
		}
		if _, err := tx.Exec(ctx, Render(m.SQL, q)); err != nil {
			return nil, fmt.Errorf("leasehold: migrate: version %d (%s): %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, Render(`INSERT INTO {{schema}}.schema_migrations (version, name) VALUES ($1, $2)`, q),
			m.Version, m.Name); err != nil {
			return nil, fmt.Errorf("leasehold: migrate: %w", err)
		}
		applied = append(applied, m.Version)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("leasehold: migrate: commit: %w", err)
	}
	return applied, nil
}

// Version returns the schema version recorded in the database, 0 when the
// schema has never been migrated.
func Version(ctx context.Context, db fence.Querier, schema string) (int, error) {
	q, err := Quote(schema)
	if err != nil {
		return 0, err
	}
	var v int
	err = db.QueryRow(ctx, Render(`SELECT coalesce(max(version), 0) FROM {{schema}}.schema_migrations`, q)).Scan(&v)
	if IsUndefined(err) {
		return 0, nil
	}
	return v, err
}

package history

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/store"
)

const sqlInstall = `
CREATE TABLE IF NOT EXISTS {{schema}}.lease_audit (
    seq         bigserial   PRIMARY KEY,
    name        text        NOT NULL,
    owner       text        NOT NULL,
    token       bigint      NOT NULL,
    acquired_at timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    written_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE OR REPLACE FUNCTION {{schema}}.lease_audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {{schema}}.lease_audit (name, owner, token, acquired_at, expires_at)
    VALUES (NEW.name, NEW.owner, NEW.token, NEW.acquired_at, NEW.expires_at);
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS lease_audit ON {{schema}}.leases;
CREATE TRIGGER lease_audit AFTER INSERT OR UPDATE ON {{schema}}.leases
    FOR EACH ROW EXECUTE FUNCTION {{schema}}.lease_audit_row();`

// Install adds the audit table and trigger to schema (empty: the default).
// Only tests install it: it doubles the writes of every lease statement.
func Install(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	q, err := store.Quote(schema)
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, store.Render(sqlInstall, q))
	return err
}

// Load reads the recorded history in write order.
func Load(ctx context.Context, pool *pgxpool.Pool, schema string) ([]Version, error) {
	q, err := store.Quote(schema)
	if err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, store.Render(
		`SELECT seq, name, owner, token, acquired_at, expires_at FROM {{schema}}.lease_audit ORDER BY seq`, q))
	if err != nil {
		return nil, fmt.Errorf("history: load: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Version])
}

// Version is one row version of a lease as written by the database.
type Version struct {
	Seq        int64
	Name       string
	Owner      string
	Token      int64
	AcquiredAt time.Time
	ExpiresAt  time.Time
}

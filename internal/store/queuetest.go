package store

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"
)

// The statements of the test helpers (package leaseholdtest): never run by
// a worker, so no index is added for them; a test's schema holds few jobs.

// queueByKind reads the jobs of kind $1, in any state, oldest first, at most
// $2, with the columns of queueList.
const queueByKind = `
SELECT ` + listColumns + `
FROM {{schema}}.jobs AS j
WHERE kind = $1
ORDER BY id
LIMIT $2`

// queueTrace reads the trace context job $1 was enqueued under (NULL:
// none), for an inline run's span.
const queueTrace = `SELECT trace FROM {{schema}}.jobs WHERE id = $1`

// queuePendingKinds counts the pending jobs of each kind: what a failed
// assertion reports as found instead.
const queuePendingKinds = `
SELECT kind, count(*) FROM {{schema}}.jobs WHERE state = 'pending' GROUP BY kind ORDER BY kind`

// DropSchema drops schema and everything in it, if it exists: the end of a
// test's throwaway schema (leaseholdtest.DB).
func DropSchema(ctx context.Context, db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, schema string) error {
	q, err := Quote(schema)
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, "DROP SCHEMA IF EXISTS "+q+" CASCADE")
	return err
}

// SearchPath sets the search_path of tx, for its duration, to schema and
// then public: a test's transaction whose unqualified tables land in, and
// are found in, the test's throwaway schema (leaseholdtest.Tx).
func SearchPath(ctx context.Context, tx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, schema string) error {
	q, err := Quote(schema)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "SET LOCAL search_path = "+q+", public")
	return err
}

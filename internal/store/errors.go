package store

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/leasehold/leasehold/fence"
)

var (
	// ErrClosed means the component, or the pool it runs on, was closed.
	ErrClosed = errors.New("leasehold: closed")
	// ErrNotMigrated means leasehold's tables are missing from the schema.
	ErrNotMigrated = errors.New("leasehold: schema not migrated (run `leasehold migrate` or DB.Migrate)")
	// ErrSchemaTooNew means the database carries a schema version newer
	// than this code knows: an older binary must not run against a newer
	// schema.
	ErrSchemaTooNew = errors.New("leasehold: database schema is newer than this version of leasehold")
	// ErrInvalidSchema is returned for a schema name that is not a plain
	// identifier.
	ErrInvalidSchema = errors.New("leasehold: invalid schema name")
)

// VersionError reports a database schema version this code cannot use.
type VersionError struct {
	Schema   string
	Database int // version recorded in the database
	Known    int // newest version this code knows
}

// Error returns the error message.
func (e *VersionError) Error() string {
	return fmt.Sprintf("leasehold: schema %q is at version %d, this build knows up to %d: upgrade leasehold",
		e.Schema, e.Database, e.Known)
}

// Unwrap returns ErrSchemaTooNew.
func (e *VersionError) Unwrap() error { return ErrSchemaTooNew }

// Classify wraps err, returned by a single statement (or a transaction's
// COMMIT) that op ran on resource, so that callers can branch on it. It is
// the one classifier of database errors, used by every component:
//
//   - nil stays nil;
//   - a closed pool wraps ErrClosed;
//   - a missing table, schema or sequence wraps ErrNotMigrated;
//   - an error the server answered with, a transaction that an earlier
//     error aborted, and a request that was certainly never sent are wrapped
//     plainly: the statement did not take effect;
//   - anything else (a lost connection, a FATAL or PANIC answer, a
//     deadline that passed while the request was in flight) may have been
//     applied: it is a *fence.IndeterminateError.
//
// prefix names the component ("lease", "queue" ...); resource may be empty.
func Classify(prefix, op, resource string, err error) error {
	if err == nil {
		return nil
	}
	where := prefix + ": " + op
	if resource != "" {
		where += " " + fmt.Sprintf("%q", resource)
	}
	if errors.Is(err, puddle.ErrClosedPool) {
		return fmt.Errorf("%s: %w", where, ErrClosed)
	}
	if IsUndefined(err) {
		return fmt.Errorf("%s: %w: %w", where, ErrNotMigrated, err)
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Severity != "FATAL" && pe.Severity != "PANIC":
		// The server answered: a statement or COMMIT that failed rolled back.
		return fmt.Errorf("%s: %w", where, err)
	case errors.Is(err, pgx.ErrTxCommitRollback), // an earlier error aborted the transaction
		errors.Is(err, pgx.ErrTxClosed), // nothing was sent
		pgconn.SafeToRetry(err):         // the request was never sent
		return fmt.Errorf("%s: %w", where, err)
	}
	return &fence.IndeterminateError{Op: prefix + ": " + op, Resource: resource, Err: err}
}

// IsUndefined reports whether err says a schema, table or sequence does not
// exist: the sign of an unmigrated database.
func IsUndefined(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000")
}

// Transient reports whether retrying later may succeed after err: the
// outcome is unknown, the connection failed, or the server reported a
// condition that passes (lock timeout, serialization failure, shutdown,
// resource shortage). A closed pool, a missing schema and a fenced write are
// not transient.
func Transient(err error) bool {
	switch {
	case err == nil:
		return false
	case fence.IsIndeterminate(err):
		return true
	case errors.Is(err, ErrClosed), errors.Is(err, ErrNotMigrated), errors.Is(err, fence.ErrFenced),
		errors.Is(err, ErrInvalidSchema):
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if len(pe.Code) < 2 {
			return true
		}
		switch pe.Code[:2] {
		case "08", "40", "53", "57", "58":
			return true
		}
		// lock_not_available, idle_in_transaction_session_timeout
		return pe.Code == "55P03" || pe.Code == "25P03"
	}
	return true // not a server answer: a connection or network failure
}

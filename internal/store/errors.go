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

// Classify wraps err, returned by a single statement that op ran on
// resource and that may have written (an INSERT, UPDATE or DELETE on its
// own, outside a transaction), so that callers can branch on it. It is the
// classifier of every component's writes:
//
//   - nil stays nil;
//   - a closed pool wraps ErrClosed;
//   - a missing table, schema or sequence wraps ErrNotMigrated;
//   - an ERROR answer (a failed statement rolled back), a connection that
//     never opened and a request that was certainly never sent are wrapped
//     plainly: the statement did not take effect;
//   - anything else (a FATAL answer from a server shutting down while the
//     statement ran, a lost connection, a deadline that passed while the
//     request was in flight, a commit not confirmed by the synchronous
//     standby: ErrNotReplicated) may have been applied: it is a
//     *fence.IndeterminateError. A *fence.IndeterminateError stays as it
//     is.
//
// prefix names the component ("lease", "queue" ...); resource may be empty.
// Use ClassifyCommit for a COMMIT and ClassifyRead for a statement that
// cannot have applied anything.
func Classify(prefix, op, resource string, err error) error {
	return classify(false, prefix, op, resource, err)
}

// ClassifyCommit is Classify for the COMMIT of a transaction that holds
// effects. Only an ERROR answer (the server rolled back), a transaction
// that an earlier error aborted, and a COMMIT never sent are known not to
// have committed. A FATAL or PANIC answer (the server shut down during the
// COMMIT), a transaction found already closed (its outcome was decided
// elsewhere), and a lost connection leave the outcome unknown: a
// *fence.IndeterminateError.
func ClassifyCommit(prefix, op, resource string, err error) error {
	return classify(true, prefix, op, resource, err)
}

// classify is Classify, or ClassifyCommit when commit is set.
func classify(commit bool, prefix, op, resource string, err error) error {
	if err == nil {
		return nil
	}
	if fence.IsIndeterminate(err) { // reported unknown already (a commit not replicated)
		return err
	}
	if known := classifyKnown(prefix, op, resource, err); known != nil {
		return known
	}
	if notApplied(commit, err) {
		return fmt.Errorf("%s: %w", where(prefix, op, resource), err)
	}
	// A FATAL or PANIC answer (the server shut down while the statement or
	// COMMIT ran), a lost connection, a deadline while the request was in
	// flight, a transaction found already closed.
	return &fence.IndeterminateError{Op: prefix + ": " + op, Resource: resource, Err: err}
}

// notApplied reports whether err shows that the statement (with commit,
// the COMMIT) certainly took no effect.
func notApplied(commit bool, err error) bool {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	switch {
	case errors.As(err, &pe) && severity(pe) == "ERROR", // it failed and rolled back
		errors.As(err, &ce): // the connection never opened: nothing was sent
		return true
	case errors.Is(err, pgx.ErrTxClosed): // the transaction ended elsewhere
		return false
	case commit && errors.Is(err, pgx.ErrTxCommitRollback): // an earlier error aborted it
		return true
	}
	return pgconn.SafeToRetry(err) // the request was never sent
}

// ClassifyRead is Classify for a statement that cannot have applied
// anything: a read, a BEGIN, or a statement inside a transaction that has
// not committed. Its outcome is never unknown: a closed pool wraps
// ErrClosed, a missing table ErrNotMigrated, anything else is wrapped
// plainly.
func ClassifyRead(prefix, op, resource string, err error) error {
	if err == nil {
		return nil
	}
	if known := classifyKnown(prefix, op, resource, err); known != nil {
		return known
	}
	return fmt.Errorf("%s: %w", where(prefix, op, resource), err)
}

// classifyKnown returns the wrapped error for a closed pool or a missing
// schema, nil for anything else.
func classifyKnown(prefix, op, resource string, err error) error {
	switch {
	case errors.Is(err, puddle.ErrClosedPool):
		return fmt.Errorf("%s: %w", where(prefix, op, resource), ErrClosed)
	case IsUndefined(err):
		return fmt.Errorf("%s: %w: %w", where(prefix, op, resource), ErrNotMigrated, err)
	}
	return nil
}

// where names an operation in an error message.
func where(prefix, op, resource string) string {
	s := prefix + ": " + op
	if resource != "" {
		s += fmt.Sprintf(" %q", resource)
	}
	return s
}

// severity is the answer's unlocalized severity (the server translates
// Severity under lc_messages), falling back to Severity on servers before
// 9.6.
func severity(pe *pgconn.PgError) string {
	if pe.SeverityUnlocalized != "" {
		return pe.SeverityUnlocalized
	}
	return pe.Severity
}

// IsUndefined reports whether err says a schema, table or sequence does not
// exist: the sign of an unmigrated database.
func IsUndefined(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000")
}

// IsServerTimeout reports whether the server cut err's statement short by
// one of its timeouts: statement_timeout (57014, also a cancel request),
// lock_timeout (55P03) or idle_in_transaction_session_timeout (25P03). A
// connection failure is not one.
func IsServerTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "57014" || pe.Code == "55P03" || pe.Code == "25P03")
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

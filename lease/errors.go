package lease

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/leasehold/leasehold/internal/migrations"
)

var (
	// ErrHeld means another owner holds the lease.
	ErrHeld = errors.New("lease: held by another owner")
	// ErrLost means the holder can no longer be sure it holds the lease:
	// its local deadline passed without a confirmed renewal, or a renewal
	// found the lease expired or granted to someone else.
	ErrLost = errors.New("lease: lost")
	// ErrReleased is a released lease's Err.
	ErrReleased = errors.New("lease: released")
	// ErrNotFound is returned by Inspect for a name that has no row.
	ErrNotFound = errors.New("lease: not found")
	// ErrClosed is returned by a Client after Close.
	ErrClosed = errors.New("lease: client closed")
	// ErrInvalidName is returned for an empty, over-long or malformed lease
	// name or owner id.
	ErrInvalidName = errors.New("lease: invalid name")
	// ErrInvalidConfig is wrapped by every *ConfigError.
	ErrInvalidConfig = errors.New("lease: invalid config")
	// ErrNotMigrated means leasehold's tables are missing from the schema.
	ErrNotMigrated = migrations.ErrNotMigrated
)

// ConfigError reports an invalid Config field.
type ConfigError struct {
	Field  string
	Reason string
}

// Error returns the error message.
func (e *ConfigError) Error() string { return "lease: invalid config: " + e.Field + ": " + e.Reason }

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// IndeterminateError wraps an error after which the outcome of a statement is
// unknown: the request may have reached the database and committed, but no
// reply arrived. After an indeterminate acquire, retry with the same Client
// (acquiring a lease the same owner already holds succeeds with a new token)
// or let the possible grant expire. Never assume either outcome.
type IndeterminateError struct {
	Op   string // "acquire", "renew", "release", "inspect" or "delete expired"
	Name string
	Err  error
}

// Error returns the error message.
func (e *IndeterminateError) Error() string {
	return fmt.Sprintf("lease: %s %q: outcome unknown: %v", e.Op, e.Name, e.Err)
}

// Unwrap returns the underlying error.
func (e *IndeterminateError) Unwrap() error { return e.Err }

// IsIndeterminate reports whether err leaves the outcome of a lease
// statement unknown.
func IsIndeterminate(err error) bool {
	var ie *IndeterminateError
	return errors.As(err, &ie)
}

// classify wraps a database error of operation op on name: ErrClosed for a
// closed pool, ErrNotMigrated for missing tables, *IndeterminateError when
// the statement may have run, a plain wrap when it certainly did not commit.
func classify(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, puddle.ErrClosedPool) {
		return fmt.Errorf("lease: %s %q: %w", op, name, ErrClosed)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if migrations.IsUndefined(err) {
			return fmt.Errorf("lease: %s %q: %w: %v", op, name, ErrNotMigrated, err)
		}
		// The server answered: a single statement that failed rolled back.
		return fmt.Errorf("lease: %s %q: %w", op, name, err)
	}
	if pgconn.SafeToRetry(err) {
		return fmt.Errorf("lease: %s %q: %w", op, name, err)
	}
	return &IndeterminateError{Op: op, Name: name, Err: err}
}

// transient reports whether retrying the operation later may succeed: the
// lease is held, the outcome is unknown, the connection failed, or the server
// reported a condition that passes (lock timeout, serialization failure,
// shutdown, resource shortage).
func transient(err error) bool {
	switch {
	case errors.Is(err, ErrHeld), errors.Is(err, ErrLost), IsIndeterminate(err):
		return true
	case errors.Is(err, ErrClosed), errors.Is(err, ErrInvalidName), errors.Is(err, ErrInvalidConfig),
		errors.Is(err, ErrNotMigrated):
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

package fence

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrFenced means a write carried a token lower than the resource's current
// one, or its lease no longer carries the token: a newer holder took over.
// The write was not applied.
var ErrFenced = errors.New("fence: stale fencing token")

// FencedError reports a refused write.
type FencedError struct {
	Resource string // the lease name, table row or resource the write targeted
	Held     Token  // the token the write carried
	Current  Token  // the resource's token when it refused; 0 if unknown
	Reason   string // why, in words
}

// Error returns the error message.
func (e *FencedError) Error() string {
	s := fmt.Sprintf("fence: %s refused token %d", e.Resource, e.Held)
	if e.Current.Valid() {
		s += fmt.Sprintf(" (current %d)", e.Current)
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap returns ErrFenced.
func (e *FencedError) Unwrap() error { return ErrFenced }

// IndeterminateError wraps a failed COMMIT whose outcome is unknown: the
// request may have reached the database and committed, but no reply came.
// The effects may or may not be applied; make them idempotent, or check.
type IndeterminateError struct{ Err error }

// Error returns the error message.
func (e *IndeterminateError) Error() string { return "fence: commit outcome unknown: " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *IndeterminateError) Unwrap() error { return e.Err }

// IsIndeterminate reports whether err leaves a commit's outcome unknown.
func IsIndeterminate(err error) bool {
	var ie *IndeterminateError
	return errors.As(err, &ie)
}

// commitErr classifies an error from COMMIT: a server error means the
// transaction rolled back; a failure before anything was sent is plain;
// anything else leaves the outcome unknown.
func commitErr(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Severity == "ERROR", // the server rolled back
		errors.Is(err, pgx.ErrTxCommitRollback), // an earlier error aborted the transaction
		pgconn.SafeToRetry(err):                 // COMMIT was never sent
		return fmt.Errorf("fence: commit: %w", err)
	}
	return &IndeterminateError{Err: err} // FATAL, PANIC or a lost connection: unknown
}

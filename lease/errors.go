package lease

import (
	"errors"

	"github.com/leasehold/leasehold/internal/store"
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
	// ErrClosed is returned by a Client after Close, or when its pool was
	// closed. It is leasehold.ErrClosed.
	ErrClosed = store.ErrClosed
	// ErrInvalidName is returned for an empty, over-long or malformed lease
	// name or owner id.
	ErrInvalidName = errors.New("lease: invalid name")
	// ErrInvalidConfig is wrapped by every *ConfigError.
	ErrInvalidConfig = errors.New("lease: invalid config")
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

// classify wraps a database error of operation op on name with the one
// classifier of every component (store.Classify): ErrClosed for a closed
// pool, ErrNotMigrated for missing tables, a *fence.IndeterminateError when
// the statement may have run, a plain wrap when it certainly did not.
func classify(op, name string, err error) error { return store.Classify("lease", op, name, err) }

// classifyRead is classify for a statement that cannot have applied
// anything (a read, or a statement of a transaction not yet committed): its
// outcome is never unknown.
func classifyRead(op, name string, err error) error {
	return store.ClassifyRead("lease", op, name, err)
}

// transient reports whether retrying the operation later may succeed: the
// lease is held, the outcome is unknown, the connection failed, or the server
// reported a condition that passes (lock timeout, serialization failure,
// shutdown, resource shortage).
func transient(err error) bool {
	switch {
	case errors.Is(err, ErrHeld), errors.Is(err, ErrLost):
		return true
	case errors.Is(err, ErrInvalidName), errors.Is(err, ErrInvalidConfig):
		return false
	}
	return store.Transient(err)
}

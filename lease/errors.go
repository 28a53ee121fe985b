package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/store"
)

var (
	// ErrHeld means another owner holds the lease.
	ErrHeld = errors.New("lease: held by another owner")
	// ErrLost means the holder can no longer be sure it holds the lease:
	// its local deadline passed without a confirmed renewal, or a renewal
	// found the lease expired or granted to someone else.
	ErrLost = errors.New("lease: lost")
	// ErrSuspended is wrapped, with ErrLost, by the *SuspendError of a lease
	// ended because the wall clock ran ahead of the monotonic clock: the
	// host was suspended (or the wall clock was stepped forward).
	ErrSuspended = errors.New("lease: host suspended or wall clock stepped forward")
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

// SuspendError is the Err of a lease that the Client ended because the
// wall clock advanced by more than Limit further than the monotonic clock
// since the lease's last confirmed grant or renewal was sent. The monotonic
// clock, on which the local deadline counts, stops while the host or VM is
// suspended; the wall clock and the database's clock do not, so the
// database may have expired the lease, and granted it anew, while the local
// deadline still lay ahead. An acquire whose reply arrived across such a
// jump gives its grant back and returns one too (Token then is zero). It
// wraps ErrLost and ErrSuspended.
type SuspendError struct {
	Name  string
	Token fence.Token
	// Jump is how much further the wall clock advanced than the monotonic
	// clock: about how long the host was suspended.
	Jump time.Duration
	// Limit is the largest jump tolerated: Config.SafetyMargin / 2.
	Limit time.Duration
}

// Error returns the error message.
func (e *SuspendError) Error() string {
	return fmt.Sprintf("lease: lost: %q token %d: the wall clock ran %v ahead of the monotonic clock (more than %v): host suspended or wall clock stepped forward",
		e.Name, e.Token, e.Jump, e.Limit)
}

// Unwrap returns ErrLost and ErrSuspended.
func (e *SuspendError) Unwrap() []error { return []error{ErrLost, ErrSuspended} }

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

package fence

import (
	"errors"
	"fmt"
)

// ErrFenced means a write carried a token lower than the resource's current
// one, or its lease no longer carries the token: a newer holder took over.
// The write was not applied.
var ErrFenced = errors.New("fence: stale fencing token")

// Check names which of the checks of a fenced write refused it
// (FencedError.Check). A write fenced by the lease row (lease.Fence, the
// queue's completions) is checked twice: an early read without a lock,
// before the effects run, then the locking check that counts, just before
// the commit. Operators diagnosing a handoff read it to tell "the lease had
// already moved on when the work started" from "it moved on while the work
// ran".
type Check string

// The checks a FencedError names.
const (
	// CheckEarly is the early read: the lease row read without a lock
	// before the effects ran (lease.Fence.Tx, before fn). Nothing ran.
	CheckEarly Check = "early read"
	// CheckLocking is the locking check: the lease row locked FOR KEY
	// SHARE just before the commit (lease.Fence.Check, the check of
	// lease.Fence.Tx after fn, and the queue's fenced completion
	// statement). The effects ran and were rolled back; a plain queue
	// handler's own effects, outside the transaction, stay.
	CheckLocking Check = "locking check"
)

// FencedError reports a refused write.
type FencedError struct {
	Resource string // the lease name, table row or resource the write targeted
	Held     Token  // the token the write carried
	Current  Token  // the resource's token when it refused; 0 if unknown
	Reason   string // why, in words
	// Check is the check that refused, for a write fenced by the lease
	// row: CheckEarly or CheckLocking. It is empty for a write with one
	// check only, the conditional write at the resource (Table,
	// HighWater, a Kafka offset, the queue's run record), and for a token
	// refused before any check ran (not a granted token).
	Check Check
}

// Error returns the error message: the resource, the token refused, the
// current token when known, the check that refused when there are two, and
// the reason.
func (e *FencedError) Error() string {
	s := fmt.Sprintf("fence: %s refused token %d", e.Resource, e.Held)
	if e.Current.Valid() {
		s += fmt.Sprintf(" (current %d)", e.Current)
	}
	if e.Check != "" {
		s += " at the " + string(e.Check)
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap returns ErrFenced.
func (e *FencedError) Unwrap() error { return ErrFenced }

// IndeterminateError wraps an error after which the outcome of a write is
// unknown: the request may have reached the database and committed, but no
// reply came (a lost connection, a FATAL answer, a deadline that passed
// while the request was in flight). The effects may or may not be applied:
// make them idempotent, or read back. Never assume either outcome. Every
// component of leasehold reports an unknown outcome with this one type.
type IndeterminateError struct {
	Op       string // what ran: "lease: acquire", "queue: enqueue", "commit" ...
	Resource string // the lease, job or row it ran on; may be empty
	Err      error
}

// Error returns the error message.
func (e *IndeterminateError) Error() string {
	s := e.Op
	if e.Resource != "" {
		s += fmt.Sprintf(" %q", e.Resource)
	}
	return s + ": outcome unknown: " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *IndeterminateError) Unwrap() error { return e.Err }

// IsIndeterminate reports whether err leaves the outcome of a write
// unknown.
func IsIndeterminate(err error) bool {
	var ie *IndeterminateError
	return errors.As(err, &ie)
}

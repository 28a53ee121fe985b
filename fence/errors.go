package fence

import (
	"errors"
	"fmt"
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

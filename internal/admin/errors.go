package admin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/queue"
)

// ErrBadInput is wrapped by every error about malformed input: a job given
// by flags or an input line that cannot be enqueued.
var ErrBadInput = errors.New("bad input")

// LineError reports a malformed input line, or a job given by flags that
// cannot be enqueued; nothing of the input is enqueued.
type LineError struct {
	Line   int // the 1-based input line; 0 for a job given by flags
	Reason string
	Err    error // the underlying error, if any (a *queue.JobError)
}

// Error names the line and the reason, and says that nothing was
// enqueued.
func (e *LineError) Error() string {
	if e.Line == 0 { // a job given by flags
		return e.Reason + " (nothing was enqueued)"
	}
	return fmt.Sprintf("line %d: %s (nothing was enqueued)", e.Line, e.Reason)
}

// Unwrap returns ErrBadInput and the underlying error.
func (e *LineError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrBadInput, e.Err}
	}
	return []error{ErrBadInput}
}

// MissingError reports the job ids that ShowJobs did not find; it wraps
// queue.ErrNotFound.
type MissingError struct {
	IDs []int64 // the ids not found, in the order given
}

// Error lists the ids not found.
func (e *MissingError) Error() string {
	ids := make([]string, len(e.IDs))
	for i, id := range e.IDs {
		ids[i] = fmt.Sprint(id)
	}
	return fmt.Sprintf("%v: %s (never enqueued, or deleted by retention)", queue.ErrNotFound, strings.Join(ids, ", "))
}

// Unwrap returns queue.ErrNotFound.
func (e *MissingError) Unwrap() error { return queue.ErrNotFound }

// ErrNotChanged is wrapped by the *NotChangedError of RetryJobs and
// CancelJobs.
var ErrNotChanged = errors.New("some jobs were left alone")

// NotChangedError reports that RetryJobs or CancelJobs left some of the
// jobs named alone; their results say which and why.
type NotChangedError struct {
	// Left is how many of the Total jobs named were left alone.
	Left, Total int
	// Verb is what was done to the others: "retried" or "cancelled".
	Verb string
}

// Error says how many jobs were left alone.
func (e *NotChangedError) Error() string {
	return fmt.Sprintf("%v: %d of %d not %s", ErrNotChanged, e.Left, e.Total, e.Verb)
}

// Unwrap returns ErrNotChanged.
func (e *NotChangedError) Unwrap() error { return ErrNotChanged }

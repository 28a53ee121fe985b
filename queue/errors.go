package queue

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidJob is wrapped by every *JobError.
	ErrInvalidJob = errors.New("queue: invalid job")
	// ErrUnknownGroup means the job's group does not exist: create it with
	// Client.EnsureGroup, or start a worker of it.
	ErrUnknownGroup = errors.New("queue: unknown group")
	// ErrInvalidGroup is returned by Client.EnsureGroup for a group name or
	// partition count out of range.
	ErrInvalidGroup = errors.New("queue: invalid group")
	// ErrInvalidConfig is returned by New for an invalid Config.
	ErrInvalidConfig = errors.New("queue: invalid config")
	// ErrNoLease is wrapped by the error of Processor.Serve (and logged by
	// Run) for a partition.Ownership without its Lease: the processor
	// needs the grant's lease to fence its writes and to stop when it
	// ends. A partition.Member's grants always carry it.
	ErrNoLease = errors.New("queue: partition.Ownership.Lease is nil: the processor needs the partition's lease")
	// ErrDuplicateHandler is wrapped by the error of NewProcessor (and of
	// worker.New) for Workers with two handlers registered for one kind.
	ErrDuplicateHandler = errors.New("queue: more than one handler registered for a kind")
)

// JobError reports a job that cannot be enqueued; nothing of the call was
// enqueued.
type JobError struct {
	Index  int    // the job's position in the call
	Field  string // "Group", "Key", "Args", "Kind", "MaxAttempts", "Priority" or "UniqueKey"
	Reason string
	Err    error // the underlying error, if any (a JSON encoding error)
}

// Error returns the error message.
func (e *JobError) Error() string {
	s := fmt.Sprintf("queue: job %d: %s: %s", e.Index, e.Field, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrInvalidJob and the underlying error.
func (e *JobError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidJob, e.Err}
	}
	return []error{ErrInvalidJob}
}

// ErrJobTimeout is the cause of a handler's context cancelled because the
// run took longer than ProcessorConfig.JobTimeout.
var ErrJobTimeout = errors.New("queue: job timed out")

// ErrNoOutcome is recorded on a job (and reported in its JobEvent) that was
// discarded because its last attempt ended without an outcome: the worker
// running it crashed, was killed, paused past its lease or lost the
// database, run after run. A job that takes down every worker that runs it
// is discarded this way instead of blocking its partition; see
// docs/queue.md.
var ErrNoOutcome = errors.New("queue: out of attempts: runs of the job ended without an outcome (the worker running it crashed, was killed or lost its partition)")

package queuehook

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/lease"
)

// Request asks for one run of a job's handler, inline.
type Request struct {
	// Processor is the *queue.Processor whose handlers and configuration
	// the run uses. It is not running: the run does not go through its
	// pipeline, only through the code that runs and records one job.
	Processor any
	// Job is the id of the job to run: a pending job.
	Job int64
	// Tx, if set, is the caller's transaction: the job is read, run and
	// its outcome recorded in it (a transactional handler's effects in a
	// savepoint of it), and nothing is committed. Nil: the run commits as
	// the processor's would.
	Tx pgx.Tx
	// Own returns the held lease of the job's partition (group, partition)
	// to run it under: the outcome is recorded fenced by its token.
	Own func(ctx context.Context, group string, partition int) (*lease.Lease, error)
}

// Result is what a run did.
type Result struct {
	// Outcome is the run's queue.Outcome.
	Outcome string
	// Err is the handler's error (or the processor's, for a fenced or
	// unrecorded outcome); nil when it returned nil.
	Err error
}

var (
	// Run runs one job's handler inline (see Request); set by package queue.
	Run func(ctx context.Context, r Request) (Result, error)
	// Jobs reads at most limit jobs of kind, in any state, oldest first,
	// from db's schema on q (a pool or a transaction): a []queue.JobInfo.
	// Set by package queue.
	Jobs func(ctx context.Context, db *leasehold.DB, q fence.Querier, kind string, limit int) (any, error)
	// PendingKinds counts the pending jobs of each kind in db's schema on
	// q. Set by package queue.
	PendingKinds func(ctx context.Context, db *leasehold.DB, q fence.Querier) (map[string]int, error)
	// Job reads one job on q: a queue.JobInfo, or an error wrapping
	// queue.ErrNotFound. Set by package queue.
	Job func(ctx context.Context, db *leasehold.DB, q fence.Querier, id int64) (any, error)
)

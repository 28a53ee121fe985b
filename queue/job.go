package queue

import (
	"fmt"
	"time"
)

// Args are a job's arguments: a value that encoding/json can encode and
// decode, which names the kind of job it is.
type Args interface {
	// Kind names the kind of job; handlers are registered by kind. 1 to
	// 100 bytes.
	Kind() string
}

// Job describes a job to enqueue.
type Job struct {
	// Group is the partition group whose owners process the job. It must
	// exist (a partition.Member creates it). Required.
	Group string
	// Key, if set, decides the job's partition, partition.Of(Key), and its
	// order: jobs with the same key run one at a time, in the order they
	// were enqueued (see Ordering for what a waiting job does to the later
	// ones), unless a key limit above 1 is declared (KeyConcurrency,
	// Policy.KeyConcurrency). At most 255 bytes. Defaults to none: a job without a key has
	// no ordering constraint, never waits for another job, and is placed
	// on the group's partitions round robin.
	Key string
	// Ordering says what this job does to the later jobs of its key while
	// it waits for a retry, a snooze or its RunAt. Defaults to OrderStrict.
	// Ignored for a job without a key.
	Ordering Ordering
	// Args are the job's arguments. Required.
	Args Args
	// RunAt is when the job becomes due. Defaults to now (the database's
	// clock).
	RunAt time.Time
	// MaxAttempts is how many times the job may run before it is
	// discarded. Defaults to the kind's Policy.MaxAttempts, declared with
	// its handler (see WithPolicy), else Config.MaxAttempts.
	MaxAttempts int
	// Priority orders the due jobs of a partition: 1 (the highest) to 4
	// (the lowest), as in River. Among the due jobs of its partition the
	// owner fetches those of priority 1 first, then 2, and so on, each
	// level in (RunAt, id) order. It never reorders the jobs of a key, and
	// does nothing across partitions (see docs/control.md). Defaults to 1.
	Priority int
	// KeyConcurrency, if set, is how many jobs of the key may run at once
	// when this job is the next of them to start, instead of its kind's
	// Policy.KeyConcurrency: 1 runs it alone, after the key's earlier jobs
	// and before its later ones; above 1, it runs beside up to that many
	// minus one others, in no order, and never holds the key's later jobs
	// while it waits for a retry (whatever its Ordering). Defaults to 0:
	// the kind's policy, else 1. At most MaxKeyConcurrency. Ignored for a
	// job without a key.
	KeyConcurrency int
	// UniqueKey, if set, makes a second enqueue with the same unique key in
	// the same group a no-op while the first job is pending. At most 255
	// bytes.
	UniqueKey string
}

// Ordering says what a keyed job that waits (for a retry after a failure,
// after a Snooze, or for a RunAt in the future) does to the later jobs of
// its key.
type Ordering int

const (
	// OrderStrict keeps the later jobs of the key waiting behind the job
	// until it is finished: a key's jobs run strictly in enqueue order,
	// across retries. A job that fails for an hour holds its key for an hour.
	OrderStrict Ordering = iota
	// OrderNonBlocking steps the job out of line while it waits: the later
	// jobs of its key run meanwhile. Once due again it runs one at a time
	// with the key's other due jobs, in id order (so before the later ones
	// still waiting).
	OrderNonBlocking
)

// String returns "strict" or "non-blocking".
func (o Ordering) String() string {
	switch o {
	case OrderStrict:
		return "strict"
	case OrderNonBlocking:
		return "non-blocking"
	}
	return fmt.Sprintf("Ordering(%d)", int(o))
}

// Enqueued is the outcome of enqueuing one Job.
type Enqueued struct {
	// ID is the job's id; for a duplicate, 0.
	ID int64
	// Partition is the job's partition.
	Partition int
	// Duplicate is true when a pending job with the same UniqueKey exists,
	// so nothing was enqueued.
	Duplicate bool
}

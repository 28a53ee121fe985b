package queue

import (
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
	// Key decides the job's partition, partition.Of(Key), and its order:
	// jobs with the same key run one at a time, in the order they were
	// enqueued. At most 255 bytes; "" is a key like any other.
	Key string
	// Args are the job's arguments. Required.
	Args Args
	// RunAt is when the job becomes due. Defaults to now (the database's
	// clock).
	RunAt time.Time
	// MaxAttempts is how many times the job may run before it is
	// discarded. Defaults to Config.MaxAttempts.
	MaxAttempts int
	// UniqueKey, if set, makes a second enqueue with the same unique key in
	// the same group a no-op while the first job is pending. At most 255
	// bytes.
	UniqueKey string
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

// Package queue is leasehold's PostgreSQL job queue.
//
// A job belongs to one partition of its group, partition.Of(key): only the
// owner of that partition processes it, so no job needs a per-job claim.
// This file set holds the enqueue side: Enqueue, EnqueueMany (one
// statement) and EnqueueTx (inside your transaction, committed or rolled
// back with it), typed arguments, run-at times, attempt limits and unique
// keys.
//
// See docs/queue.md.
package queue

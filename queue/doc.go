// Package queue is leasehold's PostgreSQL job queue.
//
// A job belongs to one partition of its group, partition.Of(key): only the
// owner of that partition processes it, so no job needs a per-job claim.
//
// A Client enqueues: Enqueue, EnqueueMany (one statement) and EnqueueTx
// (inside your transaction, committed or rolled back with it), with typed
// arguments, run-at times, attempt limits and unique keys; JobInfo, List,
// Retry, Cancel and Stats inspect, re-enqueue, cancel and count jobs. A
// Processor, whose Run is a partition.Member's Run, processes the jobs of
// the partitions the member owns with the handlers registered by Handle
// (plain), HandleTx (transactional: exactly-once effects in this database)
// and HandleTxBatch.
//
// See docs/queue.md.
package queue

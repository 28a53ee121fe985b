// Package queue is leasehold's PostgreSQL job queue.
//
// A job belongs to one partition of its group, partition.Of(key) (a job
// without a key: one placed round robin): only the owner of that partition
// processes it, so no job needs a per-job claim. Ordering is opt-in: jobs
// without a key wait for nothing; jobs sharing a key run one at a time, in
// order (see Ordering for what a waiting job does to the later ones), or up
// to a key limit at once (Policy.KeyConcurrency), at most a rate
// (Policy.KeyRate), with fair turns between the keys of a partition (see
// docs/control.md).
//
// A Client enqueues: Enqueue, EnqueueMany (one statement) and EnqueueTx
// (inside your transaction, committed or rolled back with it), with typed
// arguments, run-at times, attempt limits and unique keys; JobInfo, List,
// Retry, Cancel and Stats inspect, re-enqueue, cancel and count jobs. A
// Processor, whose Run is a partition.Member's Run, processes the jobs of
// the partitions the member owns with the handlers registered by Handle
// (plain), HandleTx (transactional: exactly-once effects in this database)
// and HandleTxBatch, in a continuous pipeline per partition: it fetches
// while jobs run, up to a window of jobs held, and records outcomes in
// fenced batches as they come. The member, not the partition, talks to the
// database: one fetch statement for all its partitions that ask at once,
// one fenced completion statement per flush for all of them (each
// partition fenced on its own), and one poll per PollInterval.
//
// Middleware (Workers.Use, WithMiddleware) wraps handlers of every shape;
// see docs/middleware.md. With a TracerProvider in Config and
// ProcessorConfig, enqueues, fetches, runs and fenced completions make
// OpenTelemetry spans, and a job's runs join the trace it was enqueued
// in; see docs/tracing.md.
//
// See docs/queue.md.
package queue

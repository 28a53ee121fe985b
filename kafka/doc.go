// Package kafka consumes Kafka topics with leasehold's partitioned
// ownership instead of a Kafka consumer group, and applies each batch of
// records to PostgreSQL exactly once.
//
// A Kafka consumer group hands a partition to a new consumer while the old
// one may still be running: a consumer paused past session.timeout.ms (a GC
// pause, a stopped VM) resumes and keeps writing its effects and committing
// offsets. Here, each Kafka partition is one partition of a leasehold group
// (see package partition), owned through a lease with a fencing token. The
// owner consumes the partition with direct assignment (no Kafka group),
// from the offset stored in PostgreSQL, and hands each batch of records to
// a Handler inside a transaction that also advances the stored offset and
// checks the token (lease.Fence): effects and offset commit together or
// not at all, and a stale owner's commit is refused with an error wrapping
// fence.ErrFenced.
//
// A Consumer is a source run by a worker.Worker, which owns the group
// membership, the leases, the metrics, the health endpoints and the
// graceful stop:
//
//	c, err := kafka.New(db, kafka.Config{Topics: []string{"payments"}, Handler: apply})
//	w, err := worker.New(db, worker.Config{Group: "payments-ledger", Kafka: c})
//	err = w.Run(ctx) // or w.Start(ctx) ... w.Stop(ctx)
//
// The worker's Group is the consumer group. The Consumer's Open, Run and
// Close are called by the worker.
//
// The stored offset is "last processed offset + 1"; offsets are never
// assumed contiguous. A stored offset outside the log is never silently
// reset: Config.OutOfRange decides (fail, or restart at the earliest or
// latest offset with a log line).
//
// Group partition i×PartitionsPerTopic + p consumes partition p of topic i,
// so partitions added to a topic, up to PartitionsPerTopic, are picked up.
//
// See docs/kafka.md for the zombie problem, the configuration, and running
// against a real cluster.
package kafka

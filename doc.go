// Package leasehold is a job-processing framework for Go built on
// partitioned ownership: leases in PostgreSQL carrying strictly increasing
// fencing tokens, and effects that commit only while their token is current.
//
// This package holds what every component shares: the [DB] handle (the
// pool, the schema and the logger, configured once), the schema migrations
// ([DB.Migrate]) and the errors every component may return
// ([ErrNotMigrated], [ErrClosed], and [ErrStarted] and [ErrStopped] for a
// refused Start). The components live in subpackages,
// each built on the one below it:
//
//   - fence: fencing tokens and the writes that check them (a leaf);
//   - lease: named leases with fencing tokens, and the fenced transaction;
//   - partition: one owner per partition of a group;
//   - queue and kafka: the job queue and Kafka topics, processed by their
//     partition's owner;
//   - worker: the runtime that runs a queue or Kafka source on the
//     partitions it owns, with metrics, health endpoints and graceful stop.
//
// See docs/architecture.md.
package leasehold

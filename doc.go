// Package leasehold is a job-processing framework for Go built on
// partitioned ownership: leases in PostgreSQL carrying strictly increasing
// fencing tokens, and effects that commit only while their token is current.
//
// This package holds what every component shares: the schema migrations
// ([Migrate]) and the errors of a refused Start ([ErrStarted],
// [ErrStopped]). The components live in subpackages: lease (named leases
// with fencing tokens), partition (one owner per partition of a group),
// fence (the writes that check tokens) and queue (jobs processed by their
// partition's owner).
package leasehold

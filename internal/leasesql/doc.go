// Package leasesql holds the SQL statements of package lease, with {{schema}}
// placeholders. They live here, in one place, so that the benchmarks' raw-SQL
// baseline runs exactly the statements the lease package runs.
//
// Expiry arithmetic uses only the database clock: clock_timestamp() plus the
// TTL, passed in microseconds. clock_timestamp() rather than now(): now() is
// the statement's start, which can be long before the row lock is granted,
// and a grant must not be recorded as starting before it happened.
package leasesql

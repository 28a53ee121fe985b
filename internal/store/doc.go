// Package store is leasehold's storage layer: the one place that knows the
// database. It holds the schema migrations, every SQL statement of every
// component (with the reasoning behind each), their rendering for a schema,
// the connection pools components derive for their own statements, and the
// one classifier of database errors (closed pool, schema not migrated,
// outcome unknown) that every component uses.
//
// The statements live here, in one place, so that the benchmarks' raw-SQL
// baseline runs exactly the statements the components run, and so that a
// reader finds the whole data model in one package.
//
// Expiry arithmetic uses only the database clock: clock_timestamp() plus
// the TTL, passed in microseconds. clock_timestamp() rather than now():
// now() is the statement's start, which can be long before the row lock is
// granted, and a grant must not be recorded as starting before it happened.
package store

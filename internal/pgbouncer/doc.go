// Package pgbouncer starts and stops throwaway PgBouncer poolers (Debian's
// pgbouncer package) in front of a PostgreSQL server, in transaction
// pooling mode by default. The tests and the chaos tool use it to run
// leasehold behind a pooler as fleets of its size do (docs/worker.md,
// "Behind PgBouncer").
package pgbouncer

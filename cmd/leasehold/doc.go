// Command leasehold is the command-line tool of the leasehold job framework.
//
// Usage:
//
//	leasehold migrate [--database-url URL] [--schema NAME]
//	leasehold version
//	leasehold demo [--json] [--database-url URL]
//	leasehold chaos [--duration D] [--seed N] [--workers N] [--jobs M] [--json FILE] [--database-url URL]
//	leasehold status [--group G]... [--all] [--json]
//	leasehold enqueue --group G --kind K [--key K] [--ordering strict|non-blocking] [--args JSON]
//	                  [--run-at T | --delay D] [--max-attempts N] [--unique-key U] [--json]
//	leasehold enqueue - | --stdin [--group G] [--json]     (JSON lines on standard input)
//	leasehold jobs show ID... [--json]
//	leasehold jobs list --group G [--state S] [--kind K] [--partition P]... [--before ID] [--limit N] [--json]
//	leasehold jobs retry ID... [--json]
//	leasehold jobs cancel ID... [--json]
//	leasehold groups create GROUP --partitions N [--json]
//	leasehold groups list [--json]
//	leasehold batch submit GROUP NAME [--description D] [--on-complete KIND [--on-complete-args JSON]]
//	                       [--on-success KIND [--on-success-args JSON]] [--seal] [--chunk N] [--json] < items.jsonl
//	leasehold batch status [GROUP] NAME [--watch | --once] [--json]
//	leasehold batch list [--group G] [--before ID] [--limit N] [--json]
//	leasehold batch seal|cancel|retry [GROUP] NAME [--json]
//	leasehold demo --kafka [--json] [--database-url URL]
//	leasehold outbox clear GROUP [PARTITION] [--json]
//
// migrate creates or upgrades leasehold's schema in the database named by
// --database-url or, failing that, the DATABASE_URL environment variable,
// and prints the schema version reached. It fails, with exit code 1, when
// the database's schema is newer than this build knows.
//
// outbox clear clears the refusal a Kafka outbox relay recorded for a
// partition whose progress in Kafka did not belong to the outbox (every
// refused partition of GROUP without PARTITION); the relay then publishes
// every segment the outbox holds (docs/kafka.md).
//
// version prints the module version of this build and the newest schema
// version it knows.
//
// demo tells the fencing story (internal/demo, a scripted scenario on the
// chaos suite's engine): three workers in this process share a group of 12
// partitions and apply 3000 jobs; worker-1 crashes and the others take over
// once its leases expire; worker-2 pauses mid-job past its lease, and its
// late commits are refused by the fencing token. The chaos checker then
// reads the ledger, the jobs, the workers' histories and the lease audit.
// demo --kafka tells the pause on an in-process Kafka (kfake) topic. Unless
// --database-url or DATABASE_URL names a server (whose schema leasehold_demo
// it drops at the start and the end), it runs on a throwaway cluster. With
// --json it prints the report as one JSON object on standard output (the
// story goes to standard error). The exit code is non-zero when an
// invariant fails.
//
// status shows, per group, each partition's owner, fencing token, lease
// expiry and pending jobs, the keys whose due jobs wait behind a job that is
// not due, what waits in the group's outbox to be published to Kafka, and
// each member's partitions and last heartbeat.
// enqueue enqueues a job given by flags, or JSON lines from standard input
// (all of them in one transaction, or none; a malformed line is reported by
// its number before anything is enqueued). jobs inspects, lists, retries and
// cancels jobs. groups create creates a group ahead of its workers (so that
// a producer can be deployed first); groups list lists the groups. batch
// submit creates a batch and streams its items from JSON lines, chunk by
// chunk (an error names the line; running it again resumes); batch status
// shows a batch's progress, live on a terminal; batch list, seal, cancel
// and retry list and change batches. These
// commands print tables, or JSON with --json, and take --database-url
// (default $DATABASE_URL), --schema, --connect-timeout (default 10s) and
// --timeout (default 1m); they first check that the schema is migrated. See
// docs/cli.md.
//
// Errors are printed on standard error as one "leasehold: ..." line and
// exit with code 1; a standard output closed by its reader (status | head)
// ends the command quietly with code 0.
//
// chaos runs worker OS processes under a seeded schedule of faults
// (SIGSTOP past the lease TTL, kill -9 and restart, held and slowed
// connections, clock skew, a PostgreSQL restart) and checks the ledger,
// the jobs and the lease history: nothing lost, nothing applied twice, every
// stale commit refused. See docs/reliability.md.
//
// The global flag --verbose shows the log records of the lease clients and
// of migrations, which are silenced by default.
//
// This package holds the commands, their flags and their output. The work
// of the database commands (connecting, migrating, the status report,
// parsing and enqueueing jobs, showing, listing, retrying and cancelling
// them, submitting and reading batches) is internal/admin's; the demo's is internal/demo's and chaos's is
// internal/chaos's.
package main

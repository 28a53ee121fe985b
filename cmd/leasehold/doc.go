// Command leasehold is the command-line tool of the leasehold job framework.
//
// Usage:
//
//	leasehold migrate [--database-url URL] [--schema NAME]
//	leasehold version
//	leasehold demo [--json] [--database-url URL]
//	leasehold status [--group G]... [--all] [--json]
//	leasehold enqueue --group G --kind K [--key K] [--args JSON] [--run-at T | --delay D]
//	                  [--max-attempts N] [--unique-key U] [--json]
//	leasehold enqueue - | --stdin [--group G] [--json]     (JSON lines on standard input)
//	leasehold jobs show ID... [--json]
//	leasehold jobs list --group G [--state S] [--kind K] [--partition P]... [--before ID] [--limit N] [--json]
//	leasehold jobs retry ID... [--json]
//	leasehold jobs cancel ID... [--json]
//	leasehold demo --kafka [--json] [--database-url URL]
//
// migrate creates or upgrades leasehold's schema in the database named by
// --database-url or, failing that, the DATABASE_URL environment variable,
// and prints the schema version reached. It fails, with exit code 1, when
// the database's schema is newer than this build knows.
//
// version prints the module version of this build and the newest schema
// version it knows.
//
// demo tells the story of fencing tokens in about ten seconds: three workers
// compete for one lease, the holder pauses (its clock stops, as in a long GC
// or VM pause) past its TTL, another worker takes over with a higher token,
// and the paused worker, resuming as a zombie that still believes it holds
// the lease, has its write refused by the fenced conditional update on the
// target row. It needs nothing but the PostgreSQL server binaries: unless
// --database-url or DATABASE_URL names a server, it starts a throwaway
// cluster and removes it afterwards. On an existing server it works in the
// schema leasehold_demo and drops its demo tables when done. With --json it
// prints the final report as one JSON object on standard output (the story
// goes to standard error). The exit code is non-zero when an invariant fails.
//
// status shows, per group, each partition's owner, fencing token, lease
// expiry and pending jobs, and each member's partitions and last heartbeat.
// enqueue enqueues a job given by flags, or JSON lines from standard input
// (all of them in one transaction, or none; a malformed line is reported by
// its number before anything is enqueued). jobs inspects, lists, retries and
// cancels jobs. These commands print tables, or JSON with --json, and take
// --database-url (default $DATABASE_URL), --schema, --connect-timeout
// (default 10s) and --timeout (default 1m). See docs/cli.md.
// demo --kafka tells the Kafka story (docs/kafka.md) in about five seconds,
// on an in-process Kafka (kfake): three workers consume a topic of 8
// partitions into a ledger table, one pauses inside a batch past its TTL,
// another owner commits the same records from the stored offset, and the
// paused worker's commit is refused by the fence; the ledger is checked
// for every record exactly once, in order.
//
// The global flag --verbose shows the log records of the lease clients and
// of migrations, which are silenced by default.
package main

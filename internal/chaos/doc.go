// Package chaos is leasehold's fault-injection suite, in the style of
// Jepsen: it runs a fleet of worker OS processes against a real
// PostgreSQL, each connected through its own in-process TCP fault proxy,
// feeds them jobs whose transactional handlers append one row per job to a
// ledger, injects faults from a seeded schedule (SIGSTOP past the lease
// TTL, kill -9 and restart, a held connection, latency, clock skew both
// ways, a PostgreSQL restart), and then checks the ledger, the jobs, the
// workers' own histories and the database's lease audit for lost jobs,
// duplicate effects, stale commits accepted and overlapping ownership.
//
// Four workloads are built in (Workload): "queue", the jobs above;
// "kafka", in which the orchestrator runs an in-process Kafka (kfake) and
// produces records to a topic that the workers consume with kafka,
// appending one ledger row per record in each batch's fenced transaction,
// whose check adds per-partition offset order and stored offsets at the
// log end; "kafka-out", the same plus one output record per input record
// appended with outbox.Add in the same transaction and published to an
// output topic by each worker's kafka.Relay, under two more faults the
// workers inject themselves (a relay killed right after its Kafka commit,
// a relay stopped just before its commit, past its lease), whose check
// reads the output back read_committed (each input's output exactly once,
// in input order per key) and counts, on the broker's side, the stale
// relays' requests Kafka refused; and "batch", the items of one queue
// batch (submitted by a producer that crashes halfway, then sealed)
// applied as the queue's jobs, whose check adds the batch's progress and
// its follow-ups run once each, after the last item.
//
// Run is the orchestrator (`leasehold chaos`); RunWorker is the body of
// one worker process (the hidden `leasehold chaos worker`, whose flags
// WorkerFlags defines and WorkerConfig.Args writes). Local is the same
// engine with in-process Members instead of processes, for scripted
// scenarios (internal/demo): the same database stage, workload, worker
// code, history recorders and checker, with a member crashed or paused by
// stopping its PausableClock, holding its handlers at a Gate and cutting or
// holding its connections at its fault proxy. Check is the
// checker: a pure function over what a run recorded, unit-tested with
// negative controls. Plan is the seeded fault schedule.
//
// Config.Unfenced is a control, not a mode: the workers then apply the
// ledger effect outside the fenced transaction, exactly as an
// at-least-once queue does, and the run must show duplicates. It proves that
// the faults and the checker can catch a violation. For kafka-out the
// ledger stays fenced and the outbox is published by an unsafe relay
// instead (an idempotent, non-transactional producer that deletes what it
// sent afterwards): the output must show duplicates.
//
// See docs/reliability.md.
package chaos

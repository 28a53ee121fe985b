// Package worker is the process a leasehold fleet runs: it joins a
// partition group, claims its share of the partitions under leases with
// fencing tokens, and runs a source on the partitions it owns: the queue's
// jobs, or a Kafka consumer's partitions.
//
// A Worker composes a partition.Member (membership, consistent-hash
// assignment, leases, handoff) with one source, and adds what a production
// process needs: graceful shutdown, signal handling (Run), Prometheus
// metrics and health endpoints. The source is one of:
//
//   - Config.Workers, the queue's handlers: a queue.Processor fetches, runs
//     and records the jobs of each owned partition, fenced by its token,
//     under a global concurrency limit and per-job timeouts;
//   - Config.Kafka, a kafka.Consumer: each owned partition consumes its
//     Kafka partition slot and commits each batch's effects with the
//     stored offset, fenced by its token.
//
// A queue worker:
//
//	ws := queue.NewWorkers()
//	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[Deposit]) error { ... })
//	w, err := worker.New(db, worker.Config{Group: "payments", Workers: ws})
//	...
//	err = w.Run(ctx) // until ctx is done (SIGTERM), then a graceful stop
//
// A Kafka worker:
//
//	c, err := kafka.New(db, kafka.Config{Topics: []string{"payments"}, Handler: apply})
//	w, err := worker.New(db, worker.Config{Group: "payments-ledger", Kafka: c})
//	...
//	err = w.Run(ctx)
//
// Each partition's jobs are fetched and run by one loop, which only the
// partition's lease holder runs: jobs of one key run one at a time, in
// order (likewise a Kafka partition's batches). Handler contexts are
// cancelled when the partition is handed off or its lease lost; whatever a
// handler still tries to commit after that is refused by the fence.
//
// See docs/worker.md and docs/kafka.md.
package worker

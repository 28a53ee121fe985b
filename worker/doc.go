// Package worker is the process a leasehold fleet runs: it joins a
// partition group, claims its share of the partitions under leases with
// fencing tokens, and runs the queue's jobs of the partitions it owns.
//
// A Worker composes a partition.Member (membership, consistent-hash
// assignment, leases, handoff) with a queue.Processor (fetching, running and
// recording jobs, fenced by the partition's token), and adds what a
// production process needs: a global concurrency limit, per-job timeouts,
// graceful shutdown, Prometheus metrics and health endpoints.
//
//	ws := queue.NewWorkers()
//	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[Deposit]) error { ... })
//	w, err := worker.New(pool, worker.Config{Group: "payments", Workers: ws})
//	...
//	err = w.Run(ctx) // until ctx is done (SIGTERM), then a graceful stop
//
// Each partition's jobs are fetched and run by one loop, which only the
// partition's lease holder runs: jobs of one key run one at a time, in
// order. Handler contexts are cancelled when the partition is handed off
// or its lease lost; whatever a handler still tries to commit after that is
// refused by the fence.
//
// See docs/worker.md.
package worker

package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// A partition whose backlog is larger than BatchSize fetches again at once
// after a full batch: it drains without waiting for a poll (an hour) or a
// notification (none: no Listen).
func TestBacklogDrainsWithoutPolling(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var jobs []queue.Job
	for _, k := range keysIn(0, 3, "backlog") {
		jobs = append(jobs, queue.Job{Group: "emails", Key: k, Args: deposit{}})
	}
	_, err := c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[deposit]) error { return nil })
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, BatchSize: 1, PollInterval: time.Hour}, false)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
}

// Listen wakes every partition once it listens: jobs enqueued while nobody
// listened (before it started, or while it reconnected) run at once
// instead of at the next poll (an hour).
func TestListenWakesEveryPartitionWhenItStartsListening(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error { return nil })
	p, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws, PollInterval: time.Hour})
	pgtest.Must(t, err)
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "emails", Partitions: 8, Run: p.Run,
		PollInterval: 100 * time.Millisecond, Lease: lease.Config{TTL: time.Second}})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Stop(sctx)
	})
	waitOwned(t, m, 8)
	waitFetched(t, p, 8)
	_, err = c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: step{"unheard"}})
	pgtest.Must(t, err)
	lctx, stopListen := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.Listen(lctx) }()
	defer func() { stopListen(); <-done }()
	pgtest.WaitNoPendingJobs(t, pool, 10*time.Second)
}

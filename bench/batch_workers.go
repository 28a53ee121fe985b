package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// batchRun is the workers of one burn-down: a partition.Member owning every
// partition, each partition's Run a queue.Processor with a no-op handler,
// configured as the queue suite's leasehold system in noop-burndown
// (BatchSize --batch, the library's defaults otherwise, woken by Listen).
// Its Runs wait at a gate, so that claiming partitions is not timed.
type batchRun struct {
	m        *partition.Member
	gate     chan struct{}
	unlisten context.CancelFunc
	listened chan struct{}
	handled  *atomic.Int64 // handler calls (items, plain jobs and follow-ups alike)
}

// startWorkers starts a batchRun and returns once its Member owns every
// partition and each Run waits at the gate.
func (b *batchBench) startWorkers(ctx context.Context) (*batchRun, error) {
	r := &batchRun{gate: make(chan struct{}), listened: make(chan struct{}), handled: new(atomic.Int64)}
	ws := queue.NewWorkers()
	queue.Handle(ws, func(_ context.Context, _ *queue.Work[noopJob]) error {
		r.handled.Add(1)
		return nil
	})
	proc, err := queue.NewProcessor(b.lh, queue.ProcessorConfig{Workers: ws, BatchSize: b.f.batch})
	if err != nil {
		return nil, err
	}
	lctx, unlisten := context.WithCancel(context.WithoutCancel(ctx))
	r.unlisten = unlisten
	go func() {
		defer close(r.listened)
		proc.Listen(lctx)
	}()
	var waiting atomic.Int32
	b.seq++
	r.m, err = partition.New(b.lh, partition.Config{
		Group: batchGroup, Partitions: b.f.partitions, ID: "bench-batch-" + strconv.Itoa(b.seq),
		Run: func(ctx context.Context, o partition.Ownership) {
			waiting.Add(1)
			select {
			case <-r.gate:
			case <-ctx.Done():
				waiting.Add(-1)
				return
			}
			proc.Run(ctx, o)
		},
	})
	if err != nil {
		unlisten()
		<-r.listened
		return nil, err
	}
	if err := r.m.Start(ctx); err != nil {
		unlisten()
		<-r.listened
		return nil, fmt.Errorf("start member: %w", err)
	}
	for t0 := time.Now(); len(r.m.Owned()) < b.f.partitions || int(waiting.Load()) < b.f.partitions; {
		err := sleepCtx(ctx, 5*time.Millisecond)
		if err == nil && time.Since(t0) > 30*time.Second {
			err = fmt.Errorf("the member holds %d of %d partitions after 30s (err %v)", len(r.m.Owned()), b.f.partitions, r.m.Err())
		}
		if err != nil {
			r.stop(ctx)
			return nil, err
		}
	}
	return r, nil
}

// open lets the Runs begin.
func (r *batchRun) open() { close(r.gate) }

// stop stops the Member (runs in flight finish and are recorded) and the
// Listen, with a deadline of its own.
func (r *batchRun) stop(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	defer func() { r.unlisten(); <-r.listened }()
	if err := r.m.Stop(sctx); err != nil {
		return fmt.Errorf("stop member: %w", err)
	}
	return nil
}

// registerKinds runs the workers once, ungated, until they have recorded
// their handlers' kinds in the group (CreateBatch and AddItems refuse
// kinds no worker handles): once per run, before any measurement.
func (b *batchBench) registerKinds(ctx context.Context) error {
	r, err := b.startWorkers(ctx)
	if err != nil {
		return err
	}
	r.open()
	defer r.stop(ctx)
	for t0 := time.Now(); ; {
		var n int
		if err := b.ctl.QueryRow(ctx, "SELECT count(*) FROM "+b.tables.kinds+" WHERE group_name = $1 AND kind = $2",
			batchGroup, noopJob{}.Kind()).Scan(&n); err != nil {
			return fmt.Errorf("read the group's kinds: %w", err)
		}
		if n > 0 {
			return nil
		}
		if time.Since(t0) > 30*time.Second {
			return fmt.Errorf("the workers did not record their kinds within 30s (member err %v)", r.m.Err())
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

package main

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// batchRun is the workers of one burn-down: a partition.Member owning every
// partition, each partition's Run a queue.Processor with a no-op handler,
// configured as the queue suite's leasehold system in noop-burndown
// (BatchSize --batch, the library's defaults otherwise, woken by Listen).
// Its Runs wait at a gate, so that claiming partitions is not timed.
type batchRun struct {
	*gatedMember
	handled *atomic.Int64 // handler calls (items, plain jobs and follow-ups alike)
}

// startWorkers starts a batchRun and returns once its Member owns every
// partition and each Run waits at the gate.
func (b *batchBench) startWorkers(ctx context.Context) (*batchRun, error) {
	r := &batchRun{handled: new(atomic.Int64)}
	ws := queue.NewWorkers()
	queue.Handle(ws, func(_ context.Context, _ *queue.Work[noopJob]) error {
		r.handled.Add(1)
		if b.f.sleep > 0 {
			time.Sleep(b.f.sleep) // a handler that takes time (--handler-sleep)
		}
		return nil
	})
	proc, err := queue.NewProcessor(b.lh, queue.ProcessorConfig{Workers: ws, BatchSize: b.f.batch, Concurrency: b.f.concurrency})
	if err != nil {
		return nil, err
	}
	b.seq++
	g, err := startGated(ctx, b.lh, proc, batchGroup, b.f.partitions, "bench-batch-"+strconv.Itoa(b.seq), nil,
		pprof.Labels("suite", "batch"))
	if err != nil {
		return nil, err
	}
	r.gatedMember = g
	return r, nil
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

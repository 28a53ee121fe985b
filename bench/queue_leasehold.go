package main

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// This file is the whole leasehold side of the queue suite: how jobs are
// enqueued and how they are processed (one partition.Member owning every
// partition, each partition's Run a queue.Processor). Switching the suite to
// another way of running leasehold means changing this file only.

// lhSystem is leasehold.
type lhSystem struct {
	lhTables
	q      *queueBench
	pool   *pgxpool.Pool // the processors' pool: --conns connections, traced
	client *queue.Client // on pool
	seq    int           // member ids
}

func newLHSystem(q *queueBench, pool *pgxpool.Pool) (*lhSystem, error) {
	db, err := lhDB(pool, "")
	if err != nil {
		return nil, err
	}
	client, err := queue.New(db, queue.Config{})
	if err != nil {
		return nil, err
	}
	return &lhSystem{lhTables: lhTables{q}, q: q, pool: pool, client: client}, nil
}

func (s *lhSystem) name() string { return sysQueueLeasehold }

func (s *lhSystem) settings() string {
	poll := "default (500ms)"
	if s.q.f.lhPoll > 0 {
		poll = s.q.f.lhPoll.String()
	}
	return fmt.Sprintf("one partition.Member owning all %d partitions, each running a queue.Processor (BatchSize %d, "+
		"PollInterval %s, Concurrency %d in io-10ms and hol, the library's defaults otherwise, PartitionConcurrency "+
		"never set) woken by Processor.Listen; queue.Client Enqueue / EnqueueMany (NOTIFY on enqueue); keyless jobs "+
		"enqueued with Key \"\"; pool of %d conns (plus the Member's lease and membership pools)",
		s.q.f.partitions, s.q.f.batch, poll, s.q.f.concurrency, s.q.f.conns)
}

// lhJob returns job i of case c as leasehold enqueues it, with the key
// keyOf gives.
func (s *lhSystem) lhJob(c string, i int) queue.Job {
	return queue.Job{Group: queueGroup, Key: s.q.keyOf(c, i), Args: jobArgs(c, i)}
}

func (s *lhSystem) enqueue(ctx context.Context, c string, first, n int) ([]int64, error) {
	jobs := make([]queue.Job, n)
	for k := range jobs {
		jobs[k] = s.lhJob(c, first+k)
	}
	out, err := s.client.EnqueueMany(ctx, jobs...)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(out))
	for k, e := range out {
		ids[k] = e.ID
	}
	return ids, nil
}

func (s *lhSystem) enqueueOne(ctx context.Context, c string, i int) error {
	_, err := s.client.Enqueue(ctx, s.lhJob(c, i))
	return err
}

// lhRun is a running Member whose Runs wait at a gate, and its Processor's
// Listen (which wakes idle partitions when jobs are enqueued).
type lhRun struct {
	m        *partition.Member
	gate     chan struct{}
	unlisten context.CancelFunc
	listened chan struct{}
}

func (r *lhRun) open() error { close(r.gate); return nil }

func (r *lhRun) stop(ctx context.Context) error {
	defer func() { r.unlisten(); <-r.listened }()
	if err := r.m.Stop(ctx); err != nil {
		return fmt.Errorf("stop member: %w", err)
	}
	return nil
}

// start starts a Member owning every partition, with a Processor whose
// handlers suit case c, and returns once the Member owns every partition
// and each Run waits at the gate: claiming partitions is not timed.
func (s *lhSystem) start(ctx context.Context, c string, b *burn, started func(int)) (queueRun, error) {
	ws := queue.NewWorkers()
	switch c {
	case caseTxOneRow:
		// Exactly once: the effect, the fence check and the completion
		// commit together.
		queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[rowJob]) error {
			_, err := tx.Exec(ctx, queueInsertEffect, w.ID, w.Key, int64(w.Token))
			return err
		})
	case caseIO, caseHOL:
		queue.Handle(ws, func(_ context.Context, w *queue.Work[noopJob]) error {
			time.Sleep(s.q.sleepOf(c, w.Args.N))
			return nil
		})
	default:
		queue.Handle(ws, func(_ context.Context, w *queue.Work[noopJob]) error {
			if started != nil {
				started(w.Args.N)
			}
			return nil
		})
	}
	cfg := queue.ProcessorConfig{Workers: ws, BatchSize: s.q.f.batch, PollInterval: s.q.f.lhPoll}
	if c == caseIO || c == caseHOL {
		cfg.Concurrency = s.q.f.concurrency // River's MaxWorkers in these cases
	}
	db, err := lhDB(s.pool, "")
	if err != nil {
		return nil, err
	}
	proc, err := queue.NewProcessor(db, cfg)
	if err != nil {
		return nil, err
	}
	s.q.tracer.follow(b)
	lctx, unlisten := context.WithCancel(context.WithoutCancel(ctx))
	r := &lhRun{gate: make(chan struct{}), unlisten: unlisten, listened: make(chan struct{})}
	go func() {
		defer close(r.listened)
		proc.Listen(lctx)
	}()
	var waiting atomic.Int32
	s.seq++
	r.m, err = partition.New(db, partition.Config{
		Group: queueGroup, Partitions: s.q.f.partitions, ID: "bench-leasehold-" + strconv.Itoa(s.seq),
		Run: func(ctx context.Context, o partition.Ownership) {
			ctx = withSlot(ctx, b.slots[o.Partition])
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
		return nil, err
	}
	var startErr error
	// The member's goroutines inherit the profile labels.
	pprof.Do(ctx, pprof.Labels("system", sysQueueLeasehold, "case", c), func(ctx context.Context) {
		startErr = r.m.Start(ctx)
	})
	if startErr != nil {
		unlisten()
		return nil, fmt.Errorf("start member: %w", startErr)
	}
	for t0 := time.Now(); len(r.m.Owned()) < s.q.f.partitions || int(waiting.Load()) < s.q.f.partitions; {
		err := sleepCtx(ctx, 5*time.Millisecond)
		if err == nil && time.Since(t0) > 30*time.Second {
			err = fmt.Errorf("the member holds %d of %d partitions after 30s (err %v)", len(r.m.Owned()), s.q.f.partitions, r.m.Err())
		}
		if err != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			r.stop(sctx)
			return nil, err
		}
	}
	return r, nil
}

package main

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
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
	// limits registers every handler with limitsPolicy (leasehold+limits).
	limits bool
}

// limitsPolicy is what leasehold+limits declares on every handler: a
// per-key concurrency and start rate far above anything a case reaches,
// so that the limits are declared but never bind; its rates over
// leasehold's measure what declaring them costs.
var limitsPolicy = queue.Policy{KeyConcurrency: 1000, KeyRate: queue.Rate{Starts: 1_000_000, Per: time.Second}}

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

func (s *lhSystem) name() string {
	if s.limits {
		return sysQueueLimits
	}
	return sysQueueLeasehold
}

func (s *lhSystem) settings() string {
	poll := "default (1s)"
	if s.q.f.lhPoll > 0 {
		poll = s.q.f.lhPoll.String()
	}
	limits := ""
	if s.limits {
		limits = fmt.Sprintf("; every handler registered with queue.WithPolicy(queue.Policy{KeyConcurrency: %d, "+
			"KeyRate: queue.Rate{Starts: %d, Per: %v}}), limits that never bind; otherwise as leasehold",
			limitsPolicy.KeyConcurrency, limitsPolicy.KeyRate.Starts, limitsPolicy.KeyRate.Per)
	}
	return fmt.Sprintf("one partition.Member owning all %d partitions, each running a queue.Processor (BatchSize %d, "+
		"PollInterval %s, Concurrency %d in io-10ms, hol and fair, the library's defaults otherwise, PartitionConcurrency "+
		"never set) woken by Processor.Listen; queue.Client Enqueue / EnqueueMany (NOTIFY on enqueue); keyless jobs "+
		"enqueued with Key \"\"; pool of %d conns (plus the Member's lease and membership pools)%s",
		s.q.f.partitions, s.q.f.batch, poll, s.q.f.concurrency, s.q.f.conns, limits)
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

// start starts a Member owning every partition, with a Processor whose
// handlers suit case c, and returns once the Member owns every partition
// and each Run waits at the gate: claiming partitions is not timed.
func (s *lhSystem) start(ctx context.Context, c string, b *burn, started func(int)) (queueRun, error) {
	ws := queue.NewWorkers()
	var opts []queue.Option
	if s.limits {
		opts = append(opts, queue.WithPolicy(limitsPolicy))
	}
	switch c {
	case caseTxOneRow:
		// Exactly once: the effect, the fence check and the completion
		// commit together.
		queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[rowJob]) error {
			_, err := tx.Exec(ctx, queueInsertEffect, w.ID, w.Key, int64(w.Token))
			return err
		}, opts...)
	case caseIO, caseHOL, caseFair:
		queue.Handle(ws, func(_ context.Context, w *queue.Work[noopJob]) error {
			if started != nil {
				started(w.Args.N)
			}
			time.Sleep(s.q.sleepOf(c, w.Args.N))
			return nil
		}, opts...)
	default:
		queue.Handle(ws, func(_ context.Context, w *queue.Work[noopJob]) error {
			if started != nil {
				started(w.Args.N)
			}
			return nil
		}, opts...)
	}
	cfg := queue.ProcessorConfig{Workers: ws, BatchSize: s.q.f.batch, PollInterval: s.q.f.lhPoll}
	if c == caseIO || c == caseHOL || c == caseFair {
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
	s.seq++
	return startGated(ctx, db, proc, queueGroup, s.q.f.partitions, "bench-"+s.name()+"-"+strconv.Itoa(s.seq),
		func(ctx context.Context, o partition.Ownership) context.Context {
			return withSlot(ctx, b.slots[o.Partition])
		},
		pprof.Labels("system", s.name(), "case", c))
}

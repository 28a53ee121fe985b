package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// The systems of the queue suite.
const (
	sysQueueLeasehold = "leasehold"
	sysQueueRaw       = "raw-sql"
)

// noopJob is the noop-burndown case's job; its handler does nothing.
type noopJob struct {
	N int `json:"n"`
}

// Kind names the job kind.
func (noopJob) Kind() string { return "bench_noop" }

// rowJob is the tx-one-row case's job; its handler inserts one row.
type rowJob struct {
	N int `json:"n"`
}

// Kind names the job kind.
func (rowJob) Kind() string { return "bench_row" }

// rawToken is the fencing token the raw-sql baseline records on the jobs it
// completes; it holds no lease and checks no fence.
const rawToken = 1

// burnLeasehold burns down the backlog with one partition.Member owning
// every partition and running a queue.Processor. The member is started
// first, its Runs held at a gate until it owns every partition; the clock
// starts when the gate opens, and stops when the last job's completion
// commits or the cap passes.
func (q *queueBench) burnLeasehold(ctx context.Context, c string, n int) (sample, error) {
	ws := queue.NewWorkers()
	if c == "tx-one-row" {
		queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[rowJob]) error {
			_, err := tx.Exec(ctx, queueInsertEffect, w.ID, w.Key, int64(w.Token))
			return err
		})
	} else {
		queue.Handle(ws, func(context.Context, *queue.Work[noopJob]) error { return nil })
	}
	discard := slog.New(slog.DiscardHandler)
	proc, err := queue.NewProcessor(q.lh, queue.ProcessorConfig{Workers: ws, BatchSize: q.f.batch, Logger: discard})
	if err != nil {
		return sample{}, err
	}
	b := newBurn(n, q.f.partitions)
	gate := make(chan struct{})
	var waiting atomic.Int32
	q.seq++
	m, err := partition.New(q.lh, partition.Config{
		Group: queueGroup, Partitions: q.f.partitions, ID: "bench-leasehold-" + strconv.Itoa(q.seq),
		Run: func(ctx context.Context, o partition.Ownership) {
			ctx = withSlot(ctx, b.slots[o.Partition])
			waiting.Add(1)
			select {
			case <-gate:
			case <-ctx.Done():
				waiting.Add(-1)
				return
			}
			proc.Run(ctx, o)
		},
		Lease: lease.Config{Logger: discard},
	})
	if err != nil {
		return sample{}, err
	}
	var startErr error
	// The member's goroutines inherit the profile labels.
	pprof.Do(ctx, pprof.Labels("system", sysQueueLeasehold, "case", c), func(ctx context.Context) {
		startErr = m.Start(ctx)
	})
	if startErr != nil {
		return sample{}, fmt.Errorf("start member: %w", startErr)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		m.Stop(sctx)
	}()
	for t0 := time.Now(); len(m.Owned()) < q.f.partitions || int(waiting.Load()) < q.f.partitions; {
		if time.Since(t0) > 30*time.Second {
			return sample{}, fmt.Errorf("the member holds %d of %d partitions after 30s (err %v)", len(m.Owned()), q.f.partitions, m.Err())
		}
		if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
			return sample{}, err
		}
	}
	s0 := q.startSample(b)
	close(gate)
	smp, err := q.await(ctx, b, s0)
	if err != nil {
		return smp, err
	}
	// Stop now, so that the Runs have returned before the slots are read.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := m.Stop(sctx); err != nil {
		return smp, fmt.Errorf("stop member: %w", err)
	}
	smp.lat = b.latencies()
	return smp, nil
}

// burnRaw burns down the backlog with one goroutine per partition, each
// looping the Processor's fetch statement and completing what it fetched:
// noop-burndown with one BEGIN; complete statement; COMMIT per batch,
// tx-one-row with one BEGIN; INSERT; complete statement; COMMIT per job.
// There is no lease, no fence check and no handler dispatch.
func (q *queueBench) burnRaw(ctx context.Context, c string, n int) (sample, error) {
	b := newBurn(n, q.f.partitions)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, q.f.partitions)
	s0 := q.startSample(b)
	for p := range q.f.partitions {
		wg.Add(1)
		go pprof.Do(withSlot(rctx, b.slots[p]), pprof.Labels("system", sysQueueRaw, "case", c), func(ctx context.Context) {
			defer wg.Done()
			errs[p] = q.rawLoop(ctx, c, p)
			if errs[p] != nil && ctx.Err() == nil {
				cancel()
			}
		})
	}
	smp, err := q.await(rctx, b, s0)
	if err != nil || smp.short {
		// Stop the loops. (A finished burndown lets them see their empty
		// fetch instead: cancelling a statement in flight would close its
		// connection, and the next measurement would pay for a new one.)
		cancel()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil && !errors.Is(e, context.Canceled) {
			return smp, e // the loop's failure, rather than the cancellation it caused
		}
	}
	if err != nil {
		return smp, err
	}
	smp.lat = b.latencies()
	return smp, nil
}

// fetchedJob is a job as the raw-sql loop reads it: the same columns the
// Processor scans.
type fetchedJob struct {
	id           int64
	key, kind    string
	args         []byte
	attempt, max int
	created      time.Time
}

// rawLoop processes partition p until its fetch comes back empty or ctx is
// cancelled.
func (q *queueBench) rawLoop(ctx context.Context, c string, p int) error {
	for ctx.Err() == nil {
		rows, err := q.raw.Query(ctx, q.sql.fetch, queueGroup, p, q.f.batch)
		if err != nil {
			return err
		}
		jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fetchedJob, error) {
			var f fetchedJob
			err := r.Scan(&f.id, &f.key, &f.kind, &f.args, &f.attempt, &f.max, &f.created)
			return f, err
		})
		if err != nil || len(jobs) == 0 {
			return err
		}
		if c == "tx-one-row" {
			for _, j := range jobs {
				if ctx.Err() != nil {
					return nil
				}
				if err := q.rawOne(ctx, j); err != nil {
					return err
				}
			}
			continue
		}
		k := len(jobs)
		ids, states, spent := make([]int64, k), make([]string, k), make([]int32, k)
		delays, errs := make([]*int64, k), make([]*string, k)
		for i, j := range jobs {
			ids[i], states[i], spent[i] = j.id, "completed", 1
		}
		if err := pgx.BeginFunc(ctx, q.raw, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, q.sql.complete, ids, states, spent, delays, errs, int64(rawToken))
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// rawOne runs one tx-one-row job in a transaction of its own: the effect
// row, the complete statement, commit.
func (q *queueBench) rawOne(ctx context.Context, j fetchedJob) error {
	return pgx.BeginFunc(ctx, q.raw, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, queueInsertEffect, j.id, j.key, int64(rawToken)); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, q.sql.complete, []int64{j.id}, []string{"completed"}, []int32{1},
			[]*int64{nil}, []*string{nil}, int64(rawToken))
		if err == nil && tag.RowsAffected() == 0 {
			err = fmt.Errorf("job %d was already finished", j.id)
		}
		return err
	})
}

// startSample starts the clock of burndown b and returns the process's
// counters at the start.
func (q *queueBench) startSample(b *burn) sample {
	s := sample{cpu: processCPU(), allocs: mallocs(), gcCPU: gcCPU()}
	b.start = time.Now()
	return s
}

// stallLimit fails a measurement in which no job finished for this long.
const stallLimit = 20 * time.Second

// await waits until b's last job finished or the cap passed, and returns
// the sample without latencies. s0 holds the counters startSample read.
func (q *queueBench) await(ctx context.Context, b *burn, s0 sample) (sample, error) {
	capTimer := time.NewTimer(q.f.duration - time.Since(b.start))
	defer capTimer.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastAt := int64(0), time.Now()
	var end time.Time
	short := false
wait:
	for {
		select {
		case <-b.finished:
			end = b.end
			break wait
		case <-capTimer.C:
			b.stopped.Store(true)
			end, short = time.Now(), true
			break wait
		case <-ctx.Done():
			b.stopped.Store(true)
			return sample{}, context.Cause(ctx)
		case now := <-tick.C:
			if d := b.done.Load(); d != last {
				last, lastAt = d, now
			} else if now.Sub(lastAt) > stallLimit {
				b.stopped.Store(true)
				return sample{}, fmt.Errorf("no job finished for %v (%d of %d finished); is the fetch or complete "+
					"statement in queue_sql.go still the Processor's?", stallLimit, d, b.want)
			}
		}
	}
	b.stopped.Store(true)
	return sample{
		ops:     int(min(b.done.Load(), b.want)),
		elapsed: end.Sub(b.start),
		short:   short,
		cpu:     processCPU() - s0.cpu,
		allocs:  mallocs() - s0.allocs,
		gcCPU:   gcCPU() - s0.gcCPU,
	}, nil
}

// newSystemPool opens a system's pool on the bench database: MaxConns
// conns, the tracer, and the plan cache mode if set.
func newSystemPool(ctx context.Context, base *pgxpool.Config, name string, conns int, t jobTracer, planCacheMode string) (*pgxpool.Pool, error) {
	pc := base.Copy()
	pc.MaxConns, pc.MinConns = int32(conns), 0
	pc.ConnConfig.Tracer = t
	pc.ConnConfig.RuntimeParams["application_name"] = "leasehold-bench-queue-" + name
	if planCacheMode != "" {
		pc.ConnConfig.RuntimeParams["plan_cache_mode"] = planCacheMode
	}
	return pgxpool.NewWithConfig(ctx, pc)
}

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The systems of the queue suite, in their default order.
const (
	sysQueueLeasehold = "leasehold"
	sysQueueRiver     = "river"
	sysQueueRaw       = "raw-sql"
	// sysQueueLimits is leasehold with limits declared on every handler
	// but never binding (--limits), compared with leasehold itself.
	sysQueueLimits = "leasehold+limits"
)

// queueSystems are the systems the suite knows, in the order they run in
// round 1 (later rounds rotate it).
var queueSystems = []string{sysQueueLeasehold, sysQueueRiver, sysQueueRaw}

// queueSystem is one implementation measured by the queue suite: leasehold
// (queue_leasehold.go), River (queue_river.go), or the raw-SQL limit on
// leasehold's tables (queue_raw.go). Each has a pool of the same size.
type queueSystem interface {
	name() string
	// settings describes how the system is configured, for the report.
	settings() string
	// reset empties the system's jobs and effects tables.
	reset(ctx context.Context) error
	// enqueue inserts jobs first..first+n-1 of case c in one call of the
	// system's batched insert and returns their ids in order (nil if the
	// system does not report them); enqueueOne inserts job i alone.
	enqueue(ctx context.Context, c string, first, n int) ([]int64, error)
	enqueueOne(ctx context.Context, c string, i int) error
	// checkpoint checkpoints, so that a measurement pays for no dirty
	// pages of the backlog's inserts. (It runs no ANALYZE.)
	checkpoint(ctx context.Context) error
	// start makes the system ready to process case c: finished jobs are
	// credited to b (a job counts when its completion has committed) and
	// started, if not nil, is called with a job's number (its args' N) when
	// its handler starts. Processing begins at the run's open.
	start(ctx context.Context, c string, b *burn, started func(n int)) (queueRun, error)
	// tally counts the jobs and effect rows in the system's tables.
	tally(ctx context.Context) (tally, error)
}

// queueRun is a system processing jobs.
type queueRun interface {
	// open lets processing begin (the clock has started).
	open() error
	// stop stops processing: jobs in flight finish and are recorded.
	stop(ctx context.Context) error
}

// tally is what a system's tables hold after a measurement.
type tally struct {
	total     int // jobs in the table
	completed int // completed on their first attempt
	waiting   int // not run yet (leasehold pending, River available)
	other     int // failed, discarded, cancelled, or completed on a later attempt
	effects   int // effect rows
	effectsOK int // effect rows of completed jobs
}

// noopJob is the no-op cases' job; its handler does nothing but report
// that it started (for the idle-latency case).
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

// keyOf returns the key of job i of case c: none for keyless, one key for
// every job of hot-key, in fair tenant A's key for A's jobs (the first
// --fair-jobs) and tenant B's for the others, else k<i mod --keys>.
func (q *queueBench) keyOf(c string, i int) string {
	switch c {
	case caseKeyless:
		return ""
	case caseHotKey:
		return hotKey
	case caseFair:
		if i < q.f.fairJobs {
			return fairKeyA
		}
		return q.f.fairB
	}
	return q.key(i)
}

// benchArgs is a job's args: both queue.Args and River's JobArgs.
type benchArgs interface{ Kind() string }

// jobArgs returns the args of job i of case c.
func jobArgs(c string, i int) benchArgs {
	if c == caseTxOneRow {
		return rowJob{N: i}
	}
	return noopJob{N: i}
}

// check verifies a measurement of case c in the system's tables: every job
// the system finished was completed exactly once on its first attempt (at
// least the counted ones; for a burndown that was not cut, all want), and
// for tx-one-row exactly one effect row per completed job. want < 0 skips
// the total's check (steady state, whose producer may have inserted more).
func checkTally(t tally, c string, want int, smp sample, complete bool) error {
	switch {
	case want >= 0 && t.total != want:
		return fmt.Errorf("%d jobs in the table, want %d", t.total, want)
	case t.other != 0:
		return fmt.Errorf("%d jobs failed, were discarded or ran more than once", t.other)
	case t.completed < smp.ops || (complete && t.completed != t.total):
		return fmt.Errorf("%d jobs completed, %d counted, %d in the table", t.completed, smp.ops, t.total)
	}
	if c == caseTxOneRow && (t.effects != t.completed || t.effectsOK != t.completed) {
		return fmt.Errorf("%d effect rows (%d of completed jobs) for %d completed jobs", t.effects, t.effectsOK, t.completed)
	}
	return nil
}

// newSystemPool opens a system's pool on database base: MaxConns conns,
// the tracer if not nil, and the plan cache mode if set.
func newSystemPool(ctx context.Context, base *pgxpool.Config, name string, conns int, t *jobTracer, planCacheMode string) (*pgxpool.Pool, error) {
	pc := base.Copy()
	pc.MaxConns, pc.MinConns = int32(conns), 0
	if t != nil {
		pc.ConnConfig.Tracer = t
	}
	pc.ConnConfig.RuntimeParams["application_name"] = "leasehold-bench-queue-" + name
	if planCacheMode != "" {
		pc.ConnConfig.RuntimeParams["plan_cache_mode"] = planCacheMode
	}
	return pgxpool.NewWithConfig(ctx, pc)
}

// startSample starts the clock of burndown b and returns the process's
// counters at the start.
func startSample(b *burn) sample {
	s := sample{cpu: processCPU(), allocs: mallocs(), gcCPU: gcCPU()}
	b.start = time.Now()
	return s
}

// stallLimit fails a measurement in which no job finished for this long.
const stallLimit = 20 * time.Second

// await waits until b's last job finished or d passed since b started, and
// returns the sample without latencies. s0 holds the counters startSample
// read.
func await(ctx context.Context, b *burn, s0 sample, d time.Duration) (sample, error) {
	capTimer := time.NewTimer(d - time.Since(b.start))
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

package queue

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/partition"
)

// waiting is a key whose next job is not due: the fetch's report that the
// key's later jobs wait behind job id for wait.
type waiting struct {
	key  string
	id   int64
	wait time.Duration
}

// fetchResult is what one fetch found.
type fetchResult struct {
	jobs    []fetched // in (priority, run_at, id) order
	waiting []waiting
	// scanned is how many due jobs the fetch looked at: less than it was
	// asked to, and the partition has no more due jobs it could see.
	scanned int
}

// fetch reads up to n due jobs of the partition (see queueFetch in internal/store),
// leaving out the jobs in flight, the keys in skip and the paused kinds.
func (p *Processor) fetch(ctx context.Context, o partition.Ownership, n int, inFlight []int64, skip []string) (res fetchResult, err error) {
	if p.trace.tracer != nil {
		defer p.trace.fetched(ctx, time.Now(), o, n, &res, &err)
	}
	if inFlight == nil {
		inFlight = []int64{}
	}
	if skip == nil {
		skip = []string{}
	}
	// In a read-only transaction without JIT: statistics that no longer fit
	// the table (say from a backlog of one key, kept after it was gone) can
	// make the planner estimate the per-key probes at many rows each, and
	// the estimate past jit_above_cost makes every fetch compile the plan:
	// measured at 770 ms a fetch instead of 3.6 ms.
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: "BEGIN READ ONLY; SET LOCAL jit = off"})
	if err != nil {
		return fetchResult{}, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // after the commit: a no-op
	paused := []string{}
	if ps := p.pauses.of(o.Group); ps != nil {
		paused = ps.kinds
	}
	rows, err := tx.Query(ctx, p.q.Fetch, o.Group, o.Partition, n, inFlight, skip, paused)
	if err != nil {
		return fetchResult{}, err
	}
	var f fetched
	var kind *string
	var attempt, max *int
	var created *time.Time
	var holds *bool
	var wait *int64
	var scanned int
	var runAt time.Time
	var batch *int64
	var item *string
	var prio *int16
	var maxSet *bool
	_, err = pgx.ForEachRow(rows, []any{&f.id, &f.key, &kind, &f.args, &attempt, &max, &created, &holds, &wait, &scanned, &runAt, &batch, &item,
		&prio, &maxSet, &f.trace}, func() error {
		res.scanned = scanned
		if kind == nil {
			res.waiting = append(res.waiting, waiting{key: f.key, id: f.id, wait: time.Duration(*wait) * time.Microsecond})
			return nil
		}
		j := f
		j.kind, j.attempt, j.max, j.created, j.holds, j.maxSet = *kind, *attempt, *max, *created, *holds, *maxSet
		if batch != nil {
			j.batch = *batch
		}
		if item != nil {
			j.item = *item
		}
		j.max = p.cfg.Workers.maxAttempts(j.kind, j.max, j.maxSet)
		res.jobs = append(res.jobs, j)
		f.args, f.trace = nil, nil // ForEachRow scans into the same variables: do not share them
		return nil
	})
	if err != nil {
		return fetchResult{}, err
	}
	return res, tx.Commit(ctx)
}

package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/queuehook"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// The test helpers (package leaseholdtest) run one job's handler inline
// through the code a Processor runs jobs with, so that the outcome rules,
// the fenced completion, the handlers' registration options and the hooks
// are the processor's, not a copy of them.
func init() {
	queuehook.Run = runInline
	queuehook.Jobs = jobsOfKind
	queuehook.PendingKinds = pendingKinds
	queuehook.Job = jobOn
}

// runInline runs the handler of pending job r.Job once, under the ownership
// r.Own returns, and records its outcome fenced: on the pool as the
// completer does (a transactional handler's run commits as inTx does), or
// in r.Tx without committing.
func runInline(ctx context.Context, r queuehook.Request) (queuehook.Result, error) {
	p, ok := r.Processor.(*Processor)
	if !ok || p == nil {
		return queuehook.Result{}, fmt.Errorf("%w: not a *queue.Processor: %T", ErrInvalidConfig, r.Processor)
	}
	var q fence.Querier = p.pool
	if r.Tx != nil {
		q = r.Tx
	}
	j, err := scanJob(q.QueryRow(ctx, p.q.Inspect, r.Job))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return queuehook.Result{}, fmt.Errorf("%w: %d", ErrNotFound, r.Job)
	case err != nil:
		return queuehook.Result{}, fmt.Errorf("queue: read job %d: %w", r.Job, err)
	case j.State != StatePending:
		return queuehook.Result{}, fmt.Errorf("queue: job %d is %s, not pending", j.ID, j.State)
	case !p.cfg.Workers.Handles(j.Kind):
		return queuehook.Result{}, fmt.Errorf("queue: job %d: no handler registered for kind %q", j.ID, j.Kind)
	}
	l, err := r.Own(ctx, j.Group, j.Partition)
	if err != nil {
		return queuehook.Result{}, err
	}
	o := partition.Ownership{Group: j.Group, Partition: j.Partition, Token: l.Token(), Lease: l}
	f := fetched{id: j.ID, key: j.Key, kind: j.Kind, args: j.Args, attempt: j.Attempt, maxSet: !j.DefaultMaxAttempts,
		created: j.CreatedAt, holds: j.Ordering == OrderStrict, batch: j.Batch, item: j.Item}
	f.max = p.cfg.Workers.maxAttempts(j.Kind, j.MaxAttempts, f.maxSet)
	if p.trace.tracer != nil { // the run's span joins the enqueuer's trace, as fetch reads it
		if err := q.QueryRow(ctx, p.q.Trace, j.ID).Scan(&f.trace); err != nil {
			return queuehook.Result{}, fmt.Errorf("queue: read job %d: %w", j.ID, err)
		}
	}
	rn := &run{p: p, o: o, log: p.log.With("group", o.Group, "partition", o.Partition, "token", int64(o.Token))}
	hctx, cancel := handlerContext(ctx, o, p.cfg.StopGrace)
	defer cancel()
	if !rn.settle(f) {
		h := p.cfg.Workers.handlers[f.kind]
		switch {
		case r.Tx != nil && h.tx:
			rn.runInTx(hctx, r.Tx, f, h)
		case h.runBatch != nil:
			rn.runBatch(hctx, []fetched{f}, h)
		default:
			rn.runOne(hctx, f, h)
		}
	}
	if len(rn.results) != 1 { // every path adds one result per job
		return queuehook.Result{}, fmt.Errorf("queue: job %d: %d results of one run", j.ID, len(rn.results))
	}
	res := rn.results[0]
	if res.rec != nil { // recorded here, as the completer would
		rctx, cancel := recordContext(ctx)
		defer cancel()
		if r.Tx != nil {
			refused := make([]error, 1)
			if _, err = p.recordIn(rctx, r.Tx, []grantOutcomes{{o, []outcome{*res.rec}}}, refused); err == nil {
				err = refused[0]
			}
		} else {
			_, err = p.recordOne(rctx, o, []outcome{*res.rec})
		}
		var fe *fence.FencedError
		switch {
		case errors.As(err, &fe):
			res.ev.Outcome, res.ev.Err = OutcomeFenced, err
		case err != nil:
			res.ev.Outcome, res.ev.Err = OutcomeUnrecorded, err
		}
	}
	p.report(res.ev)
	return queuehook.Result{Outcome: string(res.ev.Outcome), Err: res.ev.Err}, nil
}

// runInTx runs a transactional (or batch) handler for one job in a
// savepoint of tx, the caller's transaction, with the fence check and the
// job's completion; the savepoint is rolled back when the handler fails,
// whose outcome is then recorded in tx. Nothing is committed.
func (r *run) runInTx(hctx context.Context, tx pgx.Tx, f fetched, h handler) {
	w := r.work(f)
	jc := r.p.jobContext(hctx, h)
	defer jc.release()
	jctx := jc.ctx
	start := time.Now()
	fn := func(ctx context.Context, tx pgx.Tx) error { return call(ctx, h, tx, w) }
	if h.runBatch != nil {
		fn = callBatch(h, []*Work[rawArgs]{w})
	}
	sp, err := tx.Begin(jctx)
	if err == nil {
		if err = r.p.runIn(jctx, sp, r.o, []fetched{f}, fn, false); err == nil {
			err = sp.Commit(context.WithoutCancel(jctx)) // releases the savepoint
		} else {
			sp.Rollback(context.WithoutCancel(jctx))
		}
	}
	r.txResult(hctx, f, err, time.Since(start))
}

// jobsOfKind is queuehook.Jobs.
func jobsOfKind(ctx context.Context, db *leasehold.DB, q fence.Querier, kind string, limit int) (any, error) {
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, st.Queue.ByKind, kind, limit)
	if err != nil {
		return nil, fmt.Errorf("queue: jobs of kind %q: %w", kind, err)
	}
	defer rows.Close()
	var js []JobInfo
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("queue: jobs of kind %q: %w", kind, err)
		}
		js = append(js, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue: jobs of kind %q: %w", kind, err)
	}
	return js, nil
}

// pendingKinds is queuehook.PendingKinds.
func pendingKinds(ctx context.Context, db *leasehold.DB, q fence.Querier) (map[string]int, error) {
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, st.Queue.PendingKinds)
	if err != nil {
		return nil, fmt.Errorf("queue: pending kinds: %w", err)
	}
	defer rows.Close()
	kinds := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return nil, fmt.Errorf("queue: pending kinds: %w", err)
		}
		kinds[k] = n
	}
	return kinds, rows.Err()
}

// jobOn is queuehook.Job.
func jobOn(ctx context.Context, db *leasehold.DB, q fence.Querier, id int64) (any, error) {
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, err
	}
	j, err := scanJob(q.QueryRow(ctx, st.Queue.Inspect, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: read job %d: %w", id, err)
	}
	return j, nil
}

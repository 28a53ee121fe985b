package queue

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// An outcome of a batch item handed to the completion statement without
// its item flag (a bug: the statement changes no item) is not a silent
// no-op: the statement reports it, it is counted and logged at ERROR, and
// applied as an item (counted in batch_counts, finishing its batch). The
// plain job recorded with it is applied once (its retry spends one attempt,
// not two: the control that the rest is not recorded again).
func TestBatchItemOutcomeWithoutItsFlagIsReportedAndApplied(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('g', 1)`)
	pgtest.Must(t, err)
	var batch, item, plain int64
	pgtest.Must(t, pool.QueryRow(ctx, `INSERT INTO leasehold.batches (group_name, name, sealed_at) VALUES ('g', 'b', now()) RETURNING id`).Scan(&batch))
	pgtest.Must(t, pool.QueryRow(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at, batch_id, batch_item)
		VALUES ('g', 0, '', 'k', '{}', 3, now(), $1, 'i1') RETURNING id`, batch).Scan(&item))
	_, err = pool.Exec(ctx, `INSERT INTO leasehold.batch_totals (batch_id, partition, total) VALUES ($1, 0, 1)`, batch)
	pgtest.Must(t, err)
	pgtest.Must(t, pool.QueryRow(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at)
		VALUES ('g', 0, '', 'k', '{}', 3, now()) RETURNING id`).Scan(&plain))

	lc, err := lease.New(pgtest.DBOn(t, pool), lease.Config{Owner: "w", TTL: time.Minute})
	pgtest.Must(t, err)
	t.Cleanup(func() { lc.Close(context.Background()) })
	l, err := lc.TryAcquire(ctx, partition.LeaseName("g", 0))
	pgtest.Must(t, err)
	o := partition.Ownership{Group: "g", Partition: 0, Token: l.Token(), Lease: l}
	p, err := NewProcessor(pgtest.DBOn(t, pool), ProcessorConfig{Workers: NewWorkers()})
	pgtest.Must(t, err)
	msg := "failed"
	us := int64(time.Hour.Microseconds())
	n, err := p.recordOne(ctx, o, []outcome{
		{id: plain, state: "pending", spent: 1, delay: &us, err: &msg},
		{id: item, state: "completed", spent: 1}, // item: false, the bug
	})
	pgtest.Must(t, err)
	if n != 2 {
		t.Errorf("%d jobs changed; want 2", n)
	}
	if u := p.unapplied.Load(); u != 1 {
		t.Errorf("%d unapplied outcomes counted; want 1", u)
	}
	var state string
	var completed int64
	var finished bool
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT j.state, coalesce(c.completed, 0), b.finished_at IS NOT NULL
		FROM leasehold.jobs AS j JOIN leasehold.batches AS b ON b.id = j.batch_id
		LEFT JOIN leasehold.batch_counts AS c ON c.batch_id = j.batch_id AND c.partition = j.partition
		WHERE j.id = $1`, item).Scan(&state, &completed, &finished))
	if state != "completed" || completed != 1 || !finished {
		t.Errorf("item %s, counted %d completed, batch finished %v; want completed, counted once, finished", state, completed, finished)
	}
	var attempt int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT attempt FROM leasehold.jobs WHERE id = $1`, plain).Scan(&attempt))
	if attempt != 1 {
		t.Errorf("control: the plain job's retry spent %d attempts; want 1 (recorded once)", attempt)
	}
}

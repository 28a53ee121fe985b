package queue_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// A job finished by someone else (an operator cancelling it) while its
// handler runs is left alone: the transactional handler's effects roll back,
// and neither handler's completion overwrites the cancellation.
func TestJobFinishedElsewhereWhileRunningIsLeftAlone(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ledgerSetup(t, pool)
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	wait := func(ctx context.Context) error {
		started <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
		if err := record(ctx, tx, w); err != nil {
			return err
		}
		if w.Args.Seq == 1 {
			return wait(ctx)
		}
		return nil
	})
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		if w.Args.Name == "block" {
			return wait(ctx)
		}
		return nil
	})
	// Keys in different partitions, so both handlers run at once.
	txKey, plainKey := keysIn(1, 1, "tx")[0], keysIn(2, 1, "plain")[0]
	res, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: txKey, Args: deposit{Seq: 1}},
		queue.Job{Group: "emails", Key: plainKey, Args: step{"block"}})
	pgtest.Must(t, err)
	startWorker(t, pool, "w1", ws, nil)
	for range 2 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("handlers did not start")
		}
	}
	_, err = pool.Exec(ctx, `UPDATE leasehold.jobs SET state = 'cancelled', finished_at = clock_timestamp()
		WHERE id = ANY($1)`, []int64{res[0].ID, res[1].ID})
	pgtest.Must(t, err)
	close(release)
	// A job of each key enqueued now runs after its partition recorded the
	// outcomes of the blocked batch.
	_, err = c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: txKey, Args: deposit{Seq: 2}},
		queue.Job{Group: "emails", Key: plainKey, Args: step{"after"}})
	pgtest.Must(t, err)
	pgtest.WaitNoPendingJobs(t, pool, 10*time.Second)

	var rows int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM ledger WHERE job_id = $1`, res[0].ID).Scan(&rows))
	if rows != 0 {
		t.Errorf("the cancelled job's transactional effects committed (%d ledger rows); want them rolled back", rows)
	}
	for _, id := range []int64{res[0].ID, res[1].ID} {
		var state string
		var attempt int
		var token string
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT state, attempt, coalesce(finished_token::text, 'null') FROM leasehold.jobs WHERE id = $1`, id).Scan(&state, &attempt, &token))
		if state != "cancelled" || attempt != 0 || token != "null" {
			t.Errorf("job %d: %s, attempt %d, finished_token %s; want left as cancelled, 0, null", id, state, attempt, token)
		}
	}
}

// A handler that finishes its job after the handoff began (it returns nil)
// has its completion recorded before Run returns: the next owner does not
// run the job again.
func TestHandoffRecordsOutcomesOfJobsThatRan(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	started := make(chan struct{})
	var once sync.Once
	var runs atomic.Int32
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		runs.Add(1)
		once.Do(func() { close(started) })
		<-ctx.Done()
		return nil // finished its work anyway
	})
	_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: step{"finishes"}})
	pgtest.Must(t, err)
	m := startWorker(t, pool, "w1", ws, nil)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not start")
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pgtest.Must(t, m.Stop(sctx))
	var state string
	var attempt, errs int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT state, attempt, jsonb_array_length(errors) FROM leasehold.jobs`).Scan(&state, &attempt, &errs))
	if state != "completed" || attempt != 1 || errs != 0 || runs.Load() != 1 {
		t.Fatalf("after a handoff: %s, attempt %d, %d errors, %d runs; want completed, 1, 0, 1", state, attempt, errs, runs.Load())
	}
}

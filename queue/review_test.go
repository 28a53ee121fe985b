package queue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// keysIn returns n distinct keys of partition p (of the 8 of "emails").
func keysIn(p, n int, prefix string) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := fmt.Sprintf("%s-%d", prefix, i); partition.OfString(k, 8) == p {
			keys = append(keys, k)
		}
	}
	return keys
}

// The owner takes the due jobs of a partition in (run_at, id) order, not in
// id order: a job enqueued later but due earlier runs first.
func TestDueJobsRunInRunAtThenIDOrder(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool, c := setup(t)
	var mu sync.Mutex
	var ran []string
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		mu.Lock()
		ran = append(ran, w.Args.Name)
		mu.Unlock()
		return nil
	})
	// Five jobs of distinct keys in one partition, each enqueued later but
	// due earlier than the one before it; the last two are due at the same
	// time, so id breaks the tie.
	now := time.Now()
	keys := keysIn(3, 5, "due")
	var jobs []queue.Job
	runAts := []time.Duration{-1 * time.Minute, -2 * time.Minute, -3 * time.Minute, -4 * time.Minute, -4 * time.Minute}
	for i, k := range keys {
		jobs = append(jobs, queue.Job{Group: "emails", Key: k, Args: step{fmt.Sprint(i)}, RunAt: now.Add(runAts[i])})
	}
	_, err := c.EnqueueMany(ctx, jobs...) // all due before the owner's first fetch
	pgtest.Must(t, err)
	// One at a time, so that the handlers record the order they started in.
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PartitionConcurrency: 1}, false)
	waitFinished(t, pool, 10*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"3", "4", "2", "1", "0"}; !slices.Equal(ran, want) {
		t.Fatalf("ran %v; want %v ((run_at, id) order)", ran, want)
	}
}

// A job finished by someone else (an operator cancelling it) while its
// handler runs is left alone: the transactional handler's effects roll back,
// and neither handler's completion overwrites the cancellation.
func TestJobFinishedElsewhereWhileRunningIsLeftAlone(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
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
	waitFinished(t, pool, 10*time.Second)

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
	ctx := ctxT(t)
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

package queue_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// Stats counts every partition, idle ones included: due, scheduled and
// retrying pending jobs, and the age of the oldest due one; finished jobs
// are not counted.
func TestStats(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	k1, k2, k3 := keysIn(1, 3, "a"), keysIn(2, 2, "b"), keysIn(3, 2, "c")
	job := func(key string, runAt time.Time) queue.Job {
		return queue.Job{Group: "emails", Key: key, Args: email{To: key}, RunAt: runAt}
	}
	later := time.Now().Add(time.Hour)
	res, err := c.EnqueueMany(ctx,
		job(k1[0], time.Time{}), job(k1[1], time.Time{}), job(k1[2], later), // partition 1: 2 due, 1 scheduled
		job(k2[0], later), job(k2[1], later), // partition 2: 2 scheduled
		job(k3[0], time.Time{}), job(k3[1], time.Time{})) // partition 3: finished below
	pgtest.Must(t, err)
	// Partition 1: the first job due for an hour (database clock), the
	// second failed once and is due again; partition 2: one scheduled job
	// failed once (waiting for its retry).
	_, err = pool.Exec(ctx, `UPDATE leasehold.jobs SET run_at = clock_timestamp() - interval '1 hour' WHERE id = $1`, res[0].ID)
	pgtest.Must(t, err)
	_, err = pool.Exec(ctx, `UPDATE leasehold.jobs SET attempt = 1 WHERE id = ANY($1)`, []int64{res[1].ID, res[3].ID})
	pgtest.Must(t, err)
	_, err = pool.Exec(ctx, `UPDATE leasehold.jobs SET state = s, finished_at = clock_timestamp(), attempt = 1
		FROM (VALUES ($1::bigint, 'completed'), ($2, 'discarded')) AS v(id, s) WHERE jobs.id = v.id`, res[5].ID, res[6].ID)
	pgtest.Must(t, err)

	stats, err := c.Stats(ctx, "emails")
	pgtest.Must(t, err)
	if len(stats) != 8 {
		t.Fatalf("%d partitions; want 8: %+v", len(stats), stats)
	}
	p1 := stats[1]
	if p1.OldestDue < time.Hour || p1.OldestDue > time.Hour+time.Minute {
		t.Errorf("partition 1: oldest due %v; want about 1h", p1.OldestDue)
	}
	want := []queue.PartitionStats{1: {Partition: 1, Pending: 2, Scheduled: 1, Retrying: 1, OldestDue: p1.OldestDue},
		2: {Partition: 2, Scheduled: 2, Retrying: 1}, 7: {}}
	for p := range want {
		want[p].Partition = p
	}
	if !slices.Equal(stats, want) {
		t.Fatalf("stats\n%+v\nwant\n%+v", stats, want)
	}
}

func TestStatsUnknownGroup(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	if _, err := c.Stats(pgtest.Context(t), "nope"); !errors.Is(err, queue.ErrUnknownGroup) {
		t.Fatalf("stats of an unknown group: %v; want ErrUnknownGroup", err)
	}
}

// Cancel finishes pending jobs only, records why, and returns what it
// changed; Retry brings a cancelled job back.
func TestCancel(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	res, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: "a", Args: email{To: "a"}},
		queue.Job{Group: "emails", Key: "b", Args: email{To: "b"}},
		queue.Job{Group: "emails", Key: "c", Args: email{To: "c"}})
	pgtest.Must(t, err)
	done := res[2].ID
	_, err = pool.Exec(ctx, `UPDATE leasehold.jobs SET state = 'completed', finished_at = clock_timestamp(), finished_token = 7 WHERE id = $1`, done)
	pgtest.Must(t, err)

	got, err := c.Cancel(ctx, res[1].ID, done, res[0].ID, 999999)
	pgtest.Must(t, err)
	if want := []int64{res[0].ID, res[1].ID}; !slices.Equal(got, want) {
		t.Fatalf("cancelled %v; want %v (the pending ones, in order)", got, want)
	}
	for _, id := range got {
		j, err := c.JobInfo(ctx, id)
		pgtest.Must(t, err)
		errs := j.Errors
		if j.State != "cancelled" || j.FinishedAt == nil || j.FinishedToken != nil || len(errs) != 1 ||
			errs[0].Error != "cancelled by an operator" {
			t.Errorf("job %d after cancel: %+v", id, j)
		}
	}
	j, err := c.JobInfo(ctx, done)
	pgtest.Must(t, err)
	if j.State != "completed" || j.FinishedToken == nil || *j.FinishedToken != 7 || j.Errors == nil || len(j.Errors) != 0 {
		t.Errorf("a completed job was changed by cancel: %+v", j)
	}
	if again, err := c.Cancel(ctx, got...); err != nil || len(again) != 0 {
		t.Errorf("cancelling cancelled jobs: %v, %v; want nothing changed", again, err)
	}
	if none, err := c.Cancel(ctx); err != nil || len(none) != 0 {
		t.Errorf("cancelling no ids: %v, %v", none, err)
	}
	back, err := c.Retry(ctx, res[0].ID)
	pgtest.Must(t, err)
	if j, _ := c.JobInfo(ctx, res[0].ID); len(back) != 1 || j.State != "pending" {
		t.Errorf("retry of a cancelled job: %v, state %s; want it pending", back, j.State)
	}
}

// An operator cancels jobs while their handlers run. The cancelled
// transactional job's effect rolls back, while the one not cancelled, run
// side by side, commits (the control: the ledger check sees effects). The
// plain handler's effect has happened, but the job stays cancelled.
func TestCancelWhileRunning(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ledgerSetup(t, pool)
	started := make(chan struct{}, 3)
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
	var plainEffects atomic.Int32
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
		if err := record(ctx, tx, w); err != nil {
			return err
		}
		return wait(ctx)
	})
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		plainEffects.Add(1)
		return wait(ctx)
	})
	// Keys in different partitions, so the three handlers run at once.
	res, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: keysIn(1, 1, "tx")[0], Args: deposit{Seq: 1}},
		queue.Job{Group: "emails", Key: keysIn(2, 1, "tx")[0], Args: deposit{Seq: 2}},
		queue.Job{Group: "emails", Key: keysIn(3, 1, "plain")[0], Args: step{"plain"}})
	pgtest.Must(t, err)
	cancelledTx, keptTx, plain := res[0].ID, res[1].ID, res[2].ID
	startWorker(t, pool, "w1", ws, nil)
	for range 3 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("handlers did not start")
		}
	}
	got, err := c.Cancel(ctx, cancelledTx, plain)
	pgtest.Must(t, err)
	if want := []int64{cancelledTx, plain}; !slices.Equal(got, want) {
		t.Fatalf("cancelled %v; want %v", got, want)
	}
	close(release)
	pgtest.WaitNoPendingJobs(t, pool, 10*time.Second)

	rows := func(id int64) int {
		var n int
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM ledger WHERE job_id = $1`, id).Scan(&n))
		return n
	}
	if n := rows(keptTx); n != 1 {
		t.Fatalf("the job not cancelled has %d ledger rows; want 1", n)
	}
	if n := rows(cancelledTx); n != 0 {
		t.Errorf("the cancelled transactional job's effect committed (%d ledger rows); want it rolled back", n)
	}
	if plainEffects.Load() != 1 {
		t.Errorf("plain handler ran %d times; want 1", plainEffects.Load())
	}
	for id, want := range map[int64]queue.JobState{cancelledTx: "cancelled", plain: "cancelled", keptTx: "completed"} {
		j, err := c.JobInfo(ctx, id)
		pgtest.Must(t, err)
		if j.State != want {
			t.Errorf("job %d: %s; want %s", id, j.State, want)
		}
	}
}

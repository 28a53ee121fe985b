package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/periodic"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

type beat struct {
	Slot time.Time `json:"slot"`
}

func (beat) Kind() string { return "beat" }

// TestSchedulesRunOncePerSlotAcrossWorkers runs a schedule on two workers;
// the leader's worker stops half way: each slot's job runs once (a
// transactional handler records it; the primary key would refuse a second
// run of a slot, failing the job), and the slots keep coming after the stop.
func TestSchedulesRunOncePerSlotAcrossWorkers(t *testing.T) {
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	_, err := pool.Exec(ctx, `CREATE TABLE beats (slot timestamptz PRIMARY KEY, job_id bigint NOT NULL)`)
	pgtest.Must(t, err)
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[beat]) error {
		_, err := tx.Exec(ctx, `INSERT INTO beats (slot, job_id) VALUES ($1, $2)`, w.Args.Slot, w.ID)
		return err
	})
	scheds := []periodic.Schedule{{Name: "beat", Every: 100 * time.Millisecond,
		Job: func(slot time.Time) queue.Job { return queue.Job{Args: beat{Slot: slot}} }}}
	count := func() (n int) {
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM beats`).Scan(&n))
		return n
	}
	a := start(t, pool, worker.Config{ID: "a", Workers: ws, Schedules: scheds})
	b := start(t, pool, worker.Config{ID: "b", Workers: ws, Schedules: scheds})
	deadline := time.Now().Add(30 * time.Second)
	for count() < 5 {
		if time.Now().After(deadline) {
			t.Fatal("the schedule never ran 5 times")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Stop the leader's worker: the one owning the group's live periodic
	// lease.
	var leader string
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT owner FROM leasehold.leases
		WHERE name = 'periodic/g' AND expires_at > clock_timestamp()`).Scan(&leader))
	stopped, other := a, b
	switch leader {
	case "a":
	case "b":
		stopped, other = b, a
	default:
		t.Fatalf("the periodic lease is held by %q, not a worker", leader)
	}
	pgtest.Must(t, stopped.Stop(ctx))
	n := count()
	for count() < n+5 {
		if time.Now().After(deadline) {
			t.Fatalf("the schedule stopped after the leader's worker %s stopped", leader)
		}
		time.Sleep(20 * time.Millisecond)
	}
	pgtest.Must(t, other.Stop(ctx)) // running jobs finish and record their outcomes
	var failed, slots, jobs int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE attempt > 1 OR (attempt = 1 AND state <> 'completed')),
		count(DISTINCT args->>'slot'), count(*) FROM leasehold.jobs WHERE kind = 'beat'`).Scan(&failed, &slots, &jobs))
	if failed != 0 || slots != jobs {
		t.Fatalf("%d jobs for %d slots, %d retried or failed: a slot ran or was enqueued twice", jobs, slots, failed)
	}
}

func TestBadScheduleRefusedByNew(t *testing.T) {
	_, err := worker.New(pgtest.DBOn(t, pgtest.Pool(t)), worker.Config{Group: "g", Workers: queue.NewWorkers(),
		Schedules: []periodic.Schedule{{Name: "bad", Cron: "not cron", Job: func(time.Time) queue.Job { return queue.Job{} }}}})
	if !errors.Is(err, worker.ErrInvalidConfig) || !errors.Is(err, periodic.ErrInvalidSchedule) {
		t.Fatalf("worker.New with a bad cron: %v", err)
	}
}

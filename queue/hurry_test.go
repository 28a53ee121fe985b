package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// A transactional job behind its key's plain job commits only after that
// job's outcome is recorded, and asks for it to be recorded at once: with
// CompleteInterval an hour, it still runs. The control: a plain job alone
// stays unrecorded after its run (the interval holds), until Stop records
// it.
func TestTransactionalJobHurriesItsKeysOutcomes(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ledgerSetup(t, pool)
	ran := make(chan string, 4)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(_ context.Context, w *queue.Work[step]) error {
		ran <- w.Args.Name
		return nil
	})
	queue.HandleTx(ws, record)
	_, m := groupMember(t, pool, "emails", 8, queue.ProcessorConfig{Workers: ws, CompleteInterval: time.Hour,
		PollInterval: 20 * time.Millisecond}, false)

	res, err := c.EnqueueMany(ctx, queue.Job{Group: "emails", Key: "acct", Args: step{"plain"}},
		queue.Job{Group: "emails", Key: "acct", Args: deposit{Seq: 1}})
	pgtest.Must(t, err)
	waitUntil(t, "the transactional job behind a plain one runs", func() bool {
		var n int
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&n))
		return n == 1
	})
	var plainDone, txDone time.Time
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT finished_at FROM leasehold.jobs WHERE id = $1`, res[0].ID).Scan(&plainDone))
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT finished_at FROM leasehold.jobs WHERE id = $1`, res[1].ID).Scan(&txDone))
	if !plainDone.Before(txDone) {
		t.Fatalf("the plain job was recorded at %v, the transactional one behind it at %v", plainDone, txDone)
	}

	// Control: nothing hurries a lone plain job's outcome.
	lone, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "other", Args: step{"lone"}})
	pgtest.Must(t, err)
	for name := ""; name != "lone"; {
		select {
		case name = <-ran:
		case <-ctx.Done():
			t.Fatal("the lone job never ran")
		}
	}
	time.Sleep(time.Second)
	state := func() string {
		var s string
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT state FROM leasehold.jobs WHERE id = $1`, lone.ID).Scan(&s))
		return s
	}
	if s := state(); s != "pending" {
		t.Fatalf("control: the lone job is %s a second after its run; want it unrecorded (pending) for CompleteInterval", s)
	}
	pgtest.Must(t, m.Stop(ctx))
	if s := state(); s != "completed" {
		t.Fatalf("after Stop the lone job is %s; want its outcome recorded", s)
	}
}

// A backlog never waits on CompleteInterval: a partition whose window is
// full of jobs whose outcomes wait to be recorded has them recorded at
// once. With CompleteInterval an hour and a window of 4 (the completer
// flushes at BatchSize, 100, outcomes: more than 8 windows hold), 40 keyless jobs
// (5 per partition) all run; without it, each partition would stop after
// its first 4 until the interval passed (the control of
// TestTransactionalJobHurriesItsKeysOutcomes shows the interval holds when
// nothing hurries it).
func TestFullWindowHurriesItsOutcomes(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ran := make(chan string, 40)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(_ context.Context, w *queue.Work[step]) error {
		ran <- w.Args.Name
		return nil
	})
	groupMember(t, pool, "emails", 8, queue.ProcessorConfig{Workers: ws, CompleteInterval: time.Hour, Window: 4,
		PollInterval: 20 * time.Millisecond}, false)
	var jobs []queue.Job
	for i := range 40 {
		jobs = append(jobs, queue.Job{Group: "emails", Args: step{fmt.Sprint(i)}})
	}
	_, err := c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	for i := range 40 {
		select {
		case <-ran:
		case <-ctx.Done():
			t.Fatalf("%d of 40 jobs ran: the full windows waited for CompleteInterval", i)
		}
	}
}

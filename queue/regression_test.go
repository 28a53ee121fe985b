package queue_test

// Regressions for review findings.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// An error message PostgreSQL cannot store as text (a NUL byte, invalid
// UTF-8) must not stop the batch's outcomes from being recorded.
func TestUnstorableErrorMessageDoesNotPoisonTheBatch(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool, c := setup(t)
	var okRuns atomic.Int32
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		if w.Args.Name == "poison" {
			return errors.New("bad input \x00\xff")
		}
		okRuns.Add(1)
		return nil
	})
	keys := keysIn(5, 2, "poison")
	_, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: keys[0], Args: step{"poison"}, MaxAttempts: 2},
		queue.Job{Group: "emails", Key: keys[1], Args: step{"ok"}})
	pgtest.Must(t, err)
	startWorker(t, pool, "w1", ws, nil)
	time.Sleep(2 * time.Second)
	var pending int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE state = 'pending'`).Scan(&pending))
	if pending != 0 || okRuns.Load() != 1 {
		t.Fatalf("%d jobs pending, the good job ran %d times; want 0 pending and 1 run", pending, okRuns.Load())
	}
}

// The result mapping must give each input its own id. A BEFORE trigger
// holds the second row while the pending job holding the unique key is
// finished: the statement then skips input 0 and inserts input 1.
func TestEnqueueMappingSurvivesAUniqueKeyFreedMidStatement(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool, c := setup(t)
	_, err := pool.Exec(ctx, `CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.args->>'to' = 'second' THEN PERFORM pg_sleep(1); END IF; RETURN NEW; END $$;
		CREATE TRIGGER slow BEFORE INSERT ON leasehold.jobs FOR EACH ROW EXECUTE FUNCTION slow()`)
	pgtest.Must(t, err)
	holder, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: email{To: "holder"}, UniqueKey: "u"})
	pgtest.Must(t, err)
	var res []queue.Enqueued
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, err = c.EnqueueMany(ctx,
			queue.Job{Group: "emails", Key: "k", Args: email{To: "first"}, UniqueKey: "u"},
			queue.Job{Group: "emails", Key: "k", Args: email{To: "second"}, UniqueKey: "u"})
	}()
	time.Sleep(300 * time.Millisecond)
	_, err2 := pool.Exec(ctx, `UPDATE leasehold.jobs SET state = 'completed', finished_at = clock_timestamp() WHERE id = $1`, holder.ID)
	pgtest.Must(t, err2)
	wg.Wait()
	pgtest.Must(t, err)
	for i, want := range []string{"first", "second"} {
		if res[i].Duplicate {
			continue
		}
		var to string
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT args->>'to' FROM leasehold.jobs WHERE id = $1`, res[i].ID).Scan(&to))
		if to != want {
			t.Errorf("input %d (%s) got id %d, whose args are %q's", i, want, res[i].ID, to)
		}
	}
}

type ptrKind struct{ N int }

func (ptrKind) Kind() string { return "ptr_kind" }

// A typed nil Args is bad input: it must give an error, not a panic.
func TestTypedNilArgsIsAnError(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	_, c := setup(t)
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Enqueue panicked: %v", r)
		}
	}()
	_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: (*ptrKind)(nil)})
	if !errors.Is(err, queue.ErrInvalidJob) {
		t.Fatalf("err = %v; want ErrInvalidJob", err)
	}
}

// A zombie transactional handler (paused past its lease while holding a row
// lock in tx) must be cut off by the fence's idle timeout, as fence.Postgres
// promises; the new owner then runs the job. The timeouts are set only at
// the fence check, after the handler, so the new owner waits on the zombie.
func TestZombieHandlerTransactionIsCutOff(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool, c := setup(t)
	_, err := pool.Exec(ctx, `CREATE TABLE accounts (id int PRIMARY KEY, n int NOT NULL); INSERT INTO accounts VALUES (1, 0)`)
	pgtest.Must(t, err)
	bump := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE accounts SET n = n + 1 WHERE id = 1`)
		return err
	}
	stalled, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	defer func() {
		select {
		case <-resume:
		default:
			close(resume)
		}
	}()
	wsA := queue.NewWorkers()
	queue.HandleTx(wsA, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
		if err := bump(ctx, tx); err != nil {
			return err
		}
		once.Do(func() { close(stalled) })
		<-resume
		return nil
	})
	startWorker(t, pool, "a", wsA, fakeclock.New(time.Now()))
	_, err = c.Enqueue(ctx, queue.Job{Group: "emails", Key: "acct-1", Args: deposit{Seq: 1}})
	pgtest.Must(t, err)
	<-stalled
	wsB := queue.NewWorkers()
	queue.HandleTx(wsB, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error { return bump(ctx, tx) })
	startWorker(t, pool, "b", wsB, nil)
	waitFinished(t, pool, 12*time.Second) // lease TTL 1s + fence IdleTimeout 5s + slack
}

// Args of a pointer type work end to end (registration must not call Kind
// on a nil pointer).
func TestPointerArgs(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool, c := setup(t)
	got := make(chan int, 1)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[*ptrKind]) error {
		got <- w.Args.N
		return nil
	})
	_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: &ptrKind{N: 7}})
	pgtest.Must(t, err)
	startWorker(t, pool, "w1", ws, nil)
	select {
	case n := <-got:
		if n != 7 {
			t.Fatalf("handler got N = %d; want 7", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pointer-args job never ran")
	}
}

package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/queue"
	"sync"
)

// A transactional handler that returns nil but broke its transaction (it
// ignored an error that aborted it, left it idle past the fence's idle
// timeout, or committed it itself) fails its attempt: the job is retried,
// then discarded, instead of running again at once, forever, without
// spending an attempt.
func TestHandlerThatBreaksItsTransactionSpendsAnAttempt(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		h    func(ctx context.Context, tx pgx.Tx) error
		idle time.Duration // the fence's idle-in-transaction timeout
		want string        // in the recorded errors; defaults to "broke its transaction"
	}{
		"ignored error": {h: func(ctx context.Context, tx pgx.Tx) error {
			tx.Exec(ctx, `SELECT 1/0`)
			return nil
		}},
		"idle timeout": {idle: 200 * time.Millisecond, h: func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
				return err
			}
			time.Sleep(2 * time.Second) // 10 × the idle timeout
			return nil
		}},
		// Commit is refused (ErrTxManaged); returning its error fails the
		// attempt.
		"committed itself": {want: "committed or rolled back by its runner",
			h: func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := pgtest.Context(t)
			pool, c := setup(t)
			ws := queue.NewWorkers()
			queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error { return tc.h(ctx, tx) })
			res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: deposit{}, MaxAttempts: 2})
			pgtest.Must(t, err)
			member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
				MinRetry: time.Millisecond, MaxRetry: time.Millisecond,
				Fence: lease.FenceConfig{IdleTimeout: tc.idle}}, false)
			pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
			info, err := c.JobInfo(ctx, res.ID)
			pgtest.Must(t, err)
			want := tc.want
			if want == "" {
				want = "broke its transaction"
			}
			if info.State != "discarded" || info.Attempt != 2 || !strings.Contains(errorsText(info.Errors), want) {
				t.Fatalf("job %s after %d attempts, errors %s; want discarded after 2", info.State, info.Attempt, errorsText(info.Errors))
			}
		})
	}
}

// A zombie transactional handler (paused past its lease while holding a row
// lock in tx) must be cut off by the fence's idle timeout, as lease.Fence
// promises; the new owner then runs the job. The timeouts are set only at
// the fence check, after the handler, so the new owner waits on the zombie.
func TestZombieHandlerTransactionIsCutOff(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
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
	aClock := fakeclock.New(time.Now())
	startWorker(t, pool, "a", wsA, aClock)
	_, err = c.Enqueue(ctx, queue.Job{Group: "emails", Key: "acct-1", Args: deposit{Seq: 1}})
	pgtest.Must(t, err)
	tickUntil(t, aClock, stalled)
	wsB := queue.NewWorkers()
	queue.HandleTx(wsB, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error { return bump(ctx, tx) })
	startWorker(t, pool, "b", wsB, nil)
	pgtest.WaitNoPendingJobs(t, pool, 12*time.Second) // lease TTL 1s + fence IdleTimeout 5s + slack
}

// A transactional handler that ends its transaction itself with a raw
// COMMIT (tx.Exec, which the managed transaction cannot refuse) fails its
// run with lease.ErrTxEnded: the job's completion and the fence check are
// not run in autocommit after it (the job would be recorded completed while
// its effects committed unfenced). The attempt is spent, so the bug cannot
// apply its effects without end: the job is discarded after MaxAttempts.
func TestHandlerRawCommitFailsTheRun(t *testing.T) {
	t.Parallel()
	// The raw COMMIT is found whether the handler then returns nil or an
	// error of its own.
	for _, fails := range []bool{false, true} {
		t.Run(fmt.Sprintf("handler error %v", fails), func(t *testing.T) {
			t.Parallel()
			ctx := pgtest.Context(t)
			pool, c := setup(t)
			ledgerSetup(t, pool)
			ws := queue.NewWorkers()
			queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
				if err := record(ctx, tx, w); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "COMMIT") // the bug
				if err == nil && fails {
					err = errors.New("and then failed")
				}
				return err
			})
			var mu sync.Mutex
			var evs []queue.JobEvent
			res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: deposit{}, MaxAttempts: 2})
			pgtest.Must(t, err)
			member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
				MinRetry: time.Millisecond, MaxRetry: time.Millisecond,
				Hooks: queue.Hooks{OnJob: func(e queue.JobEvent) {
					mu.Lock()
					defer mu.Unlock()
					evs = append(evs, e)
				}}}, false)
			pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
			info, err := c.JobInfo(ctx, res.ID)
			pgtest.Must(t, err)
			ended := 0
			for _, e := range info.Errors {
				ended += strings.Count(e.Error, "ended its managed transaction itself")
			}
			if info.State != queue.StateDiscarded || info.Attempt != 2 || ended != 2 {
				t.Fatalf("job %s after %d attempts, errors %+v; want discarded after 2 failed runs reporting lease.ErrTxEnded", info.State, info.Attempt, info.Errors)
			}
			var applied int
			pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&applied))
			// A run's event is reported just after its outcome's commit.
			waitUntil(t, "two events", func() bool { mu.Lock(); defer mu.Unlock(); return len(evs) >= 2 })
			mu.Lock()
			defer mu.Unlock()
			if applied != 2 || len(evs) != 2 {
				t.Fatalf("%d effects committed, %d events; want one per run (2)", applied, len(evs))
			}
			for i, e := range evs {
				if !errors.Is(e.Err, lease.ErrTxEnded) || e.Outcome == queue.OutcomeCompleted {
					t.Errorf("event %d: %s, %v; want a failed run with lease.ErrTxEnded", i, e.Outcome, e.Err)
				}
			}
		})
	}
}

// A COMMIT the server refuses with an ERROR (here a deferred foreign key
// the handler's effects violate) is known to have applied nothing and is
// the handler's failure: it spends an attempt, and the job is discarded
// after MaxAttempts instead of rerunning forever without spending one.
func TestCommitRefusedByADeferredConstraintSpendsAnAttempt(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	_, err := pool.Exec(ctx, `CREATE TABLE parent (id int PRIMARY KEY);
		CREATE TABLE child (parent int REFERENCES parent DEFERRABLE INITIALLY DEFERRED)`)
	pgtest.Must(t, err)
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
		_, err := tx.Exec(ctx, `INSERT INTO child VALUES (42)`) // checked at COMMIT
		return err
	})
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: deposit{}, MaxAttempts: 2})
	pgtest.Must(t, err)
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		MinRetry: time.Millisecond, MaxRetry: time.Millisecond}, false)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	info, err := c.JobInfo(ctx, res.ID)
	pgtest.Must(t, err)
	var children int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM child`).Scan(&children))
	if info.State != "discarded" || info.Attempt != 2 || strings.Count(errorsText(info.Errors), "did not commit") != 2 || children != 0 {
		t.Fatalf("job %s after %d attempts, errors %s, %d rows committed; want discarded after 2 refused commits, nothing committed",
			info.State, info.Attempt, errorsText(info.Errors), children)
	}
}

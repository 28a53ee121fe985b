package queue_test

import (
	"context"
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
	startWorker(t, pool, "a", wsA, fakeclock.New(time.Now()))
	_, err = c.Enqueue(ctx, queue.Job{Group: "emails", Key: "acct-1", Args: deposit{Seq: 1}})
	pgtest.Must(t, err)
	<-stalled
	wsB := queue.NewWorkers()
	queue.HandleTx(wsB, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error { return bump(ctx, tx) })
	startWorker(t, pool, "b", wsB, nil)
	pgtest.WaitNoPendingJobs(t, pool, 12*time.Second) // lease TTL 1s + fence IdleTimeout 5s + slack
}

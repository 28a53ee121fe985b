package queue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

type chain struct {
	N    int  `json:"n"`
	Fail bool `json:"fail"`
}

func (chain) Kind() string { return "chain" }

// A transactional handler that enqueues its job's successor under the
// job's own unique key, in its transaction, gets a new job, not a
// duplicate: the key passes to the successor as the job completes. Its
// failed run's successor rolls back with it. Meanwhile the key still
// refuses an enqueue from outside while the job is pending and running
// (the control), and the chain ends with the key free.
func TestSuccessorTakesTheUniqueKeyOfItsRunningJob(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	const unique = "report:daily"
	running, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var runs []int               // N of each run, in order
	var results []queue.Enqueued // of the handlers' enqueues
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[chain]) error {
		once.Do(func() {
			close(running)
			<-resume
		})
		mu.Lock()
		runs = append(runs, w.Args.N)
		mu.Unlock()
		if w.Args.N >= 3 {
			return nil
		}
		// The second job fails its first run after enqueuing: that
		// successor must vanish with the rollback.
		fail := w.Args.N == 2 && w.Attempt == 1
		res, err := c.EnqueueTx(ctx, tx, queue.Job{Group: "emails", Key: "chain", Args: chain{N: w.Args.N + 1}, UniqueKey: unique})
		if err != nil {
			return err
		}
		mu.Lock()
		results = append(results, res...)
		mu.Unlock()
		if fail {
			return errors.New("failed after enqueuing its successor")
		}
		return nil
	})
	first, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "chain", Args: chain{N: 1}, UniqueKey: unique})
	pgtest.Must(t, err)
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		MinRetry: time.Millisecond, MaxRetry: time.Millisecond}, true)
	<-running
	// The control: the running job holds its key against everyone else.
	if dup, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "other", Args: chain{N: 9}, UniqueKey: unique}); err != nil || !dup.Duplicate {
		t.Fatalf("enqueue from outside while the job runs = %+v, %v; want a duplicate", dup, err)
	}
	close(resume)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)

	rows, err := pool.Query(ctx, `SELECT (args->>'n')::int, state, attempt FROM leasehold.jobs WHERE unique_key = $1 ORDER BY id`, unique)
	pgtest.Must(t, err)
	type job struct {
		N       int
		State   string
		Attempt int
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[job])
	pgtest.Must(t, err)
	want := []job{{1, "completed", 1}, {2, "completed", 2}, {3, "completed", 1}}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("jobs of the key %+v (first %d); want %+v: each successor enqueued once, the failed run's rolled back", got, first.ID, want)
	}
	for i, r := range results {
		if r.Duplicate || r.ID == 0 {
			t.Errorf("handler enqueue %d = %+v; want a new job", i, r)
		}
	}
	if len(results) != 3 || len(runs) != 4 {
		t.Errorf("runs %v, %d enqueues from handlers; want runs [1 2 2 3] and 3 enqueues", runs, len(results))
	}
	// The chain is over: the key is free.
	if r, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "chain", Args: chain{N: 3}, UniqueKey: unique}); err != nil || r.Duplicate {
		t.Fatalf("enqueue after the chain = %+v, %v; want a new job", r, err)
	}
}

// A job retried by an operator holds its unique key again, even one that
// had released it (a handler that enqueued a successor and then ended its
// transaction itself with a raw COMMIT leaves such a job behind, pending,
// and it may then be cancelled): after the retry, an enqueue of the key is
// a duplicate.
func TestRetriedJobHoldsItsUniqueKeyAgain(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: chain{N: 1}, UniqueKey: "u"})
	pgtest.Must(t, err)
	_, err = pool.Exec(ctx, `UPDATE leasehold.jobs SET unique_released = true WHERE id = $1`, res.ID)
	pgtest.Must(t, err)
	_, err = c.Cancel(ctx, res.ID)
	pgtest.Must(t, err)
	if changed, err := c.Retry(ctx, res.ID); err != nil || len(changed) != 1 {
		t.Fatalf("Retry = %v, %v; want the job back to pending", changed, err)
	}
	dup, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: chain{N: 2}, UniqueKey: "u"})
	pgtest.Must(t, err)
	if !dup.Duplicate {
		t.Fatalf("enqueue of the retried job's unique key = %+v; want a duplicate", dup)
	}
}

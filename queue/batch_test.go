package queue_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

type reprice struct {
	User int  `json:"user"`
	Fail bool `json:"fail,omitempty"`
}

func (reprice) Kind() string { return "reprice" }

type batchDone struct {
	Batch string `json:"batch"`
	Which string `json:"which"`
}

func (batchDone) Kind() string { return "batch_done" }

// batchTables creates batch_effects, where items record their effects,
// and batch_followups, where follow-ups record their runs.
func batchTables(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(pgtest.Context(t), `
CREATE TABLE batch_effects (item text NOT NULL, job bigint NOT NULL, token bigint NOT NULL);
CREATE TABLE batch_followups (batch text NOT NULL, which text NOT NULL, job bigint NOT NULL)`)
	pgtest.Must(t, err)
}

// batchWorkers creates the tables of batchTables and returns
// batchHandlers(fail, nil).
func batchWorkers(t *testing.T, pool *pgxpool.Pool, fail *sync.Map) *queue.Workers {
	batchTables(t, pool)
	return batchHandlers(fail, nil)
}

// batchHandlers returns transactional handlers (each effect commits with
// its job's completion, fenced) that record each item's effect and each
// follow-up's run. An item with Fail set fails while fail holds true (or
// nothing) for it; once its effect is written (not yet committed), each
// item runs during(item), if set.
func batchHandlers(fail *sync.Map, during func(ctx context.Context, item string)) *queue.Workers {
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[reprice]) error {
		if w.Args.Fail {
			if v, ok := fail.Load(w.Item); !ok || v.(bool) {
				return errors.New("repricing failed")
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO batch_effects (item, job, token) VALUES ($1, $2, $3)`, w.Item, w.ID, int64(w.Token))
		if err == nil && during != nil {
			during(ctx, w.Item) // the effect is written, not committed
		}
		return err
	})
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[batchDone]) error {
		_, err := tx.Exec(ctx, `INSERT INTO batch_followups (batch, which, job) VALUES ($1, $2, $3)`, w.Args.Batch, w.Args.Which, w.ID)
		return err
	})
	return ws
}

// effects returns how many item effects are recorded, and for how many
// distinct items.
func effects(t *testing.T, pool *pgxpool.Pool) (n, distinct int) {
	pgtest.Must(t, pool.QueryRow(pgtest.Context(t), `SELECT count(*), count(DISTINCT item) FROM batch_effects`).Scan(&n, &distinct))
	return n, distinct
}

// createBatch creates batch name with both follow-ups, waiting for the
// workers to record their kinds.
func createBatch(t *testing.T, c *queue.Client, name string) queue.BatchInfo {
	t.Helper()
	ctx := pgtest.Context(t)
	spec := queue.BatchSpec{Group: "emails", Name: name, Description: "test batch",
		OnComplete: &queue.FollowUp{Args: batchDone{Batch: name, Which: "complete"}},
		OnSuccess:  &queue.FollowUp{Args: batchDone{Batch: name, Which: "success"}}}
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		b, err := c.CreateBatch(ctx, spec)
		if errors.Is(err, queue.ErrNoHandler) && time.Since(start) < 10*time.Second {
			continue // the workers have not recorded their kinds yet
		}
		pgtest.Must(t, err)
		return b
	}
}

// items yields n items "user-0".."user-(n-1)"; those in failing fail.
func items(n int, failing map[int]bool) iter.Seq2[queue.Item, error] {
	return func(yield func(queue.Item, error) bool) {
		for i := range n {
			if !yield(queue.Item{ID: fmt.Sprintf("user-%d", i), Args: reprice{User: i, Fail: failing[i]}, MaxAttempts: 2}, nil) {
				return
			}
		}
	}
}

// waitBatch waits until batch name has no pending item and is finished.
func waitBatch(t *testing.T, c *queue.Client, name string, cond func(queue.BatchInfo) bool) queue.BatchInfo {
	t.Helper()
	ctx := pgtest.Context(t)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		b, err := c.Batch(ctx, "emails", name)
		pgtest.Must(t, err)
		if cond(b) {
			return b
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("batch %q: %+v", name, b)
		}
	}
}

// followups returns the follow-up runs recorded for batch name.
func followups(t *testing.T, pool *pgxpool.Pool, name string) map[string]int {
	rows, err := pool.Query(pgtest.Context(t), `SELECT which, count(*) FROM batch_followups WHERE batch = $1 GROUP BY which`, name)
	pgtest.Must(t, err)
	got := map[string]int{}
	var which string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&which, &n}, func() error { got[which] = n; return nil })
	pgtest.Must(t, err)
	return got
}

// A batch of 500 items, one failing, submitted in chunks and sealed: each
// item's effect once, progress exact, the on-complete follow-up once and
// not the on-success one; retrying the failed item (now succeeding)
// completes every item and runs the on-success follow-up once, and the
// on-complete one not again.
func TestBatchRunsEveryItemOnceAndItsFollowUpsOnce(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{SubmitChunk: 64})
	pgtest.Must(t, err)
	var fail sync.Map
	member(t, pool, 8, queue.ProcessorConfig{Workers: batchWorkers(t, pool, &fail), PollInterval: 20 * time.Millisecond,
		MinRetry: time.Millisecond, MaxRetry: time.Millisecond}, true)
	b := createBatch(t, c, "reprice-1")
	if b.State() != queue.BatchOpen || b.Total != 0 {
		t.Fatalf("new batch: %+v", b)
	}
	added, err := c.SubmitItems(ctx, "emails", "reprice-1", items(500, map[int]bool{7: true}))
	pgtest.Must(t, err)
	if added != (queue.Added{Items: 500, Added: 500}) {
		t.Fatalf("added %+v", added)
	}
	_, err = c.SealBatch(ctx, "emails", "reprice-1")
	pgtest.Must(t, err)
	b = waitBatch(t, c, "reprice-1", func(b queue.BatchInfo) bool { return b.FinishedAt != nil })
	if b.Total != 500 || b.Pending != 0 || b.Completed != 499 || b.Failed != 1 || b.Cancelled != 0 || b.State() != queue.BatchFinished {
		t.Fatalf("finished batch: %+v", b)
	}
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	if n, distinct := effects(t, pool); n != 499 || distinct != 499 {
		t.Fatalf("%d effects of %d items; want 499 of 499", n, distinct)
	}
	if got := followups(t, pool, "reprice-1"); got["complete"] != 1 || got["success"] != 0 {
		t.Fatalf("follow-ups run: %v; want complete once, success never", got)
	}
	fail.Store("user-7", false)
	n, err := c.RetryBatch(ctx, "emails", "reprice-1")
	pgtest.Must(t, err)
	if n != 1 {
		t.Fatalf("retried %d items; want 1", n)
	}
	b = waitBatch(t, c, "reprice-1", func(b queue.BatchInfo) bool { return b.SucceededAt != nil })
	if b.Completed != 500 || b.Failed != 0 || b.Pending != 0 || b.State() != queue.BatchSucceeded {
		t.Fatalf("retried batch: %+v", b)
	}
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	if got := followups(t, pool, "reprice-1"); got["complete"] != 1 || got["success"] != 1 {
		t.Fatalf("follow-ups run: %v; want each once", got)
	}
	// Cancelling a succeeded batch changes nothing.
	n, err = c.CancelBatch(ctx, "emails", "reprice-1")
	pgtest.Must(t, err)
	b, err = c.Batch(ctx, "emails", "reprice-1")
	pgtest.Must(t, err)
	if n != 0 || b.CancelledAt != nil || b.State() != queue.BatchSucceeded {
		t.Fatalf("cancelling a succeeded batch: %d cancelled, batch %+v; want it left succeeded", n, b)
	}
}

// Items run by a plain handler are recorded by the completer in batches of
// outcomes; the transaction that records a partition's last ones finishes
// the batch: every item once, each follow-up once.
func TestBatchOfPlainJobsFinishesOnce(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	batchTables(t, pool)
	var runs sync.Map // item -> *atomic.Int64
	ws2 := queue.NewWorkers()
	queue.Handle(ws2, func(ctx context.Context, w *queue.Work[reprice]) error {
		v, _ := runs.LoadOrStore(w.Item, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		return nil
	})
	queue.HandleTx(ws2, func(ctx context.Context, tx pgx.Tx, w *queue.Work[batchDone]) error {
		_, err := tx.Exec(ctx, `INSERT INTO batch_followups (batch, which, job) VALUES ($1, $2, $3)`, w.Args.Batch, w.Args.Which, w.ID)
		return err
	})
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws2, PollInterval: 20 * time.Millisecond}, true)
	createBatch(t, c, "plain")
	_, err := c.SubmitItems(ctx, "emails", "plain", items(300, nil))
	pgtest.Must(t, err)
	_, err = c.SealBatch(ctx, "emails", "plain")
	pgtest.Must(t, err)
	b := waitBatch(t, c, "plain", func(b queue.BatchInfo) bool { return b.SucceededAt != nil })
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	if b.Total != 300 || b.Completed != 300 {
		t.Fatalf("batch %+v", b)
	}
	n := 0
	runs.Range(func(k, v any) bool {
		if v.(*atomic.Int64).Load() != 1 {
			t.Errorf("item %v ran %d times", k, v.(*atomic.Int64).Load())
		}
		n++
		return true
	})
	if n != 300 {
		t.Fatalf("%d items ran; want 300", n)
	}
	if got := followups(t, pool, "plain"); got["complete"] != 1 || got["success"] != 1 {
		t.Fatalf("follow-ups run: %v; want each once", got)
	}
}

package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// twoPartitionBatch creates a sealed batch "race" of two items on two
// partitions, with an on-complete follow-up, and returns the items' ids.
func twoPartitionBatch(t *testing.T, pool *pgxpool.Pool, c *queue.Client) (int64, [2]int64) {
	t.Helper()
	ctx := pgtest.Context(t)
	kindsFor(t, pool, "reprice", "batch_done")
	b, err := c.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "race",
		OnComplete: &queue.FollowUp{Args: batchDone{Batch: "race", Which: "complete"}}})
	pgtest.Must(t, err)
	// Two keys on two partitions.
	var keys []string
	seen := map[int]bool{}
	for i := 0; len(keys) < 2; i++ {
		k := string(rune('a' + i))
		if p := partition.OfString(k, 8); !seen[p] {
			seen[p] = true
			keys = append(keys, k)
		}
	}
	_, err = c.AddItems(ctx, "emails", "race", queue.Item{ID: "1", Key: keys[0], Args: reprice{User: 1}},
		queue.Item{ID: "2", Key: keys[1], Args: reprice{User: 2}})
	pgtest.Must(t, err)
	_, err = c.SealBatch(ctx, "emails", "race")
	pgtest.Must(t, err)
	var ids [2]int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT min(id), max(id) FROM leasehold.jobs WHERE batch_id = $1 AND batch_item IS NOT NULL`, b.ID).Scan(&ids[0], &ids[1]))
	return b.ID, ids
}

// finishing is one transaction finishing a batch item (an operator's
// cancel: it counts and reports drained partitions as the owners'
// completion does, through the same statements).
type finishing struct {
	t  *testing.T
	tx pgx.Tx
	st *store.Statements
}

func begin(t *testing.T, pool *pgxpool.Pool, st *store.Statements, item int64) (*finishing, []int64) {
	t.Helper()
	ctx := pgtest.Context(t)
	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	var id int64
	var drained []int64
	pgtest.Must(t, tx.QueryRow(ctx, st.Queue.Cancel, []int64{item}, st.Queue.Channel).Scan(&id, &drained))
	return &finishing{t: t, tx: tx, st: st}, drained
}

// finish runs the finishing protocol (lock, then finish in a new
// statement) unless skipLock, and returns the follow-ups it enqueued.
func (f *finishing) finish(ids []int64, skipLock bool) int {
	ctx := pgtest.Context(f.t)
	if !skipLock {
		_, err := f.tx.Exec(ctx, f.st.Batch.Lock, ids)
		pgtest.Must(f.t, err)
	}
	rows, err := f.tx.Query(ctx, f.st.Batch.Finish, ids, "ch")
	pgtest.Must(f.t, err)
	n := 0
	var id, complete, success *int64
	var finishes, succeeds bool
	_, err = pgx.ForEachRow(rows, []any{&id, &complete, &success, &finishes, &succeeds}, func() error {
		if complete != nil {
			n++
		}
		return nil
	})
	pgtest.Must(f.t, err)
	return n
}

func followUpJobs(t *testing.T, pool *pgxpool.Pool, batch int64) int {
	var n int
	pgtest.Must(t, pool.QueryRow(pgtest.Context(t), `SELECT count(*) FROM leasehold.jobs WHERE batch_id = $1 AND followup IS NOT NULL`, batch).Scan(&n))
	return n
}

// Two transactions finish the last items of two partitions of a batch at
// once: each counts its item and sees its partition drained, neither sees
// the other's uncommitted count. The protocol (lock the batch row, then
// read the counts in a new statement) makes the second see the first's
// commit: exactly one follow-up, in either interleaving. The negative
// control runs the same transactions without the lock, reading the counts
// while the other has not committed: neither finishes the batch, and the
// check catches it. A second enqueue of a follow-up is impossible: the
// unique index refuses it.
func TestBatchFinishingOnTwoPartitionsAtOnceEnqueuesOnce(t *testing.T) {
	t.Parallel()
	st, err := store.For("")
	pgtest.Must(t, err)
	for _, tc := range []struct {
		name    string
		waiting bool // the second takes the lock while the first holds it
		control bool // no lock: both read before either commits
	}{
		{name: "second after first commits"},
		{name: "second waits for the lock", waiting: true},
		{name: "control without the lock", control: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := pgtest.Context(t)
			pool, c := setup(t)
			batch, items := twoPartitionBatch(t, pool, c)
			first, d1 := begin(t, pool, st, items[0])
			second, d2 := begin(t, pool, st, items[1])
			if len(d1) != 1 || d1[0] != batch || len(d2) != 1 || d2[0] != batch {
				t.Fatalf("drained %v and %v; want [%d] each (each partition's last item)", d1, d2, batch)
			}
			enqueued := 0
			switch {
			case tc.control:
				enqueued += first.finish(d1, true)
				enqueued += second.finish(d2, true)
				pgtest.Must(t, first.tx.Commit(ctx))
				pgtest.Must(t, second.tx.Commit(ctx))
			case tc.waiting:
				enqueued += first.finish(d1, false)
				got := make(chan int)
				go func() { got <- second.finish(d2, false) }()
				select {
				case n := <-got:
					t.Fatalf("the second finished (%d) while the first held the batch's lock", n)
				case <-time.After(200 * time.Millisecond):
				}
				pgtest.Must(t, first.tx.Commit(ctx))
				enqueued += <-got
				pgtest.Must(t, second.tx.Commit(ctx))
			default:
				enqueued += first.finish(d1, false)
				pgtest.Must(t, first.tx.Commit(ctx))
				enqueued += second.finish(d2, false)
				pgtest.Must(t, second.tx.Commit(ctx))
			}
			b, err := c.BatchByID(ctx, batch)
			pgtest.Must(t, err)
			jobs := followUpJobs(t, pool, batch)
			exactlyOnce := b.FinishedAt != nil && enqueued == 1 && jobs == 1 && b.CompleteJob != 0
			if tc.control {
				if exactlyOnce || b.Pending != 0 {
					t.Fatalf("control: finished %v with %d follow-ups (%d pending); want the batch missed", b.FinishedAt, jobs, b.Pending)
				}
				return
			}
			if !exactlyOnce {
				t.Fatalf("batch %+v: %d follow-up(s) enqueued, %d stored; want exactly one", b, enqueued, jobs)
			}
			// A second enqueue is impossible, whatever the code above it does.
			_, err = pool.Exec(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at, batch_id, followup)
				VALUES ('emails', 0, '', 'batch_done', '{}', 1, now(), $1, 'complete')`, batch)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "23505" {
				t.Fatalf("a second on-complete follow-up: %v; want a unique violation", err)
			}
		})
	}
}

// Client.Cancel of a sealed batch's last pending items, by id, finishes
// the batch in its transaction: the on-complete follow-up is enqueued,
// once; cancelling them again changes nothing.
func TestCancellingTheLastItemsByIDFinishesTheBatch(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	batch, items := twoPartitionBatch(t, pool, c)
	got, err := c.Cancel(ctx, items[0])
	pgtest.Must(t, err)
	if b, _ := c.BatchByID(ctx, batch); len(got) != 1 || b.FinishedAt != nil || b.Pending != 1 {
		t.Fatalf("after cancelling one of two items: %v, batch %+v; want it running", got, b)
	}
	got, err = c.Cancel(ctx, items[0], items[1])
	pgtest.Must(t, err)
	b, err := c.BatchByID(ctx, batch)
	pgtest.Must(t, err)
	if len(got) != 1 || b.FinishedAt == nil || b.CompleteJob == 0 || b.Cancelled != 2 || b.State() != queue.BatchCancelled && b.State() != queue.BatchFinished {
		t.Fatalf("after cancelling the last item: %v, batch %+v; want it finished, its follow-up enqueued", got, b)
	}
	if n := followUpJobs(t, pool, batch); n != 1 {
		t.Fatalf("%d follow-up jobs; want 1", n)
	}
}

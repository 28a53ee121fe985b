package queue_test

import (
	"slices"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// AddItemJobs returns the job id of each item, in the order given: each
// the id of the job of that item key in the batch (checked against the
// table), a repeat within the call and a duplicate of an earlier call the
// id of the stored item; a producer cancels one item by its id without
// listing the batch. The control: the ids are distinct, non-zero, and the
// cancel changes that item only.
func TestBatchAddItemJobsReturnsEachItemsJob(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	kindsFor(t, pool, "reprice", "batch_done")
	createBatch(t, c, "ids")
	first, firstIDs, err := c.AddItemJobs(ctx, "emails", "ids",
		queue.Item{ID: "a", Args: reprice{User: 1}}, queue.Item{ID: "b", Args: reprice{User: 2}})
	pgtest.Must(t, err)
	if first.Added != 2 || len(firstIDs) != 2 {
		t.Fatalf("first call: %+v, %v", first, firstIDs)
	}
	a, ids, err := c.AddItemJobs(ctx, "emails", "ids",
		queue.Item{ID: "c", Args: reprice{User: 3}},
		queue.Item{ID: "a", Args: reprice{User: 1}}, // a duplicate of the first call
		queue.Item{ID: "c", Args: reprice{User: 3}}, // a repeat within the call
		queue.Item{ID: "d", Args: reprice{User: 4}})
	pgtest.Must(t, err)
	if a != (queue.Added{Items: 4, Added: 2, Duplicates: 2}) || len(ids) != 4 {
		t.Fatalf("second call: %+v, %v", a, ids)
	}
	stored := map[string]int64{}
	rows, err := pool.Query(ctx, `SELECT batch_item, id FROM leasehold.jobs WHERE batch_item IS NOT NULL`)
	pgtest.Must(t, err)
	for rows.Next() {
		var item string
		var id int64
		pgtest.Must(t, rows.Scan(&item, &id))
		stored[item] = id
	}
	pgtest.Must(t, rows.Err())
	want := []int64{stored["c"], stored["a"], stored["c"], stored["d"]}
	if !slices.Equal(ids, want) || !slices.Equal(firstIDs, []int64{stored["a"], stored["b"]}) {
		t.Fatalf("ids %v then %v; want %v then %v (stored: %v)", firstIDs, ids, []int64{stored["a"], stored["b"]}, want, stored)
	}
	if len(stored) != 4 || slices.Contains(ids, 0) || ids[0] == ids[1] || ids[1] == ids[3] {
		t.Fatalf("control: stored %v, ids %v; want 4 distinct items", stored, ids)
	}
	cancelled, err := c.Cancel(ctx, ids[3])
	pgtest.Must(t, err)
	b, err := c.Batch(ctx, "emails", "ids")
	pgtest.Must(t, err)
	if !slices.Equal(cancelled, []int64{stored["d"]}) || b.Cancelled != 1 || b.Pending != 3 {
		t.Fatalf("cancelling item d by its id: %v, batch %+v", cancelled, b)
	}
}

package queue_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// Client.Retry of an item of a cancelled, finished batch is refused with
// a *CancelledItemsError wrapping ErrBatchCancelled, and nothing of the
// call is retried (the item stays cancelled, the batch's counts as they
// were). The control: an item cancelled on its own, in a batch that is not
// cancelled, is retried by the same call.
func TestBatchRetryOfAnItemOfACancelledBatchIsRefused(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	kindsFor(t, pool, "reprice", "batch_done")
	createBatch(t, c, "over")
	createBatch(t, c, "live")
	ids := func(name string) []int64 {
		b, err := c.Batch(ctx, "emails", name)
		pgtest.Must(t, err)
		js, err := c.List(ctx, queue.Filter{Group: "emails", Batch: b.ID})
		pgtest.Must(t, err)
		var out []int64
		for _, j := range js {
			out = append(out, j.ID)
		}
		slices.Sort(out)
		return out
	}
	_, err := c.SubmitItems(ctx, "emails", "over", items(3, nil))
	pgtest.Must(t, err)
	_, err = c.SubmitItems(ctx, "emails", "live", items(3, nil))
	pgtest.Must(t, err)
	n, err := c.CancelBatch(ctx, "emails", "over")
	pgtest.Must(t, err)
	over := waitBatch(t, c, "over", func(b queue.BatchInfo) bool { return b.FinishedAt != nil })
	if n != 3 || over.Cancelled != 3 {
		t.Fatalf("cancelled %d: %+v", n, over)
	}
	liveIDs := ids("live")
	_, err = c.Cancel(ctx, liveIDs[0])
	pgtest.Must(t, err)

	// Control: the item cancelled on its own is retried.
	got, err := c.Retry(ctx, liveIDs[0])
	pgtest.Must(t, err)
	if !slices.Equal(got, []int64{liveIDs[0]}) {
		t.Fatalf("control: Retry(%d) = %v; want it retried", liveIDs[0], got)
	}
	_, err = c.Cancel(ctx, liveIDs[0])
	pgtest.Must(t, err)

	overIDs := ids("over")
	got, err = c.Retry(ctx, liveIDs[0], overIDs[1])
	var ce *queue.CancelledItemsError
	if !errors.Is(err, queue.ErrBatchCancelled) || !errors.As(err, &ce) || !slices.Equal(ce.IDs, []int64{overIDs[1]}) || got != nil {
		t.Fatalf("Retry of an item of a cancelled batch = %v, %v; want a *CancelledItemsError naming %d", got, err, overIDs[1])
	}
	var states []string
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT array_agg(state ORDER BY id) FROM leasehold.jobs WHERE id = ANY($1)`,
		[]int64{liveIDs[0], overIDs[1]}).Scan(&states))
	if !slices.Equal(states, []string{"cancelled", "cancelled"}) {
		t.Fatalf("states after a refused Retry: %v; want both still cancelled", states)
	}
	after, err := c.Batch(ctx, "emails", "over")
	pgtest.Must(t, err)
	if after.Cancelled != 3 || after.Pending != 0 || after.State() != queue.BatchCancelled {
		t.Fatalf("batch after a refused Retry: %+v", after)
	}
}

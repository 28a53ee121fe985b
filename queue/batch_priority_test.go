package queue_test

import (
	"errors"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// Items and follow-ups take a priority, and, added without MaxAttempts,
// are stored with the default limit marked as such, so that the kind's
// Policy.MaxAttempts applies to them as to a job enqueued without one.
func TestBatchItemsAndFollowUpsPriorityAndDefaultLimit(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	kindsFor(t, pool, "reprice", "batch_done")
	// A bad priority is refused, as on a job.
	_, err := c.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "bad",
		OnComplete: &queue.FollowUp{Args: batchDone{Batch: "bad"}, Priority: queue.MaxPriority + 1}})
	if !errors.Is(err, queue.ErrInvalidBatch) {
		t.Fatalf("a follow-up of priority %d: %v; want ErrInvalidBatch", queue.MaxPriority+1, err)
	}
	_, err = c.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "prio",
		OnComplete: &queue.FollowUp{Args: batchDone{Batch: "prio", Which: "complete"}, Priority: 3}})
	pgtest.Must(t, err)
	_, err = c.AddItems(ctx, "emails", "prio", queue.Item{ID: "bad", Args: reprice{User: 9}, Priority: -1})
	if !errors.Is(err, queue.ErrInvalidItem) {
		t.Fatalf("an item of priority -1: %v; want ErrInvalidItem", err)
	}
	_, err = c.AddItems(ctx, "emails", "prio",
		queue.Item{ID: "1", Args: reprice{User: 1}, Priority: 2},
		queue.Item{ID: "2", Args: reprice{User: 2}, MaxAttempts: 5})
	pgtest.Must(t, err)
	_, err = c.SealBatch(ctx, "emails", "prio")
	pgtest.Must(t, err)
	items, err := c.List(ctx, queue.Filter{Group: "emails", Kind: "reprice"})
	pgtest.Must(t, err)
	got := map[string]queue.JobInfo{}
	for _, j := range items {
		got[j.Item] = j
	}
	if j := got["1"]; j.Priority != 2 || !j.DefaultMaxAttempts {
		t.Errorf("item 1: priority %d, default limit %v; want 2, true", j.Priority, j.DefaultMaxAttempts)
	}
	if j := got["2"]; j.Priority != 1 || j.DefaultMaxAttempts || j.MaxAttempts != 5 {
		t.Errorf("item 2: priority %d, default limit %v, limit %d; want 1, false, 5", j.Priority, j.DefaultMaxAttempts, j.MaxAttempts)
	}
	// Cancelling the batch finishes it: its on-complete follow-up is enqueued.
	_, err = c.CancelBatch(ctx, "emails", "prio")
	pgtest.Must(t, err)
	b := waitBatch(t, c, "prio", func(b queue.BatchInfo) bool { return b.CompleteJob != 0 })
	f, err := c.JobInfo(ctx, b.CompleteJob)
	pgtest.Must(t, err)
	if f.Priority != 3 || !f.DefaultMaxAttempts {
		t.Errorf("the follow-up: priority %d, default limit %v; want 3, true", f.Priority, f.DefaultMaxAttempts)
	}
}

package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// refund is a kind no worker of the test handles.
type refund struct{}

func (refund) Kind() string { return "refund" }

// Batch items of the kinds a worker handles are accepted as soon as its
// Start returns, whether or not it holds a partition yet: here another
// client holds every partition's lease, so the worker is granted none (the
// kinds recorded at a grant would come too late). Control: a kind no worker
// handles is refused, so the check cannot pass by accepting anything.
func TestStartRecordsTheKindsBeforeItReturns(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	other, err := lease.New(db, lease.Config{TTL: time.Minute})
	pgtest.Must(t, err)
	t.Cleanup(func() { other.Close(context.Background()) })
	names := make([]string, 8)
	for p := range names {
		names[p] = partition.LeaseName("g", p)
	}
	_, err = other.TryAcquireMany(ctx, names...)
	pgtest.Must(t, err)

	ws := queue.NewWorkers()
	queue.Handle(ws, func(context.Context, *queue.Work[deposit]) error { return nil })
	w := start(t, pool, worker.Config{Workers: ws})
	if n := len(w.Owned()); n != 0 {
		t.Fatalf("the worker holds %d partitions; want none (their leases are held elsewhere)", n)
	}
	q, err := queue.New(db, queue.Config{})
	pgtest.Must(t, err)
	_, err = q.CreateBatch(ctx, queue.BatchSpec{Group: "g", Name: "b"})
	pgtest.Must(t, err)
	if _, err := q.AddItems(ctx, "g", "b", queue.Item{ID: "1", Args: deposit{Seq: 1}}); err != nil {
		t.Fatalf("AddItems of a handled kind right after Start: %v; want it accepted", err)
	}
	var ke *queue.KindError
	if _, err := q.AddItems(ctx, "g", "b", queue.Item{ID: "2", Args: refund{}}); !errors.As(err, &ke) {
		t.Fatalf("AddItems of a kind no worker handles: %v; want a *queue.KindError", err)
	}
}

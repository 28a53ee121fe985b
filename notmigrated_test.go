package leasehold_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// Every component classifies its database errors with the one classifier:
// on a database whose schema was never migrated, each says so with an
// error wrapping ErrNotMigrated, not a bare driver error.
func TestEveryComponentReportsAnUnmigratedSchema(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.DBOn(t, pgtest.PoolURL(t, pgtest.URL(t))) // never migrated

	leases, err := lease.New(db, lease.Config{MaxBackoff: 50 * time.Millisecond})
	pgtest.Must(t, err)
	defer leases.Close(ctx)
	_, leaseErr := leases.TryAcquire(ctx, "x")

	m, err := partition.New(db, partition.Config{Group: "g", Partitions: 2, Run: func(ctx context.Context, _ partition.Ownership) { <-ctx.Done() }})
	pgtest.Must(t, err)
	memberErr := m.Start(ctx)

	q, err := queue.New(db, queue.Config{})
	pgtest.Must(t, err)
	_, enqueueErr := q.Enqueue(ctx, queue.Job{Group: "g", Args: ping{}})
	_, statsErr := q.Stats(ctx, "g")
	_, jobErr := q.JobInfo(ctx, 1)

	_, listErr := q.List(ctx, queue.Filter{Group: "g"})
	_, waitsErr := q.Waits(ctx, "g", 0)
	_, retryErr := q.Retry(ctx, 1)
	_, cancelErr := q.Cancel(ctx, 1)
	_, ensureErr := q.EnsureGroup(ctx, "g", 2)

	_, offsetsErr := kafka.Offsets(ctx, db, "g")
	_, groupsErr := partition.Groups(ctx, db)
	_, inspectErr := partition.Inspect(ctx, db, "g")
	_, leaseInspectErr := leases.Inspect(ctx, "x")

	ws := queue.NewWorkers()
	queue.Handle(ws, func(context.Context, *queue.Work[ping]) error { return nil })
	w, err := worker.New(db, worker.Config{Group: "g", Partitions: 2, Workers: ws})
	pgtest.Must(t, err)
	workerErr := w.Start(ctx)
	stopErr := w.Stop(ctx) // the error of the clean-up of the failed Start

	for name, err := range map[string]error{
		"lease.TryAcquire": leaseErr, "partition.Member.Start": memberErr, "queue.Enqueue": enqueueErr,
		"queue.Stats": statsErr, "queue.JobInfo": jobErr, "kafka.Offsets": offsetsErr, "partition.Groups": groupsErr,
		"queue.List": listErr, "queue.Waits": waitsErr, "queue.Retry": retryErr, "queue.Cancel": cancelErr,
		"queue.EnsureGroup": ensureErr, "partition.Inspect": inspectErr, "lease.Inspect": leaseInspectErr,
		"worker.Start": workerErr, "worker.Stop after a failed Start": stopErr,
	} {
		if !errors.Is(err, leasehold.ErrNotMigrated) {
			t.Errorf("%s on an unmigrated database = %v; want an error wrapping ErrNotMigrated", name, err)
		}
	}

	// The control: once migrated, the same calls succeed.
	pgtest.Must(t, db.Migrate(ctx))
	if _, err := partition.Groups(ctx, db); err != nil {
		t.Fatalf("partition.Groups after Migrate = %v", err)
	}
}

type ping struct{}

func (ping) Kind() string { return "ping" }

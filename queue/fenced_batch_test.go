package queue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// When a transactional run is refused by the fence, the run takes no
// further job (one job at a time here, so that none is running beside it), and the runs that committed before it are still
// reported completed: every event agrees with the job's stored state
// (completed ⇔ completed; fenced ⇒ still pending, for the newer owner).
func TestFencedRunDoesNotRelabelCommittedRuns(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ids, l, ws := fencedAtSecond(t, ctx, pool, c, 3, "a")
	var mu sync.Mutex
	var events []queue.JobEvent
	p, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws, PollInterval: time.Hour, PartitionConcurrency: 1,
		Hooks: queue.Hooks{OnJob: func(e queue.JobEvent) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}}})
	pgtest.Must(t, err)
	p.Run(ctx, partition.Ownership{Group: "emails", Partition: 0, Token: l.Token(), Lease: l}) // returns when fenced
	mu.Lock()
	defer mu.Unlock()
	got := map[int64]queue.Outcome{}
	for _, e := range events {
		got[e.ID] = e.Outcome
	}
	want := map[int64]queue.Outcome{ids[0]: queue.OutcomeCompleted, ids[1]: queue.OutcomeFenced}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(events) != 2 {
		t.Errorf("events %+v; want job %d completed, job %d fenced, job %d not run", events, ids[0], ids[1], ids[2])
	}
	for _, e := range events {
		info, err := c.JobInfo(ctx, e.ID)
		pgtest.Must(t, err)
		if (e.Outcome == queue.OutcomeCompleted) != (info.State == "completed") ||
			e.Outcome == queue.OutcomeFenced && info.State != "pending" {
			t.Errorf("job %d reported %s but stored %s", e.ID, e.Outcome, info.State)
		}
	}
}

// fencedAtSecond enqueues n jobs of partition 0 of "emails" (deposits 0 to
// n-1, each of its own key), grants that partition's lease to owner, and
// returns the jobs, the lease and workers whose transactional handler
// replaces the grant's token by a newer one while running deposit 1, as a
// takeover would: that run's outcome, and those after it, are refused by
// the fence.
func fencedAtSecond(t *testing.T, ctx context.Context, pool *pgxpool.Pool, c *queue.Client, n int, owner string) ([]int64, *lease.Lease, *queue.Workers) {
	t.Helper()
	var ids []int64
	for i, k := range keysIn(0, n, "fenced") {
		res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: k, Args: deposit{Seq: i}})
		pgtest.Must(t, err)
		ids = append(ids, res.ID)
	}
	lc, err := lease.New(pgtest.DBOn(t, pool), lease.Config{Owner: owner})
	pgtest.Must(t, err)
	t.Cleanup(func() { lc.Close(context.Background()) })
	l, err := lc.TryAcquire(ctx, "partition/emails/0")
	pgtest.Must(t, err)
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
		if w.Args.Seq == 1 {
			_, err := pool.Exec(ctx, `UPDATE leasehold.leases SET token = nextval('leasehold.lease_token_seq') WHERE name = $1`, l.Name())
			return err
		}
		return nil
	})
	return ids, l, ws
}

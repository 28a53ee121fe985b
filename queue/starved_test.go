package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/queue"
)

// A backlog of a few keys, each run one at a time, fills the window with
// jobs waiting their turn: the outcomes are recorded in batches, not one
// statement each. (Their few outcomes could not make room for a fetch, yet
// the pipeline hurried the completer at each one: 0.8 statements per job
// for 2 keys, and this test fails so.)
func TestFewKeysBacklogRecordsOutcomesInBatches(t *testing.T) {
	t.Parallel()
	st, err := store.For("")
	pgtest.Must(t, err)
	pool, count := pgtest.CountingPool(t, nil)
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	ctx := pgtest.Context(t)
	_, err = pool.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('emails', 8)`)
	pgtest.Must(t, err)
	keys := keysIn(0, 2, "few")
	const n = 1000
	jobs := make([]queue.Job, n)
	for i := range jobs {
		jobs[i] = queue.Job{Group: "emails", Key: keys[i%2], Args: tenantJob{Tenant: "a"}}
	}
	_, err = c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[tenantJob]) error {
		time.Sleep(500 * time.Microsecond)
		return nil
	})
	groupMember(t, pool, "emails", 8, queue.ProcessorConfig{Workers: ws, PollInterval: 50 * time.Millisecond}, false)
	pgtest.WaitNoPendingJobs(t, pool, 60*time.Second)
	got := count.Count(st.Queue.CompleteFenced)
	t.Logf("%d jobs of 2 keys: %d completion statements", n, got)
	if got > n/10 {
		t.Errorf("%d jobs of 2 keys were recorded by %d completion statements; want at most %d", n, got, n/10)
	}
}

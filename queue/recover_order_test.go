package queue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// A key's jobs run in id order in a recovered batch too, whatever their
// run_at: a job retried after a failure (its run_at moved past its later
// jobs' enqueue times) that is due again when the partition's previous run
// ended abruptly still runs before its key's later jobs. (The recovered
// batch ran its jobs in the fetch's (priority, run_at, id) order: the later
// job first, the chaos run's "order violation".) The pipeline (no abrupt
// end) is the control.
func TestRecoveredBatchRunsAKeysJobsInIDOrder(t *testing.T) {
	for _, abrupt := range []bool{false, true} {
		t.Run(fmt.Sprintf("abrupt=%v", abrupt), func(t *testing.T) {
			t.Parallel()
			ctx := pgtest.Context(t)
			pool, c := setup(t)
			key := keysIn(0, 1, "reorder")[0]
			var mu sync.Mutex
			var ran []string
			ws := queue.NewWorkers()
			queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[step]) error {
				mu.Lock()
				ran = append(ran, w.Args.Name)
				mu.Unlock()
				return nil
			})
			res, err := c.EnqueueMany(ctx, queue.Job{Group: "emails", Key: key, Args: step{"first"}},
				queue.Job{Group: "emails", Key: key, Args: step{"second"}})
			pgtest.Must(t, err)
			// The first job failed once and is due again: its retry's run_at
			// is later than the second job's (its enqueue time).
			_, err = pool.Exec(ctx, `UPDATE leasehold.jobs SET attempt = 1, run_at = clock_timestamp(),
				errors = '[{"attempt": 1, "error": "boom"}]' WHERE id = $1`, res[0].ID)
			pgtest.Must(t, err)
			a := newAfterCrash(t, ctx, pool, abrupt)
			a.run(ctx, queue.ProcessorConfig{Workers: ws})
			waitJob(t, ctx, c, res[0].ID, queue.StateCompleted)
			waitJob(t, ctx, c, res[1].ID, queue.StateCompleted)
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(ran, []string{"first", "second"}) {
				t.Fatalf("the key's jobs ran in the order %v; want [first second] (id order)", ran)
			}
		})
	}
}

package queue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// The owner takes the due jobs of a partition in (run_at, id) order, not in
// id order: a job enqueued later but due earlier runs first.
func TestDueJobsRunInRunAtThenIDOrder(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var mu sync.Mutex
	var ran []string
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		mu.Lock()
		ran = append(ran, w.Args.Name)
		mu.Unlock()
		return nil
	})
	// Five jobs of distinct keys in one partition, each enqueued later but
	// due earlier than the one before it; the last two are due at the same
	// time, so id breaks the tie.
	now := time.Now()
	keys := keysIn(3, 5, "due")
	var jobs []queue.Job
	runAts := []time.Duration{-1 * time.Minute, -2 * time.Minute, -3 * time.Minute, -4 * time.Minute, -4 * time.Minute}
	for i, k := range keys {
		jobs = append(jobs, queue.Job{Group: "emails", Key: k, Args: step{fmt.Sprint(i)}, RunAt: now.Add(runAts[i])})
	}
	_, err := c.EnqueueMany(ctx, jobs...) // all due before the owner's first fetch
	pgtest.Must(t, err)
	// One at a time, so that the handlers record the order they started in.
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PartitionConcurrency: 1}, false)
	pgtest.WaitNoPendingJobs(t, pool, 10*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"3", "4", "2", "1", "0"}; !slices.Equal(ran, want) {
		t.Fatalf("ran %v; want %v ((run_at, id) order)", ran, want)
	}
}

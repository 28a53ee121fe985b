package worker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// blocked is the args of jobs whose handler waits for the test.
type blocked struct{ N int }

func (blocked) Kind() string { return "blocked" }

// limitedWant is the leasehold_queue_limited_jobs exposition of group "g"
// with kc jobs held back by key_concurrency and none by the others.
func limitedWant(kc int) string {
	return fmt.Sprintf(`
# HELP leasehold_queue_limited_jobs Due jobs of the owned partitions held back by a limit now: key_concurrency, key_rate or group_concurrency (as of each partition's last snapshot, at most a poll interval old).
# TYPE leasehold_queue_limited_jobs gauge
leasehold_queue_limited_jobs{group="g",limit="group_concurrency"} 0
leasehold_queue_limited_jobs{group="g",limit="key_concurrency"} %d
leasehold_queue_limited_jobs{group="g",limit="key_rate"} 0
`, kc)
}

// The gauge of the jobs held back by limits has one series per limit,
// present at 0 when nothing is held back, and counts the jobs of a key
// waiting behind its KeyConcurrency (1: one job runs, three wait).
func TestMetricsLimitedJobs(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	group(t, pool, 4)
	release := make(chan struct{})
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[blocked]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return ctx.Err()
	}, queue.WithPolicy(queue.Policy{KeyConcurrency: 1})) // declared: a key's jobs waiting their turn count as held back
	reg := prometheus.NewRegistry()
	w := start(t, pool, worker.Config{Partitions: 4, Workers: ws, Registerer: reg})
	defer close(release)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(limitedWant(0)), "leasehold_queue_limited_jobs"); err != nil {
		t.Fatalf("nothing held back: %v", err)
	}
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	for n := range 4 {
		_, err := c.Enqueue(ctx, queue.Job{Group: "g", Key: "hot", Args: blocked{n}})
		pgtest.Must(t, err)
	}
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		err := testutil.GatherAndCompare(reg, strings.NewReader(limitedWant(3)), "leasehold_queue_limited_jobs")
		if err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("owned %d partitions; %v", len(w.Owned()), err)
		}
	}
}

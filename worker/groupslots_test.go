package worker_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

type fragile struct{}

func (fragile) Kind() string { return "fragile" }

// A worker whose kind has a GroupConcurrency claims the kind's slots (the
// leases "slots/3/1/g/fragile/<i>", as its member id with "~slots") while
// it has jobs of the kind to run, none before, and gives them up once its
// jobs are done.
func TestWorkerClaimsGroupSlots(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := pgtest.Context(t)
	gate := make(chan struct{})
	ws := queue.NewWorkers()
	queue.Handle(ws, func(context.Context, *queue.Work[fragile]) error { <-gate; return nil },
		queue.WithPolicy(queue.Policy{GroupConcurrency: 3}))
	w, err := worker.New(pgtest.DBOn(t, pool), worker.Config{Group: "g", Partitions: 4, ID: "w1", Workers: ws,
		Lease: lease.Config{TTL: 2 * time.Second}})
	pgtest.Must(t, err)
	pgtest.Must(t, w.Start(ctx))
	held := func() int {
		var n int
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.leases
			WHERE name LIKE 'slots/3/1/g/fragile/%' AND owner LIKE 'w1~slots#%' AND expires_at > clock_timestamp()`).Scan(&n))
		return n
	}
	wait := func(want int) {
		t.Helper()
		for start := time.Now(); held() != want; time.Sleep(20 * time.Millisecond) {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("the worker holds %d of the 3 slots; want %d", held(), want)
			}
		}
	}
	time.Sleep(time.Second)
	wait(0)
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	jobs := make([]queue.Job, 8)
	for i := range jobs {
		jobs[i] = queue.Job{Group: "g", Key: fmt.Sprint("k", i), Args: fragile{}}
	}
	_, err = c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	wait(3)
	close(gate)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	wait(0)
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	pgtest.Must(t, w.Stop(sctx))
}

// Four workers run the jobs of a kind limited to 2 at once in the group,
// end to end (the pipelines take the slots): never more than 2 run at
// once, and all of them run, each worker running some (more workers than
// slots: the slots go round). The control: the same jobs of a kind without
// the limit run more than 2 at once.
func TestWorkersKeepGroupConcurrency(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{2, 0} {
		t.Run(fmt.Sprint("limit=", limit), func(t *testing.T) {
			t.Parallel()
			pool := pgtest.Pool(t)
			ctx := pgtest.Context(t)
			var mu sync.Mutex
			running, most := 0, 0
			ran := map[string]int{}
			for i := range 4 {
				id := fmt.Sprintf("w%d", i)
				ws := queue.NewWorkers()
				queue.Handle(ws, func(ctx context.Context, w *queue.Work[fragile]) error {
					mu.Lock()
					running++
					most = max(most, running)
					ran[id]++
					mu.Unlock()
					select {
					case <-time.After(20 * time.Millisecond):
					case <-ctx.Done():
					}
					mu.Lock()
					running--
					mu.Unlock()
					return nil
				}, queue.WithPolicy(queue.Policy{GroupConcurrency: limit}))
				start(t, pool, worker.Config{ID: id, Workers: ws})
			}
			c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
			pgtest.Must(t, err)
			jobs := make([]queue.Job, 60)
			for i := range jobs {
				jobs[i] = queue.Job{Group: "g", Key: fmt.Sprint("k", i), Args: fragile{}}
			}
			_, err = c.EnqueueMany(ctx, jobs...)
			pgtest.Must(t, err)
			pgtest.WaitNoPendingJobs(t, pool, 30*time.Second)
			var done int
			for start := time.Now(); done < len(jobs) && time.Since(start) < 30*time.Second; time.Sleep(20 * time.Millisecond) {
				pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE state = 'completed'`).Scan(&done))
			}
			mu.Lock()
			defer mu.Unlock()
			t.Logf("limit %d: at most %d at once; runs by worker %v", limit, most, ran)
			switch {
			case done < len(jobs):
				t.Fatalf("%d of %d jobs completed", done, len(jobs))
			case limit > 0 && most > limit:
				t.Fatalf("%d jobs ran at once; the limit is %d", most, limit)
			case limit > 0 && len(ran) < 4:
				t.Fatalf("runs by %d workers of 4: %v", len(ran), ran)
			case limit == 0 && most <= 2:
				t.Fatalf("the control ran at most %d at once: the check cannot fail", most)
			}
		})
	}
}

// The idle cost of a kind's GroupConcurrency in a worker (8 partitions,
// default timings): statements per second (pg_stat_statements, of the
// worker's database only) and server connections, with one limited kind
// and with none. A measurement, not a check: LEASEHOLD_SLOT_COST=1 runs it
// (about a minute; it creates the pg_stat_statements extension in the
// server's admin database).
func TestWorkerGroupSlotIdleCost(t *testing.T) {
	if os.Getenv("LEASEHOLD_SLOT_COST") == "" {
		t.Skip("a measurement: set LEASEHOLD_SLOT_COST=1")
	}
	admin := pgtest.PoolURL(t, os.Getenv("LEASEHOLD_TEST_DATABASE_URL"))
	_, err := admin.Exec(pgtest.Context(t), `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	pgtest.Must(t, err)
	const window = 45 * time.Second
	for _, limit := range []int{0, 3} {
		t.Run(fmt.Sprint("limit=", limit), func(t *testing.T) {
			t.Parallel()
			ctx := pgtest.Context(t)
			pool := pgtest.Pool(t)
			ws := queue.NewWorkers()
			queue.Handle(ws, func(context.Context, *queue.Work[fragile]) error { return nil },
				queue.WithPolicy(queue.Policy{GroupConcurrency: limit}))
			w, err := worker.New(pgtest.DBOn(t, pool), worker.Config{Group: "g", Partitions: 8, Workers: ws})
			pgtest.Must(t, err)
			pgtest.Must(t, w.Start(ctx))
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				w.Stop(sctx)
			}()
			time.Sleep(10 * time.Second)
			var dbid uint32
			var name string
			pgtest.Must(t, pool.QueryRow(ctx, `SELECT oid, datname FROM pg_database WHERE datname = current_database()`).Scan(&dbid, &name))
			_, err = admin.Exec(ctx, `SELECT pg_stat_statements_reset(0, $1, 0)`, dbid)
			pgtest.Must(t, err)
			time.Sleep(window)
			var calls int64
			var conns int
			pgtest.Must(t, admin.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE dbid = $1`, dbid).Scan(&calls))
			pgtest.Must(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1`, name).Scan(&conns))
			t.Logf("GroupConcurrency %d: %.2f statements/s idle over %v, %d server connections (the test's pool included)",
				limit, float64(calls)/window.Seconds(), window, conns)
		})
	}
}

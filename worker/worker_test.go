package worker_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/history"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// A fleet of three workers runs 600 transactional jobs while one leaves
// gracefully and another joins: every job is applied exactly once, each
// key's jobs in order, no stale write lands, and the leases' history shows
// strictly increasing tokens and no overlapping ownership.
func TestFleetAppliesEveryJobExactlyOnceInKeyOrder(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	fleetScenario(t, pgtest.DBOn(t, pool), pool)
}

// fleetScenario runs group "g" of 16 partitions on db: 600 transactional
// jobs of 40 keys, three workers, one leaving gracefully once 150 jobs
// ran and another joining, then 200 more jobs; every job must be applied
// exactly once in key order by a live owner, the leaving and the joining
// worker must both have run jobs, and the lease history must hold. admin
// reaches the same database directly: the setup and the checks.
func fleetScenario(t *testing.T, db *leasehold.DB, admin *pgxpool.Pool) {
	t.Helper()
	ctx := pgtest.Context(t)
	pgtest.Must(t, history.Install(ctx, admin, ""))
	group(t, admin, 16)
	ledgerSetup(t, admin)
	jobs, keys := enqueueDeposits(t, admin, 40, 15)
	handlers := func(name string) *queue.Workers {
		ws := queue.NewWorkers()
		queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
			time.Sleep(time.Millisecond)
			return record(name)(ctx, tx, w)
		})
		return ws
	}
	rows := func() int {
		var n int
		pgtest.Must(t, admin.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&n))
		return n
	}
	waitRows := func(n int) {
		for start := time.Now(); rows() < n; time.Sleep(10 * time.Millisecond) {
			if time.Since(start) > 30*time.Second {
				t.Fatalf("ledger has %d rows, waited for %d", rows(), n)
			}
		}
	}
	w1 := startOn(t, db, worker.Config{ID: "w1", Partitions: 16, Workers: handlers("w1")})
	startOn(t, db, worker.Config{ID: "w2", Partitions: 16, Workers: handlers("w2")})
	startOn(t, db, worker.Config{ID: "w3", Partitions: 16, Workers: handlers("w3")})
	waitRows(150)
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	pgtest.Must(t, w1.Stop(sctx))
	w4 := startOn(t, db, worker.Config{ID: "w4", Partitions: 16, Workers: handlers("w4")})
	// Once the joining worker owns partitions, more jobs for every key: it
	// runs some whatever the timing (the fleet could drain the first ones
	// before it joined, under load).
	for start := time.Now(); len(w4.Owned()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatal("the joining worker owns no partition after 30s")
		}
	}
	more, moreKeys := enqueueSeqs(t, admin, 40, 15, 20)
	maps.Copy(jobs, more)
	maps.Copy(keys, moreKeys)
	pgtest.WaitNoPendingJobs(t, admin, 60*time.Second)

	ledger := readLedger(t, admin)
	if bad := checkLedger(jobs, keys, ledger); len(bad) > 0 {
		t.Fatalf("%d violations, first: %v", len(bad), bad[:min(5, len(bad))])
	}
	by := map[string]int{}
	for _, e := range ledger {
		by[e.workerName]++
	}
	if by["w1"] == 0 || by["w4"] == 0 {
		t.Errorf("rows by worker %v: the leaving and the joining worker should both have run jobs", by)
	}
	vs, err := history.Load(ctx, admin, "")
	pgtest.Must(t, err)
	if r := history.Check(vs); !r.OK() {
		t.Fatalf("lease history: %v", r.Violations)
	}
}

// The negative control: checkLedger flags a duplicate, an out-of-order
// seq, a stale token and a missing job.
func TestCheckLedgerCatchesViolations(t *testing.T) {
	jobs := map[int64]deposit{1: {0}, 2: {1}, 3: {0}, 4: {0}}
	keys := map[int64]string{1: "a", 2: "a", 3: "b", 4: "c"}
	good := []entry{
		{n: 1, job: 1, key: "a", seq: 0, part: 0, token: 5},
		{n: 2, job: 3, key: "b", seq: 0, part: 1, token: 6},
		{n: 3, job: 2, key: "a", seq: 1, part: 0, token: 7},
		{n: 4, job: 4, key: "c", seq: 0, part: 1, token: 6},
	}
	if bad := checkLedger(jobs, keys, good); len(bad) != 0 {
		t.Fatalf("a valid ledger is flagged: %v", bad)
	}
	for name, ledger := range map[string][]entry{
		"duplicate": append(slices.Clone(good), entry{n: 5, job: 4, key: "c", seq: 0, part: 1, token: 8}),
		"missing":   good[:3],
		"order":     {good[2], good[0], good[1], good[3]},
		"stale":     {good[0], good[1], good[2], {n: 4, job: 4, key: "c", seq: 0, part: 0, token: 6}},
	} {
		if bad := checkLedger(jobs, keys, ledger); len(bad) == 0 {
			t.Errorf("%s: not flagged", name)
		}
	}
}

// A handoff cancels the handlers of the partitions handed off, with
// partition.ErrHandoff as the cause; a handler that ignores it and commits
// after the lease was released is refused by the fence, and the new owner
// applies the job once.
func TestHandoffCancelsHandlersAndFencesTheirLateCommits(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	group(t, pool, 4)
	ledgerSetup(t, pool)
	var keysByPartition [4]string
	for i, found := 0, 0; found < 4; i++ {
		k := fmt.Sprint("k", i)
		if p := partition.OfString(k, 4); keysByPartition[p] == "" {
			keysByPartition[p] = k
			found++
		}
	}
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	for _, k := range keysByPartition {
		_, err := c.Enqueue(ctx, queue.Job{Group: "g", Key: k, Args: deposit{0}})
		pgtest.Must(t, err)
	}

	var mu sync.Mutex
	var causes []error
	var started atomic.Int32
	stubborn := queue.NewWorkers()
	queue.HandleTx(stubborn, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
		started.Add(1)
		<-ctx.Done()
		mu.Lock()
		causes = append(causes, context.Cause(ctx))
		mu.Unlock()
		time.Sleep(time.Second) // ignores the cancellation, past HandoffTimeout
		return record("w1")(context.WithoutCancel(ctx), tx, w)
	})
	var fenced atomic.Int32
	cfg := worker.Config{ID: "w1", Partitions: 4, Workers: stubborn, HandoffTimeout: 300 * time.Millisecond,
		StopGrace: 100 * time.Millisecond}
	cfg.Queue.Hooks.OnJob = func(e queue.JobEvent) {
		if e.Outcome == queue.OutcomeFenced {
			fenced.Add(1)
		}
	}
	w1 := start(t, pool, cfg)
	for start := time.Now(); started.Load() < 4; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d of 4 handlers started", started.Load())
		}
	}
	prompt := queue.NewWorkers()
	queue.HandleTx(prompt, record("w2"))
	start(t, pool, worker.Config{ID: "w2", Partitions: 4, Workers: prompt})
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := len(causes)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("no handler of w1 was cancelled by the handoff")
		}
	}
	time.Sleep(1500 * time.Millisecond) // the cancelled handlers' late commits
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pgtest.Must(t, w1.Stop(sctx))
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)

	ledger := readLedger(t, pool)
	seen := map[int64]bool{}
	for _, e := range ledger {
		if e.workerName != "w2" || seen[e.job] {
			t.Errorf("ledger row %+v: only w2 may apply each job, once", e)
		}
		seen[e.job] = true
	}
	if len(seen) != 4 {
		t.Errorf("%d of 4 jobs applied", len(seen))
	}
	for start := time.Now(); fenced.Load() < 4 && time.Since(start) < 5*time.Second; {
		time.Sleep(20 * time.Millisecond) // the last late commits, after Stop
	}
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(causes[0], partition.ErrHandoff) {
		t.Errorf("first cancellation's cause %v; want ErrHandoff", causes[0])
	}
	if fenced.Load() != 4 {
		t.Errorf("%d of w1's 4 late commits refused by the fence", fenced.Load())
	}
}

// Stop lets a running job finish and records it, then releases the leases:
// the remaining worker owns every partition at once, long before the TTL
// (30s) would have let it.
func TestStopFinishesRunningJobsAndReleasesAtOnce(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	group(t, pool, 8)
	var runs atomic.Int32
	running := make(chan struct{}, 1)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[deposit]) error {
		runs.Add(1)
		running <- struct{}{}
		time.Sleep(300 * time.Millisecond)
		return ctx.Err() // not cancelled: a graceful stop lets it finish
	})
	cfg := func(id string) worker.Config {
		c := worker.Config{ID: id, Workers: ws}
		c.Lease.TTL = 30 * time.Second
		return c
	}
	w1 := start(t, pool, cfg("w1"))
	w2 := start(t, pool, cfg("w2"))
	var key string
	for start := time.Now(); key == ""; time.Sleep(20 * time.Millisecond) {
		if o1, o2 := len(w1.Owned()), len(w2.Owned()); o1 > 0 && o2 > 0 && o1+o2 == 8 {
			for p := range w1.Owned() {
				for i := 0; key == ""; i++ {
					if k := fmt.Sprint("k", i); partition.OfString(k, 8) == p {
						key = k
					}
				}
				break
			}
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("the two workers did not converge")
		}
	}
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	res, err := c.Enqueue(ctx, queue.Job{Group: "g", Key: key, Args: deposit{0}})
	pgtest.Must(t, err)
	<-running
	stopped := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	pgtest.Must(t, w1.Stop(sctx))
	for len(w2.Owned()) < 8 {
		if time.Since(stopped) > 10*time.Second {
			t.Fatalf("w2 owns %d of 8 partitions 10s after w1 stopped: leases not released", len(w2.Owned()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("w2 owned every partition %v after w1's Stop began", time.Since(stopped))
	info, err := c.JobInfo(ctx, res.ID)
	pgtest.Must(t, err)
	if info.State != "completed" || info.Attempt != 1 || runs.Load() != 1 {
		t.Fatalf("job %s after %d attempts, %d runs; want completed by its one run", info.State, info.Attempt, runs.Load())
	}
}

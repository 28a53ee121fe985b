package queue_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// takeover ends the current grant of partition 0 of "emails" abruptly (its
// lease expires in the database and its Run is left as it is, like a
// crashed process's) and starts a Run under a new grant. It returns the new
// Run's handoff (a graceful end); cleanup hands it off and waits for it.
func takeover(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ws *queue.Workers) context.CancelCauseFunc {
	t.Helper()
	_, err := pool.Exec(ctx, `UPDATE leasehold.leases SET expires_at = clock_timestamp() WHERE name = $1`,
		partition.LeaseName("emails", 0))
	pgtest.Must(t, err)
	handoff, _ := newAfterCrash(t, ctx, pool, false).run(ctx, queue.ProcessorConfig{Workers: ws})
	return handoff
}

// txStep is a job for a transactional handler.
type txStep struct {
	Name string `json:"name"`
}

func (txStep) Kind() string { return "txstep" }

type runRecord struct {
	name    string
	attempt int
}

// A job that takes down every worker that runs it (here: its handler never
// returns, as if the process had died) is discarded once it has spent its
// attempts, each spent before a run that follows an abrupt end. The jobs
// that ran beside it are not charged for its crashes, and the jobs queued
// behind it run.
func TestCrashLoopingJobIsDiscarded(t *testing.T) {
	t.Parallel()
	// A rate-limited kind's jobs are left by the recovery to the pipeline
	// (which respects the rate): charged all the same, so a poison job of
	// the kind runs out of attempts too.
	for name, pol := range map[string]queue.Policy{"plain": {}, "rate-limited": {KeyRate: queue.Rate{Starts: 1000, Per: 20 * time.Millisecond}}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			crashLoop(t, pol)
		})
	}
}

func crashLoop(t *testing.T, pol queue.Policy) {
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	keys := keysIn(0, 4, "crash")
	down := make(chan int, 16)     // a poison run took its worker down, with its attempt
	forever := make(chan struct{}) // closed when the test ends
	var mu sync.Mutex
	var runs []runRecord
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		mu.Lock()
		runs = append(runs, runRecord{w.Args.Name, w.Attempt})
		mu.Unlock()
		if w.Args.Name == "poison" {
			down <- w.Attempt
			<-forever // the worker is gone: no outcome, ever
		}
		return nil
	}, queue.WithPolicy(pol))
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[txStep]) error {
		mu.Lock()
		runs = append(runs, runRecord{w.Args.Name, w.Attempt})
		mu.Unlock()
		return nil
	})
	defer close(forever) // before the cleanups wait for the Runs

	jobs := []queue.Job{
		{Group: "emails", Key: keys[0], Args: step{"a"}},
		{Group: "emails", Key: keys[1], Args: txStep{"b"}}, // transactional
		{Group: "emails", Key: keys[2], Args: step{"poison"}, MaxAttempts: 3},
		{Group: "emails", Key: keys[2], Args: step{"c"}}, // behind the poison job: same key
		{Group: "emails", Key: keys[3], Args: txStep{"d"}},
	}
	ids := map[string]int64{}
	for i, name := range []string{"a", "b", "poison", "c", "d"} {
		res, err := c.Enqueue(ctx, jobs[i])
		pgtest.Must(t, err)
		ids[name] = res.ID
	}

	var poisonAttempts []int
	for round := 1; ; round++ {
		if round > 6 {
			t.Fatalf("the poison job still blocks its key after %d abrupt ends; its runs' attempts: %v", round-1, poisonAttempts)
		}
		takeover(t, ctx, pool, ws)
		if done := waitFor(t, ctx, pool, down, ids["c"]); done {
			break
		} else {
			poisonAttempts = append(poisonAttempts, <-down)
		}
		if round == 1 {
			// The jobs beside the poison job ran in the first grant, and
			// their outcomes are recorded as they come, while the poison
			// job still runs: none of them runs again.
			for _, name := range []string{"a", "b", "d"} {
				waitJob(t, ctx, c, ids[name], "completed")
			}
		}
	}
	if fmt.Sprint(poisonAttempts) != "[1 1 2 3]" {
		t.Errorf("the poison job's runs had attempts %v; want [1 1 2 3] (the first run, before any abrupt end, is not charged)", poisonAttempts)
	}
	want := map[string]struct {
		state   queue.JobState
		attempt int
	}{"a": {"completed", 1}, "b": {"completed", 1}, "poison": {"discarded", 3}, "c": {"completed", 1}, "d": {"completed", 1}}
	for name, w := range want {
		info, err := c.JobInfo(ctx, ids[name])
		pgtest.Must(t, err)
		if info.State != w.state || info.Attempt != w.attempt {
			t.Errorf("job %s: %s after %d attempts; want %s after %d", name, info.State, info.Attempt, w.state, w.attempt)
		}
	}
	poison, err := c.JobInfo(ctx, ids["poison"])
	pgtest.Must(t, err)
	if !strings.Contains(errorsText(poison.Errors), "without an outcome") {
		t.Errorf("the discarded job's errors %s do not say why", errorsText(poison.Errors))
	}
	mu.Lock()
	defer mu.Unlock()
	count := map[string]int{}
	for _, r := range runs {
		count[r.name]++
	}
	// a, b and d ran beside the poison job in the first grant, their
	// outcomes recorded while it ran; c waited behind it and ran once it was
	// discarded.
	if count["a"] != 1 || count["b"] != 1 || count["c"] != 1 || count["d"] != 1 || count["poison"] != 4 {
		t.Errorf("runs per job %v; want a 1, b 1, poison 4, c 1, d 1", count)
	}
}

// waitFor waits until the poison job took its worker down (false) or job id
// was completed (true).
func waitFor(t *testing.T, ctx context.Context, pool *pgxpool.Pool, down chan int, id int64) bool {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if len(down) > 0 {
			return false
		}
		var state string
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT state FROM leasehold.jobs WHERE id = $1`, id).Scan(&state))
		if state == "completed" {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("neither a crash nor the job's completion within 20s")
	return false
}

// A run that ends cleanly (a handoff that interrupts its job) charges
// nothing: the next grant runs the job as its first attempt, in a normal
// batch.
func TestCleanHandoffChargesNoAttempt(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	started := make(chan int, 4)
	stored := make(chan int, 4) // the job's attempt as stored while it runs
	var runs atomic.Int32
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		started <- w.Attempt
		if runs.Add(1) == 1 { // the first run waits for its handoff
			<-ctx.Done()
			return ctx.Err()
		}
		var a int
		if err := pool.QueryRow(ctx, `SELECT attempt FROM leasehold.jobs WHERE id = $1`, w.ID).Scan(&a); err != nil {
			return err
		}
		stored <- a
		return nil
	})
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: keysIn(0, 1, "clean")[0], Args: step{"x"}})
	pgtest.Must(t, err)
	handoff := takeover(t, ctx, pool, ws)
	if a := <-started; a != 1 {
		t.Fatalf("first run's attempt %d; want 1", a)
	}
	handoff(partition.ErrHandoff)
	// The Run records its clean end before it returns; wait for it.
	for start := time.Now(); mark(t, ctx, pool) != 0; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the handed-off run did not record its clean end")
		}
	}
	takeover(t, ctx, pool, ws)
	select {
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not run again after the handoff")
	case a := <-started:
		if a != 1 {
			t.Errorf("after a clean handoff the job ran as attempt %d; want 1 (nothing charged)", a)
		}
	}
	if a := <-stored; a != 0 {
		t.Errorf("the job's stored attempt was %d while it ran after a clean handoff; want 0 (a normal batch: no attempt spent before the run)", a)
	}
	if info := waitJob(t, ctx, c, res.ID, "completed"); info.Attempt != 1 {
		t.Errorf("job completed after %d attempts; want 1", info.Attempt)
	}
}

// A run that starts after a newer grant recorded its own (a stale owner
// whose start was delayed) returns at once, running nothing.
func TestStaleRunStartIsFenced(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var ran atomic.Int32
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		ran.Add(1)
		return nil
	})
	_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: keysIn(0, 1, "stale")[0], Args: step{"x"}})
	pgtest.Must(t, err)
	a := newAfterCrash(t, ctx, pool, false)
	_, err = pool.Exec(ctx, `INSERT INTO leasehold.queue_runs VALUES ('emails', 0, $1, false)`, int64(a.lease.Token())+1)
	pgtest.Must(t, err)
	_, done := a.run(ctx, queue.ProcessorConfig{Workers: ws})
	a.wait(done) // fails the test unless a run older than the recorded one returns at once
	if n := ran.Load(); n != 0 {
		t.Fatalf("the stale run ran %d job(s)", n)
	}
}

package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// afterCrash holds the lease of partition 0 of "emails" and runs
// Processors under it, as the owner that follows an abrupt end.
type afterCrash struct {
	t     *testing.T
	pool  *pgxpool.Pool
	lease *lease.Lease
}

// newAfterCrash acquires the partition's lease and, when abrupt, records an
// older grant's run as still open in queue_runs: the previous run ended
// abruptly, so the first Run's first fetch is recovered.
func newAfterCrash(t *testing.T, ctx context.Context, pool *pgxpool.Pool, abrupt bool) *afterCrash {
	t.Helper()
	lc, err := lease.New(pgtest.DBOn(t, pool), lease.Config{Owner: "next"})
	pgtest.Must(t, err)
	t.Cleanup(func() { lc.Close(context.Background()) })
	l, err := lc.TryAcquire(ctx, partition.LeaseName("emails", 0))
	pgtest.Must(t, err)
	if abrupt {
		_, err = pool.Exec(ctx, `INSERT INTO leasehold.queue_runs VALUES ('emails', 0, $1, true)`, int64(l.Token())-1)
		pgtest.Must(t, err)
	}
	return &afterCrash{t: t, pool: pool, lease: l}
}

// run starts a Run under the lease with cfg (PollInterval
// defaulted for tests). It returns a cancel that hands the partition off
// and a channel closed when the Run returned; cleanup cancels and waits.
func (a *afterCrash) run(ctx context.Context, cfg queue.ProcessorConfig) (context.CancelCauseFunc, chan struct{}) {
	a.t.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	p, err := queue.NewProcessor(pgtest.DBOn(a.t, a.pool), cfg)
	pgtest.Must(a.t, err)
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(rctx, partition.Ownership{Group: "emails", Partition: 0, Token: a.lease.Token(), Lease: a.lease})
	}()
	a.t.Cleanup(func() {
		cancel(partition.ErrHandoff)
		<-done
	})
	return cancel, done
}

// wait waits for a Run to return.
func (a *afterCrash) wait(done chan struct{}) {
	a.t.Helper()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		a.t.Fatal("the Run did not return within 20s")
	}
}

// mark returns the partition's token in queue_runs while its run is open:
// 0 when it is closed (or no run was ever recorded).
func mark(t *testing.T, ctx context.Context, pool *pgxpool.Pool) int64 {
	t.Helper()
	var tok *int64
	err := pool.QueryRow(ctx, `SELECT CASE WHEN open THEN token END FROM leasehold.queue_runs WHERE group_name = 'emails' AND partition = 0`).Scan(&tok)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	pgtest.Must(t, err)
	if tok == nil {
		return 0
	}
	return *tok
}

// waitJob waits until job id is in state.
func waitJob(t *testing.T, ctx context.Context, c *queue.Client, id int64, state queue.JobState) queue.JobInfo {
	t.Helper()
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		info, err := c.JobInfo(ctx, id)
		pgtest.Must(t, err)
		if info.State == state {
			return info
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("job %d still %s after 20s; want %s", id, info.State, state)
		}
	}
}

// A job of a recovered batch whose outcome was recorded and that is due
// again when the batch is fetched again (after a database error) is charged
// anew: its earlier charge was spent by its recorded outcome. (It was taken
// for still charged: its run was free and, snoozed, its attempt count went
// below zero.) One whose outcome was not recorded runs again on the same
// charge, as the same attempt, even its last.
func TestRecoveredJobFetchedAgainIsChargedAgain(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	keys := keysIn(0, 2, "refetch")
	var mu sync.Mutex
	var attempts []int // of job a's runs
	var attemptsB []int
	var locked atomic.Bool
	unrecorded := make(chan struct{}) // closed at b's first unrecorded outcome
	var once sync.Once
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		if w.Args.Name == "a" {
			mu.Lock()
			attempts = append(attempts, w.Attempt)
			n := len(attempts)
			mu.Unlock()
			if n <= 2 {
				return queue.Snooze(0) // due again at once
			}
			return nil
		}
		mu.Lock()
		attemptsB = append(attemptsB, w.Attempt)
		mu.Unlock()
		if locked.CompareAndSwap(false, true) {
			// b's outcome cannot be recorded: the fence check cannot lock
			// the lease row until the attempt to record it has failed
			// (a fixed 300ms was not always long enough on a loaded
			// machine: the recording came after it, and succeeded).
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `SELECT FROM leasehold.leases WHERE name = $1 FOR UPDATE`, partition.LeaseName("emails", 0)); err != nil {
				tx.Rollback(context.Background())
				return err
			}
			go func() {
				select {
				case <-unrecorded:
				case <-time.After(20 * time.Second): // the test fails: b ran once
				}
				tx.Rollback(context.Background())
			}()
		}
		return nil
	})
	a := newAfterCrash(t, ctx, pool, true)
	res, err := c.EnqueueMany(ctx, queue.Job{Group: "emails", Key: keys[0], Args: step{"a"}},
		queue.Job{Group: "emails", Key: keys[1], Args: step{"b"}, MaxAttempts: 1})
	pgtest.Must(t, err)
	a.run(ctx, queue.ProcessorConfig{Workers: ws, Fence: lease.FenceConfig{LockTimeout: 20 * time.Millisecond},
		Hooks: queue.Hooks{OnJob: func(ev queue.JobEvent) {
			if ev.ID == res[1].ID && ev.Outcome == queue.OutcomeUnrecorded {
				once.Do(func() { close(unrecorded) })
			}
		}}})
	ia := waitJob(t, ctx, c, res[0].ID, "completed")
	ib := waitJob(t, ctx, c, res[1].ID, "completed")
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(attempts) != "[1 1 1]" || ia.Attempt != 1 || ib.Attempt != 1 {
		t.Fatalf("job a ran as attempts %v and ended after %d attempt(s), b after %d; want [1 1 1] (snoozes spend nothing), 1 and 1",
			attempts, ia.Attempt, ib.Attempt)
	}
	if len(attemptsB) < 2 {
		t.Fatalf("job b ran %d time(s); want more than one (its first outcome could not be recorded)", len(attemptsB))
	}
	for _, n := range attemptsB {
		if n != 1 {
			t.Fatalf("job b ran as attempts %v; want attempt 1 every time (on the same charge)", attemptsB)
		}
	}
}

// A job of a recovered batch interrupted by a handoff gets back the attempt
// spent before its run: a clean handoff charges nothing. (It kept it, and a
// job on its last attempt was then discarded by the next owner without
// running, with ErrNoOutcome.)
func TestInterruptedRecoveredJobIsNotCharged(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	started := make(chan int, 4)
	var runs atomic.Int32
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		started <- w.Attempt
		if runs.Add(1) == 1 { // the first run waits for its handoff
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	a := newAfterCrash(t, ctx, pool, true)
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: keysIn(0, 1, "interrupted")[0], Args: step{"x"}, MaxAttempts: 1})
	pgtest.Must(t, err)
	handoff, done := a.run(ctx, queue.ProcessorConfig{Workers: ws})
	<-started
	handoff(partition.ErrHandoff)
	a.wait(done)
	info, err := c.JobInfo(ctx, res.ID)
	pgtest.Must(t, err)
	if info.State != "pending" || info.Attempt != 0 {
		t.Fatalf("after its interrupted run the job is %s after %d attempt(s); want pending after 0", info.State, info.Attempt)
	}
	_, done = a.run(ctx, queue.ProcessorConfig{Workers: ws})
	info = waitJob(t, ctx, c, res.ID, "completed")
	if info.Attempt != 1 {
		t.Fatalf("the job completed after %d attempts; want 1", info.Attempt)
	}
}

// A handoff in the middle of a recovered batch starts and charges none of
// its remaining jobs, and leaves the partition marked as ended abruptly:
// the next owner recovers the rest. (The run was recorded as ended cleanly,
// and the next owner ran the rest, a crashing job among them, uncharged.)
func TestHandoffDuringRecoveryLeavesTheRestToTheNextOwner(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	keys := keysIn(0, 2, "midway")
	var handoff atomic.Pointer[context.CancelCauseFunc]
	var ranB atomic.Bool
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		if w.Args.Name == "a" {
			(*handoff.Load())(partition.ErrHandoff)
			return nil
		}
		ranB.Store(true)
		return nil
	})
	a := newAfterCrash(t, ctx, pool, true)
	res, err := c.EnqueueMany(ctx, queue.Job{Group: "emails", Key: keys[0], Args: step{"a"}},
		queue.Job{Group: "emails", Key: keys[1], Args: step{"b"}})
	pgtest.Must(t, err)
	p, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws})
	pgtest.Must(t, err)
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	handoff.Store(&cancel)
	p.Run(rctx, partition.Ownership{Group: "emails", Partition: 0, Token: a.lease.Token(), Lease: a.lease})
	ia, err := c.JobInfo(ctx, res[0].ID)
	pgtest.Must(t, err)
	ib, err := c.JobInfo(ctx, res[1].ID)
	pgtest.Must(t, err)
	if ia.State != "completed" || ia.Attempt != 1 || ib.State != "pending" || ib.Attempt != 0 || ranB.Load() {
		t.Errorf("a %s after %d attempt(s), b %s after %d (ran: %v); want a completed after 1, b pending after 0, not run",
			ia.State, ia.Attempt, ib.State, ib.Attempt, ranB.Load())
	}
	if m := mark(t, ctx, pool); m != int64(a.lease.Token()) {
		t.Errorf("queue_runs holds %d after a recovery cut short; want the run's token %d (not ended cleanly)", m, a.lease.Token())
	}
}

// A job that an operator cancels while a recovered batch runs is neither
// charged nor run.
func TestJobCancelledDuringRecoveryDoesNotRun(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	keys := keysIn(0, 2, "cancelled")
	var victim atomic.Int64
	var ranB atomic.Bool
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		if w.Args.Name == "a" {
			_, err := c.Cancel(ctx, victim.Load())
			return err
		}
		ranB.Store(true)
		return nil
	})
	a := newAfterCrash(t, ctx, pool, true)
	res, err := c.EnqueueMany(ctx, queue.Job{Group: "emails", Key: keys[0], Args: step{"a"}},
		queue.Job{Group: "emails", Key: keys[1], Args: step{"b"}})
	pgtest.Must(t, err)
	victim.Store(res[1].ID)
	a.run(ctx, queue.ProcessorConfig{Workers: ws})
	waitJob(t, ctx, c, res[0].ID, "completed")
	ib, err := c.JobInfo(ctx, res[1].ID)
	pgtest.Must(t, err)
	if ib.State != "cancelled" || ib.Attempt != 0 || ranB.Load() {
		t.Fatalf("b %s after %d attempt(s), ran: %v; want cancelled after 0, not run", ib.State, ib.Attempt, ranB.Load())
	}
}

// A run that ends after a newer grant recorded its own run leaves that
// record alone: the newer run may yet end abruptly.
func TestStaleRunEndKeepsTheNewerRunsMark(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	a := newAfterCrash(t, ctx, pool, false)
	handoff, done := a.run(ctx, queue.ProcessorConfig{Workers: queue.NewWorkers()})
	for start := time.Now(); mark(t, ctx, pool) != int64(a.lease.Token()); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the run did not record its start")
		}
	}
	newer := int64(a.lease.Token()) + 1
	_, err := pool.Exec(ctx, `UPDATE leasehold.queue_runs SET token = $1, open = true`, newer)
	pgtest.Must(t, err)
	handoff(partition.ErrHandoff)
	a.wait(done)
	if m := mark(t, ctx, pool); m != newer {
		t.Fatalf("queue_runs holds %d after the older run ended; want the newer run's %d", m, newer)
	}
}

// A run whose last batch's outcomes could not be recorded does not record
// a clean end: those jobs ran without an outcome.
func TestUnrecordedLastBatchIsNotACleanEnd(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var handoff atomic.Pointer[context.CancelCauseFunc]
	var lock atomic.Pointer[pgx.Tx]
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		tx, err := pool.Begin(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		lock.Store(&tx)
		if _, err := tx.Exec(context.WithoutCancel(ctx), `SELECT FROM leasehold.leases WHERE name = $1 FOR UPDATE`, partition.LeaseName("emails", 0)); err != nil {
			return err
		}
		(*handoff.Load())(partition.ErrHandoff)
		return nil
	})
	t.Cleanup(func() {
		if tx := lock.Load(); tx != nil {
			(*tx).Rollback(context.Background())
		}
	})
	a := newAfterCrash(t, ctx, pool, false)
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: keysIn(0, 1, "unrecorded")[0], Args: step{"x"}})
	pgtest.Must(t, err)
	p, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws,
		Fence: lease.FenceConfig{LockTimeout: 20 * time.Millisecond}})
	pgtest.Must(t, err)
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	handoff.Store(&cancel)
	p.Run(rctx, partition.Ownership{Group: "emails", Partition: 0, Token: a.lease.Token(), Lease: a.lease})
	pgtest.Must(t, (*lock.Load()).Rollback(ctx))
	info, err := c.JobInfo(ctx, res.ID)
	pgtest.Must(t, err)
	if info.State != "pending" {
		t.Fatalf("job %s; want pending (its outcome could not be recorded)", info.State)
	}
	if m := mark(t, ctx, pool); m != int64(a.lease.Token()) {
		t.Fatalf("queue_runs holds %d; want the run's token %d (not ended cleanly)", m, a.lease.Token())
	}
}

// Only the first batch after an abrupt end is recovered: later batches run
// their jobs PartitionConcurrency at once again.
func TestBatchesAfterRecoveryRunConcurrently(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	keys := keysIn(0, 3, "after")
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		if w.Args.Name == "first" {
			return nil
		}
		arrived.Done()
		select {
		case <-both:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("ran alone")
		}
	})
	a := newAfterCrash(t, ctx, pool, true)
	first, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: keys[0], Args: step{"first"}})
	pgtest.Must(t, err)
	a.run(ctx, queue.ProcessorConfig{Workers: ws, PartitionConcurrency: 2})
	waitJob(t, ctx, c, first.ID, "completed")
	res, err := c.EnqueueMany(ctx, queue.Job{Group: "emails", Key: keys[1], Args: step{"p"}},
		queue.Job{Group: "emails", Key: keys[2], Args: step{"q"}})
	pgtest.Must(t, err)
	for _, r := range res {
		if info := waitJob(t, ctx, c, r.ID, "completed"); info.Attempt != 1 {
			t.Errorf("job %d completed after %d attempts; want 1", r.ID, info.Attempt)
		}
	}
}

// In a recovered batch, whose runs are charged before they start, a failure
// is still reported as retried and recorded in the job's errors (even with
// the text of the previous failure), and a snooze is reported as snoozed
// and spends nothing.
func TestRecoveredOutcomesAreReportedAndRecorded(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	keys := keysIn(0, 2, "reported")
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		if w.Args.Name == "fail" {
			return errors.New("boom")
		}
		return queue.Snooze(time.Hour)
	})
	a := newAfterCrash(t, ctx, pool, true)
	res, err := c.EnqueueMany(ctx, queue.Job{Group: "emails", Key: keys[0], Args: step{"fail"}},
		queue.Job{Group: "emails", Key: keys[1], Args: step{"snooze"}})
	pgtest.Must(t, err)
	_, err = pool.Exec(ctx, `UPDATE leasehold.jobs SET attempt = 1, errors = '[{"attempt": 1, "error": "boom"}]' WHERE id = $1`, res[0].ID)
	pgtest.Must(t, err)
	events := make(chan queue.JobEvent, 4)
	a.run(ctx, queue.ProcessorConfig{Workers: ws, MinRetry: time.Hour, MaxRetry: time.Hour,
		Hooks: queue.Hooks{OnJob: func(e queue.JobEvent) { events <- e }}})
	got := map[int64]string{}
	for len(got) < 2 {
		select {
		case e := <-events:
			got[e.ID] = fmt.Sprint(e.Outcome, " ", e.Attempt)
		case <-time.After(20 * time.Second):
			t.Fatalf("events %v after 20s; want 2", got)
		}
	}
	if got[res[0].ID] != "retried 2" || got[res[1].ID] != "snoozed 1" {
		t.Errorf("the failure was reported %q, the snooze %q; want \"retried 2\" and \"snoozed 1\"", got[res[0].ID], got[res[1].ID])
	}
	fail, err := c.JobInfo(ctx, res[0].ID)
	pgtest.Must(t, err)
	if errs := fail.Errors; fail.Attempt != 2 || len(errs) != 2 || errs[1].Attempt != 2 {
		t.Errorf("the failed job has %d attempts and errors %+v; want 2, with both failures", fail.Attempt, fail.Errors)
	}
	snoozed, err := c.JobInfo(ctx, res[1].ID)
	pgtest.Must(t, err)
	if snoozed.Attempt != 0 {
		t.Errorf("the snoozed job has %d attempts; want 0", snoozed.Attempt)
	}
}

// A job whose kind has no handler, looked at again and again, has its
// message recorded once: a repeated message is appended only after an
// attempt was spent.
func TestUnknownKindMessageIsRecordedOnce(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	a := newAfterCrash(t, ctx, pool, false)
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: keysIn(0, 1, "orphan")[0], Args: orphan{}})
	pgtest.Must(t, err)
	var looks atomic.Int32
	a.run(ctx, queue.ProcessorConfig{Workers: queue.NewWorkers(), UnknownKindDelay: time.Millisecond,
		Hooks: queue.Hooks{OnJob: func(queue.JobEvent) { looks.Add(1) }}})
	for start := time.Now(); looks.Load() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the job was looked at %d time(s) in 20s; want 3", looks.Load())
		}
	}
	info, err := c.JobInfo(ctx, res.ID)
	pgtest.Must(t, err)
	if info.Attempt != 0 || len(info.Errors) != 1 {
		t.Fatalf("after %d looks the job has %d attempts and errors %+v; want 0 and one", looks.Load(), info.Attempt, info.Errors)
	}
}

// A group paused while a recovered batch runs starts no further job of the
// batch: the batch stops at the job after the pause was seen, and is
// recovered once the group is resumed. The handler of the first job pauses
// the group and waits until the Processor has seen it; the other jobs must
// not run until Resume. Without the check before each recovered job, they
// all run in the paused group.
func TestRecoveryStopsWhenTheGroupIsPaused(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	a := newAfterCrash(t, ctx, pool, true)
	keys := keysIn(0, 3, "recpause")
	var ran atomic.Int32
	var p atomic.Pointer[queue.Processor]
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		if ran.Add(1) == 1 {
			if err := c.Pause(ctx, "emails", "", "mid-recovery"); err != nil {
				return err
			}
			for !queue.PauseSeen(p.Load(), "emails", "") {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
		return nil
	})
	var ids []int64
	for i, k := range keys {
		r, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: k, Args: step{Name: fmt.Sprint(i)}})
		pgtest.Must(t, err)
		ids = append(ids, r.ID)
	}
	proc, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond, PauseInterval: 10 * time.Millisecond})
	pgtest.Must(t, err)
	p.Store(proc)
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		proc.Run(rctx, partition.Ownership{Group: "emails", Partition: 0, Token: a.lease.Token(), Lease: a.lease})
	}()
	t.Cleanup(func() {
		cancel(partition.ErrHandoff)
		<-done
	})
	waitJob(t, ctx, c, ids[0], queue.StateCompleted)
	// The Processor left the rest out at least once after the first job's
	// outcome was recorded.
	base := queue.PauseSkips(proc)
	waitUntil(t, "a skipped recovery", func() bool { return queue.PauseSkips(proc) > base })
	if n := ran.Load(); n != 1 {
		t.Fatalf("%d jobs ran; want 1: the group was paused after the first", n)
	}
	pgtest.Must(t, c.Resume(ctx, "emails", ""))
	for _, id := range ids[1:] {
		waitJob(t, ctx, c, id, queue.StateCompleted)
	}
}

package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// member starts a member of "emails" running a Processor with cfg (and
// Listen when listen is true); it is stopped when the test ends.
func member(t *testing.T, pool *pgxpool.Pool, partitions int, cfg queue.ProcessorConfig, listen bool) *partition.Member {
	t.Helper()
	_, m := groupMember(t, pool, "emails", partitions, cfg, listen)
	return m
}

// groupMember starts a member of group with partitions partitions running
// a Processor with cfg, listening for notifications if listen; it is
// stopped when the test ends.
func groupMember(t *testing.T, pool *pgxpool.Pool, group string, partitions int, cfg queue.ProcessorConfig, listen bool) (*queue.Processor, *partition.Member) {
	t.Helper()
	p, err := queue.NewProcessor(pgtest.DBOn(t, pool), cfg)
	pgtest.Must(t, err)
	return p, serveWith(t, pool, group, partitions, p, listen)
}

// serveWith starts a member of group with partitions partitions running
// p, listening for notifications if listen; it is stopped when the test
// ends.
func serveWith(t *testing.T, pool *pgxpool.Pool, group string, partitions int, p *queue.Processor, listen bool) *partition.Member {
	t.Helper()
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: group, Partitions: partitions, Run: p.Run,
		PollInterval: 100 * time.Millisecond, Lease: lease.Config{TTL: time.Second}})
	pgtest.Must(t, err)
	lctx, stopListen := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if listen {
			p.Listen(lctx)
		}
	}()
	pgtest.Must(t, m.Start(pgtest.Context(t)))
	stop := sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Stop(ctx)
		stopListen()
		<-done
	})
	t.Cleanup(stop)
	return m
}

// waitOwned waits until m owns all n partitions.
func waitOwned(t *testing.T, m *partition.Member, n int) {
	t.Helper()
	for start := time.Now(); len(m.Owned()) < n; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("owns %d of %d partitions", len(m.Owned()), n)
		}
	}
}

// waitPollsSettled waits until p's member polled, and then did not poll
// again for 300 ms (15 times minPollGap): the polls that follow its grants
// are done, and the next comes PollInterval later.
func waitPollsSettled(t *testing.T, p *queue.Processor) {
	t.Helper()
	last, since := queue.PausePolls(p), time.Now()
	waitUntil(t, "the member's polls settled", func() bool {
		if n := queue.PausePolls(p); n != last || n == 0 {
			last, since = n, time.Now()
			return false
		}
		return time.Since(since) >= 300*time.Millisecond
	})
}

// waitFetched waits until p's fetches have answered n partitions' asks:
// once every partition has fetched once, it sleeps until woken or polled.
// (A sleep instead let a partition whose first fetch came after a test's
// enqueue run the job without a notification, under load.)
func waitFetched(t *testing.T, p *queue.Processor, n int64) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d partitions fetched", n), func() bool { return queue.FetchedPartitions(p) >= n })
}

// With Listen, an idle partition whose poll interval is an hour runs a job
// as soon as it is enqueued; without Listen (the control) it does not.
func TestListenWakesAnIdlePartition(t *testing.T) {
	t.Parallel()
	for _, listen := range []bool{true, false} {
		t.Run(fmt.Sprint("listen=", listen), func(t *testing.T) {
			t.Parallel()
			ctx := pgtest.Context(t)
			pool, c := setup(t)
			ran := make(chan struct{}, 10)
			ws := queue.NewWorkers()
			queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
				ran <- struct{}{}
				return nil
			})
			p, m := groupMember(t, pool, "emails", 8, queue.ProcessorConfig{Workers: ws, PollInterval: time.Hour}, listen)
			waitOwned(t, m, 8)
			waitFetched(t, p, 8)
			// And the member's poll that follows grants (minPollGap after
			// them) done: enqueued before it, the job is found by that
			// poll, not woken by a notification (the control failed 1 run
			// in 30 under load so).
			waitPollsSettled(t, p)
			_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: step{"now"}})
			pgtest.Must(t, err)
			select {
			case <-ran:
				if !listen {
					t.Fatal("ran without a notification: the control cannot tell")
				}
			case <-time.After(3 * time.Second):
				if listen {
					t.Fatal("the enqueued job did not start: the notification did not wake its partition")
				}
			}
		})
	}
}

// A job due later sends no notification (its partition polls for it), and
// a batch of jobs notifies each partition once.
func TestEnqueueNotifiesEachPartitionOfDueJobsOnce(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	conn, err := pool.Acquire(ctx)
	pgtest.Must(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `LISTEN `+queue.NotifyChannel(""))
	pgtest.Must(t, err)
	var jobs []queue.Job
	want := map[string]bool{}
	for i := range 20 {
		key := fmt.Sprint("k", i)
		jobs = append(jobs, queue.Job{Group: "emails", Key: key, Args: step{"x"}})
		want[fmt.Sprintf("%d:emails", partition.OfString(key, 8))] = true
	}
	jobs = append(jobs, queue.Job{Group: "emails", Key: "later", Args: step{"x"}, RunAt: time.Now().Add(time.Hour)})
	_, err = c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	got := map[string]int{}
	for {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		n, err := conn.Conn().WaitForNotification(wctx)
		cancel()
		if err != nil {
			break
		}
		got[n.Payload]++
	}
	for p, k := range got {
		if k != 1 || !want[p] {
			t.Errorf("notification %q received %d times; want once, for a partition of a due job", p, k)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d partitions notified, want %d", len(got), len(want))
	}
}

// PartitionConcurrency runs jobs of different keys of one partition at
// once, never two jobs of one key, and Concurrency caps all partitions.
func TestConcurrencyLimitsAndKeyOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		partitions, perPartition, global, wantMax int
	}{
		{partitions: 1, perPartition: 4, global: 100, wantMax: 4},
		{partitions: 4, perPartition: 4, global: 2, wantMax: 2},
		{partitions: 1, perPartition: 1, global: 100, wantMax: 1},
	} {
		t.Run(fmt.Sprint(tc), func(t *testing.T) {
			t.Parallel()
			ctx := pgtest.Context(t)
			pool := pgtest.Pool(t)
			_, err := pool.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('emails', $1)`, tc.partitions)
			pgtest.Must(t, err)
			c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
			pgtest.Must(t, err)
			var mu sync.Mutex
			running, maxRunning := 0, 0
			runningKey := map[string]bool{}
			var violations []string
			seen := map[string]int{}
			ws := queue.NewWorkers()
			queue.Handle(ws, func(ctx context.Context, w *queue.Work[deposit]) error {
				mu.Lock()
				running++
				maxRunning = max(maxRunning, running)
				if runningKey[w.Key] {
					violations = append(violations, "two jobs of key "+w.Key+" at once")
				}
				runningKey[w.Key] = true
				if seen[w.Key] != w.Args.Seq {
					violations = append(violations, fmt.Sprintf("key %s ran seq %d after %d", w.Key, w.Args.Seq, seen[w.Key]))
				}
				seen[w.Key] = w.Args.Seq + 1
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				mu.Lock()
				running--
				runningKey[w.Key] = false
				mu.Unlock()
				return nil
			})
			var jobs []queue.Job
			for seq := range 3 {
				for k := range 8 {
					jobs = append(jobs, queue.Job{Group: "emails", Key: fmt.Sprint("key", k), Args: deposit{seq}})
				}
			}
			_, err = c.EnqueueMany(ctx, jobs...)
			pgtest.Must(t, err)
			member(t, pool, tc.partitions, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
				PartitionConcurrency: tc.perPartition, Concurrency: tc.global}, true)
			pgtest.WaitNoPendingJobs(t, pool, 30*time.Second)
			mu.Lock()
			defer mu.Unlock()
			if len(violations) > 0 {
				t.Fatalf("order violated: %v", violations)
			}
			if maxRunning != tc.wantMax {
				t.Fatalf("at most %d jobs ran at once; want %d", maxRunning, tc.wantMax)
			}
		})
	}
}

// A handler that outlives JobTimeout has its context cancelled with
// ErrJobTimeout: a failed attempt, recorded, and reported to the hook.
func TestJobTimeoutIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var mu sync.Mutex
	var events []queue.JobEvent
	var calls atomic.Int32
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		if calls.Add(1) == 1 {
			<-ctx.Done()
			if !errors.Is(context.Cause(ctx), queue.ErrJobTimeout) {
				return fmt.Errorf("cause %v, want ErrJobTimeout", context.Cause(ctx))
			}
			return ctx.Err()
		}
		return nil
	})
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "slow", Args: step{"slow"}})
	pgtest.Must(t, err)
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		JobTimeout: 100 * time.Millisecond, MinRetry: time.Millisecond, MaxRetry: time.Millisecond,
		Hooks: queue.Hooks{OnJob: func(e queue.JobEvent) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}}}, true)
	pgtest.WaitNoPendingJobs(t, pool, 10*time.Second)
	info, err := c.JobInfo(ctx, res.ID)
	pgtest.Must(t, err)
	if info.State != "completed" || info.Attempt != 2 || len(info.Errors) != 1 ||
		!strings.Contains(errorsText(info.Errors), "job timed out after 100ms") {
		t.Fatalf("job %+v; want completed on attempt 2 after one timeout", info)
	}
	// The completion's event is reported once its commit's answer reaches
	// the pipeline, just after the job is seen completed.
	waitUntil(t, "two events", func() bool { mu.Lock(); defer mu.Unlock(); return len(events) >= 2 })
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 || events[0].Outcome != queue.OutcomeRetried || !errors.Is(events[0].Err, queue.ErrJobTimeout) ||
		events[1].Outcome != queue.OutcomeCompleted || events[1].Attempt != 2 || events[1].ID != res.ID {
		t.Fatalf("events %+v; want retried (timeout), then completed", events)
	}
}

// Rapid enqueues to one partition are coalesced: the first notifies in its
// statement, the rest once at the end of the window, after they committed.
func TestEnqueueNotificationsAreCoalescedAndSentAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{NotifyWindow: 300 * time.Millisecond})
	pgtest.Must(t, err)
	conn, err := pool.Acquire(ctx)
	pgtest.Must(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `LISTEN `+queue.NotifyChannel(""))
	pgtest.Must(t, err)
	for i := range 10 {
		_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: step{fmt.Sprint(i)}})
		pgtest.Must(t, err)
	}
	var notes int
	for {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := conn.Conn().WaitForNotification(wctx)
		cancel()
		if err != nil {
			break
		}
		notes++
	}
	if notes < 2 || notes >= 10 {
		t.Fatalf("%d notifications for 10 enqueues to one partition; want the first, then coalesced ones", notes)
	}
	// The control: a negative window notifies every enqueue.
	every, err := queue.New(pgtest.DBOn(t, pool), queue.Config{NotifyWindow: -1})
	pgtest.Must(t, err)
	for i := range 3 {
		_, err := every.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: step{fmt.Sprint(i)}})
		pgtest.Must(t, err)
	}
	for i := range 3 {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := conn.Conn().WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("notification %d of 3 with NotifyWindow -1: %v", i+1, err)
		}
	}
}

// A coalesced enqueue's partition is notified by the next enqueue that
// notifies in its statement, a window after the last one, not by a
// statement of its own; when no enqueue follows (the control), by the
// notifier's, 1.5 windows after it committed.
func TestCoalescedNotificationRidesOnTheNextEnqueue(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	const window = time.Second
	conn, err := pool.Acquire(ctx)
	pgtest.Must(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `LISTEN `+queue.NotifyChannel(""))
	pgtest.Must(t, err)
	// awaitPayload waits for the notification of partition part of
	// emails and returns when it came.
	awaitPayload := func(part int) time.Time {
		t.Helper()
		want := fmt.Sprintf("%d:emails", part)
		for {
			wctx, cancel := context.WithTimeout(ctx, 5*window)
			n, err := conn.Conn().WaitForNotification(wctx)
			cancel()
			if err != nil {
				t.Fatalf("no notification %s: %v", want, err)
			}
			if n.Payload == want {
				return time.Now()
			}
		}
	}
	keyOf := func(part int) string {
		for i := 0; ; i++ {
			if k := fmt.Sprint("k", i); partition.OfString(k, 8) == part {
				return k
			}
		}
	}
	for _, follow := range []bool{true, false} {
		c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{NotifyWindow: window})
		pgtest.Must(t, err)
		_, err = c.Enqueue(ctx, queue.Job{Group: "emails", Key: keyOf(1), Args: step{"first"}})
		pgtest.Must(t, err)
		awaitPayload(1)
		_, err = c.Enqueue(ctx, queue.Job{Group: "emails", Key: keyOf(2), Args: step{"coalesced"}})
		pgtest.Must(t, err)
		committed := time.Now()
		if follow {
			time.Sleep(window + window/10)
			_, err = c.Enqueue(ctx, queue.Job{Group: "emails", Key: keyOf(3), Args: step{"next"}})
			pgtest.Must(t, err)
		}
		took := awaitPayload(2).Sub(committed)
		if follow && took >= window*3/2 {
			t.Fatalf("the coalesced enqueue was notified %v after it committed; want it carried by the next enqueue, before 1.5 windows", took)
		}
		if !follow && took < window*3/2 {
			t.Fatalf("control: with no enqueue after it, the coalesced enqueue was notified after %v; want 1.5 windows", took)
		}
	}
}

// With a poll interval of an hour, a job whose notification was coalesced
// (enqueued within the window of the previous one, while its owner is idle)
// still wakes its owner: the notification follows at the window's end.
func TestCoalescedNotificationsLoseNoWakeUp(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{NotifyWindow: 2 * time.Second})
	pgtest.Must(t, err)
	ran := make(chan string, 2)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		ran <- w.Args.Name
		return nil
	})
	p, m := groupMember(t, pool, "emails", 8, queue.ProcessorConfig{Workers: ws, PollInterval: time.Hour}, true)
	waitOwned(t, m, 8)
	waitFetched(t, p, 8)
	for _, name := range []string{"first", "coalesced"} {
		if name == "coalesced" {
			time.Sleep(300 * time.Millisecond) // the owner recorded "first" and sleeps again
		}
		_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: step{name}})
		pgtest.Must(t, err)
		select {
		case got := <-ran:
			if got != name {
				t.Fatalf("ran %q, want %q", got, name)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("job %q did not run: its wake-up was lost", name)
		}
	}
}

// A batch none of whose outcomes can be recorded (the fence check times out
// on a locked lease row) is fetched again only after PollInterval, not in a
// hot loop; once the lock is gone the job completes, once.
func TestUnrecordableBatchWaitsBeforeRefetching(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var runs atomic.Int32
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[step]) error {
		runs.Add(1)
		return nil
	})
	p, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws, PollInterval: 500 * time.Millisecond,
		Fence: lease.FenceConfig{LockTimeout: 20 * time.Millisecond}})
	pgtest.Must(t, err)
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "emails", Partitions: 8, Run: p.Run,
		Lease: lease.Config{TTL: 6 * time.Second}})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(ctx))
	t.Cleanup(func() { m.Stop(context.Background()) })
	waitOwned(t, m, 8)

	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(context.Background()) // on failure: frees the row and the connection
	_, err = tx.Exec(ctx, `SELECT FROM leasehold.leases WHERE name = $1 FOR UPDATE`, partition.LeaseName("emails", partition.OfString("k", 8)))
	pgtest.Must(t, err)
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: step{"x"}})
	pgtest.Must(t, err)
	time.Sleep(1500 * time.Millisecond)
	pgtest.Must(t, tx.Rollback(ctx))
	if n := runs.Load(); n < 1 || n > 6 {
		t.Fatalf("%d runs while the fence check could not lock the lease row for 1.5s; want a few, one per PollInterval", n)
	}
	pgtest.WaitNoPendingJobs(t, pool, 10*time.Second)
	info, err := c.JobInfo(ctx, res.ID)
	pgtest.Must(t, err)
	if info.State != "completed" || info.Attempt != 1 {
		t.Fatalf("job %s, attempt %d; want completed on its first recorded attempt", info.State, info.Attempt)
	}
}

// A transactional handler cannot commit its transaction by itself (which
// would apply its effects without the fence and the job's completion): the
// processor commits it, once.
func TestHandlerCannotCommitItsTransaction(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ledgerSetup(t, pool)
	var refused atomic.Int32
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
		if err := record(ctx, tx, w); err != nil {
			return err
		}
		if errors.Is(tx.Commit(ctx), lease.ErrTxManaged) && errors.Is(tx.Rollback(ctx), lease.ErrTxManaged) {
			refused.Add(1)
		}
		return nil
	})
	_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: deposit{1}})
	pgtest.Must(t, err)
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond}, true)
	pgtest.WaitNoPendingJobs(t, pool, 10*time.Second)
	var rows int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&rows))
	if rows != 1 || refused.Load() != 1 {
		t.Fatalf("%d ledger rows, %d refused commits; want the effect once, the handler's commit refused", rows, refused.Load())
	}
}

// Outcomes are recorded by a statement that locks the lease row FOR KEY SHARE
// (plain runs: on its own; transactional runs: in the handler's
// transaction, before the commit): a takeover that commits while that
// statement waits for the row is seen, and the stale completion is refused
// (with a transactional run's effects); the job stays pending for the new
// grant.
func TestCompletionWaitingOnATakeoverIsRefused(t *testing.T) {
	t.Parallel()
	for _, transactional := range []bool{false, true} {
		t.Run(fmt.Sprint("tx=", transactional), func(t *testing.T) {
			t.Parallel()
			ctx := pgtest.Context(t)
			pool, c := setup(t)
			ledgerSetup(t, pool)
			release := make(chan struct{})
			started := make(chan fence.Token, 10)
			ws := queue.NewWorkers()
			if transactional {
				queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
					started <- w.Token
					<-release
					return record(ctx, tx, w)
				})
			} else {
				queue.Handle(ws, func(ctx context.Context, w *queue.Work[deposit]) error {
					started <- w.Token
					<-release
					return nil
				})
			}
			res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: deposit{1}})
			pgtest.Must(t, err)
			member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
				Fence: lease.FenceConfig{LockTimeout: 5 * time.Second, IdleTimeout: 10 * time.Second}}, true)
			stale := <-started

			// A takeover in progress: the lease row is granted anew, not yet
			// committed, when the stale owner's completion arrives.
			tx, err := pool.Begin(ctx)
			pgtest.Must(t, err)
			defer tx.Rollback(ctx)
			_, err = tx.Exec(ctx, `UPDATE leasehold.leases SET token = nextval('leasehold.lease_token_seq') WHERE name = $1`,
				partition.LeaseName("emails", partition.OfString("k", 8)))
			pgtest.Must(t, err)
			close(release)
			time.Sleep(500 * time.Millisecond) // the completion waits for the row lock
			pgtest.Must(t, tx.Commit(ctx))

			pgtest.WaitNoPendingJobs(t, pool, 30*time.Second) // the member notices the loss and runs the job again
			info, err := c.JobInfo(ctx, res.ID)
			pgtest.Must(t, err)
			if info.State != "completed" || info.FinishedToken == nil || *info.FinishedToken == stale {
				t.Fatalf("job %s with token %v; the stale grant's token %d must not complete it", info.State, info.FinishedToken, stale)
			}
			var staleRows, rows int
			pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE token = $1), count(*) FROM ledger`, int64(stale)).
				Scan(&staleRows, &rows))
			if transactional && (staleRows != 0 || rows != 1) {
				t.Fatalf("ledger: %d rows under the stale token, %d in all; want 0 and 1", staleRows, rows)
			}
		})
	}
}

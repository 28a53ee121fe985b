package queue_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/logtest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/queue"
)

// A producer killed midway (its context ended while it submitted) leaves
// the chunks it committed; run again with the same items, it adds the rest
// and counts the others as duplicates: no item twice, totals exact, each
// effect once.
func TestBatchSubmitterKilledMidwayResumes(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{SubmitChunk: 64})
	pgtest.Must(t, err)
	member(t, pool, 8, queue.ProcessorConfig{Workers: batchWorkers(t, pool, nil), PollInterval: 20 * time.Millisecond}, true)
	createBatch(t, c, "resume")
	kctx, kill := context.WithCancel(ctx)
	n := 0
	killed := func(yield func(queue.Item, error) bool) {
		for it := range items(500, nil) {
			if n++; n == 150 {
				kill() // in the third chunk: it is never committed
			}
			if !yield(it, nil) {
				return
			}
		}
	}
	first, err := c.SubmitItems(kctx, "emails", "resume", killed)
	if err == nil || first.Added != 128 || first.Items != 128 {
		t.Fatalf("killed submit: %+v, %v; want 2 chunks of 64 added, then an error", first, err)
	}
	second, err := c.SubmitItems(ctx, "emails", "resume", items(500, nil))
	pgtest.Must(t, err)
	if second != (queue.Added{Items: 500, Added: 372, Duplicates: 128}) {
		t.Fatalf("resumed submit: %+v; want 372 added and 128 duplicates", second)
	}
	_, err = c.SealBatch(ctx, "emails", "resume")
	pgtest.Must(t, err)
	b := waitBatch(t, c, "resume", func(b queue.BatchInfo) bool { return b.SucceededAt != nil })
	if b.Total != 500 || b.Completed != 500 || itemCount(t, pool) != 500 {
		t.Fatalf("batch %+v with %d item rows; want 500", b, itemCount(t, pool))
	}
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	if n, distinct := effects(t, pool); n != 500 || distinct != 500 {
		t.Fatalf("%d effects of %d items; want 500 of 500", n, distinct)
	}
	if got := followups(t, pool, "resume"); got["complete"] != 1 || got["success"] != 1 {
		t.Fatalf("follow-ups run: %v; want each once", got)
	}
}

// A worker paused past its lease while it runs the batch's last item: a
// new owner runs the item, finishing the batch, and its follow-ups run once.
// When the paused worker resumes, its completion of the item (the effect
// and the counters with it) is refused by the fence: each item's effect
// once, the counts exact, no second follow-up.
func TestBatchWorkerPausedPastItsLeaseOnTheLastItem(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	batchTables(t, pool)
	const last = "user-49"
	stalled, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var aLog logtest.Buffer
	wsA := batchHandlers(nil, func(ctx context.Context, item string) {
		if item == last {
			once.Do(func() { close(stalled) })
			<-resume // ignores ctx: a zombie
		}
	})
	aClock := fakeclock.New(time.Now())
	// a's stalled transaction must live until it resumes (the default idle
	// timeout, 5s, would end it first on a slow machine: then no commit is
	// tried and nothing is fenced).
	workerFence(t, pool, "a", wsA, aClock, slog.New(slog.NewTextHandler(&aLog, nil)), lease.FenceConfig{IdleTimeout: 5 * time.Minute})
	// a's clock runs (so it renews its leases) until it stalls on the last
	// item: the first 49 items may take longer than one TTL on a loaded
	// machine, and a worker that stopped renewing before then would be
	// fenced on them, not on the last one.
	ticking := make(chan struct{})
	go func() {
		defer close(ticking)
		for {
			select {
			case <-stalled:
				return
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
				aClock.Advance(20 * time.Millisecond)
			}
		}
	}()
	createBatch(t, c, "pause")
	_, err := c.SubmitItems(ctx, "emails", "pause", items(49, nil))
	pgtest.Must(t, err)
	_, err = c.SealBatch(ctx, "emails", "pause")
	pgtest.Must(t, err)
	// The last item is added (to a new, sealed batch: the same by name
	// cannot take more) once the others are done, so that it is the last.
	waitBatch(t, c, "pause", func(b queue.BatchInfo) bool { return b.Completed == 49 })
	pgtest.Must(t, ignore(c.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "pause2",
		OnComplete: &queue.FollowUp{Args: batchDone{Batch: "pause2", Which: "complete"}},
		OnSuccess:  &queue.FollowUp{Args: batchDone{Batch: "pause2", Which: "success"}}})))
	_, err = c.AddItems(ctx, "emails", "pause2", queue.Item{ID: last, Args: reprice{User: 49}})
	pgtest.Must(t, err)
	_, err = c.SealBatch(ctx, "emails", "pause2")
	pgtest.Must(t, err)
	select {
	case <-ticking: // a's clock stops: it renews no more
	case <-ctx.Done():
		t.Fatal("the last item never ran")
	}
	startWorker(t, pool, "b", batchHandlers(nil, nil), nil) // takes over once a's leases expire
	b := waitBatch(t, c, "pause2", func(b queue.BatchInfo) bool { return b.SucceededAt != nil })
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	close(resume)
	for start := time.Now(); !strings.Contains(aLog.String(), "queue: fenced"); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the paused worker's completion was not fenced; its log:\n%s", aLog.String())
		}
	}
	b, err = c.Batch(ctx, "emails", "pause2")
	pgtest.Must(t, err)
	if b.Total != 1 || b.Completed != 1 || b.Pending != 0 {
		t.Fatalf("batch after the zombie resumed: %+v; want its one item completed once", b)
	}
	if n, distinct := effects(t, pool); n != 50 || distinct != 50 {
		t.Fatalf("%d effects of %d items; want 50 of 50", n, distinct)
	}
	for _, name := range []string{"pause", "pause2"} {
		if got := followups(t, pool, name); got["complete"] != 1 || got["success"] != 1 {
			t.Fatalf("%s: follow-ups run: %v; want each once", name, got)
		}
	}
}

func ignore[T any](_ T, err error) error { return err }

// Cancelling a batch while it runs: its pending items are cancelled, the
// ones running roll back (transactional), the others completed; every item
// is counted once (completed + cancelled = total), each completed item's
// effect once and no cancelled item's, the on-complete follow-up once and
// the on-success one never.
func TestBatchCancelledWhileItRuns(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	batchTables(t, pool)
	var ran atomic.Int64
	ws := batchHandlers(nil, func(ctx context.Context, item string) {
		ran.Add(1)
		time.Sleep(5 * time.Millisecond)
	})
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond, Concurrency: 4}, true)
	createBatch(t, c, "cancel")
	_, err := c.SubmitItems(ctx, "emails", "cancel", items(400, nil))
	pgtest.Must(t, err)
	_, err = c.SealBatch(ctx, "emails", "cancel")
	pgtest.Must(t, err)
	waitBatch(t, c, "cancel", func(b queue.BatchInfo) bool { return b.Completed >= 20 })
	cancelled, err := c.CancelBatch(ctx, "emails", "cancel")
	pgtest.Must(t, err)
	b := waitBatch(t, c, "cancel", func(b queue.BatchInfo) bool { return b.FinishedAt != nil })
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	b, err = c.Batch(ctx, "emails", "cancel")
	pgtest.Must(t, err)
	if cancelled == 0 || b.Cancelled != cancelled || b.Completed+b.Cancelled != 400 || b.Failed != 0 || b.Pending != 0 ||
		b.State() != queue.BatchCancelled || b.SucceededAt != nil {
		t.Fatalf("cancelled %d: batch %+v; want every item completed or cancelled", cancelled, b)
	}
	var completed int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE batch_item IS NOT NULL AND state = 'completed'`).Scan(&completed))
	if n, distinct := effects(t, pool); int64(n) != b.Completed || int64(distinct) != b.Completed || completed != b.Completed {
		t.Fatalf("%d effects of %d items, %d items completed; want %d each", n, distinct, completed, b.Completed)
	}
	if got := followups(t, pool, "cancel"); got["complete"] != 1 || got["success"] != 0 {
		t.Fatalf("follow-ups run: %v; want on-complete once, on-success never", got)
	}
	// Cancelling again changes nothing.
	again, err := c.CancelBatch(ctx, "emails", "cancel")
	if err != nil || again != 0 {
		t.Fatalf("cancelling again: %d, %v", again, err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := followups(t, pool, "cancel"); got["complete"] != 1 {
		t.Fatalf("follow-ups after a second cancel: %v", got)
	}
}

// Retention keeps a batch's items while the batch is not finished, however
// old, and deletes them once it finished longer ago than Retention; the
// batch and its counts stay. A plain job finished as long ago is deleted
// meanwhile (the control: retention ran).
func TestBatchItemsAreRetainedUntilTheBatchFinished(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	member(t, pool, 8, queue.ProcessorConfig{Workers: batchWorkers(t, pool, nil), PollInterval: 20 * time.Millisecond,
		Retention: 50 * time.Millisecond, RetentionInterval: 50 * time.Millisecond}, true)
	createBatch(t, c, "kept")
	_, err := c.SubmitItems(ctx, "emails", "kept", items(20, nil))
	pgtest.Must(t, err)
	plain, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: reprice{User: -1}})
	pgtest.Must(t, err)
	waitBatch(t, c, "kept", func(b queue.BatchInfo) bool { return b.Completed == 20 })
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if _, err := c.JobInfo(ctx, plain.ID); err != nil {
			break // the control: deleted by retention
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("retention never deleted the plain job")
		}
	}
	time.Sleep(200 * time.Millisecond) // several more rounds
	if n := itemCount(t, pool); n != 20 {
		t.Fatalf("%d items left of an unfinished batch; want all 20", n)
	}
	_, err = c.SealBatch(ctx, "emails", "kept")
	pgtest.Must(t, err)
	for start := time.Now(); itemCount(t, pool) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("%d items of a finished batch never deleted", itemCount(t, pool))
		}
	}
	b, err := c.Batch(ctx, "emails", "kept")
	if err != nil || b.Total != 20 || b.Completed != 20 || b.State() != queue.BatchSucceeded {
		t.Fatalf("batch after retention: %+v, %v; want its counts kept", b, err)
	}
}

// An item whose runs all ended without an outcome (its worker crashed each
// time: here, its attempts spent beforehand as recovery charges them) is
// discarded with ErrNoOutcome without running; that discard is counted and
// finishes the batch like any other.
func TestBatchItemDiscardedWithoutAnOutcomeFinishesTheBatch(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ws := batchWorkers(t, pool, nil)
	kindsFor(t, pool, "reprice", "batch_done") // the workers start last
	createBatch(t, c, "crashed")
	_, err := c.SubmitItems(ctx, "emails", "crashed", items(20, nil))
	pgtest.Must(t, err)
	_, err = pool.Exec(ctx, `UPDATE leasehold.jobs SET attempt = max_attempts WHERE batch_item = 'user-3'`)
	pgtest.Must(t, err)
	_, err = c.SealBatch(ctx, "emails", "crashed")
	pgtest.Must(t, err)
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond}, true)
	b := waitBatch(t, c, "crashed", func(b queue.BatchInfo) bool { return b.FinishedAt != nil })
	if b.Completed != 19 || b.Failed != 1 || b.State() != queue.BatchFinished {
		t.Fatalf("batch %+v; want it finished, 19 completed and 1 failed", b)
	}
	var state, errs string
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT state, errors::text FROM leasehold.jobs WHERE batch_item = 'user-3'`).Scan(&state, &errs))
	if state != "discarded" || !strings.Contains(errs, "without an outcome") {
		t.Fatalf("user-3 %s (%s); want discarded with ErrNoOutcome", state, errs)
	}
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	if got := followups(t, pool, "crashed"); got["complete"] != 1 || got["success"] != 0 {
		t.Fatalf("follow-ups run: %v; want on-complete once", got)
	}
}

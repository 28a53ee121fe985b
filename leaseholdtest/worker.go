package leaseholdtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/queuehook"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// Worker runs one job's handler at a time, inline, in the test's
// goroutine, through the code the queue's Processor runs jobs with: the
// same outcome rules (a retry scheduled with its backoff, or a discard
// after the last attempt; Snooze and Cancel honoured; a panic is a failed
// attempt), the same handler options and hooks, and the same fenced
// completion. A transactional or batch handler runs in a transaction in
// which its effects and the job's completion commit together.
//
// The run holds the job's partition's lease for real, so w.Token is a
// current fencing token and fenced writes in the handler succeed: a worker
// of the job's group running in the same test must not own that partition
// (the run fails the test then). The job runs whatever its RunAt, its
// key's earlier job still pending, or a pause of its kind or group.
type Worker struct {
	db     *leasehold.DB
	p      *queue.Processor
	client *queue.Client
	leases *lease.Client

	mu sync.Mutex
	// held are the partition leases WorkTx runs took: kept until the test
	// ends, since the test's transaction may lock them until it ends.
	held map[string]*lease.Lease
}

// Result is what one inline run did.
type Result struct {
	// Outcome is what became of the run, as queue.Hooks.OnJob reports it:
	// OutcomeCompleted, OutcomeRetried, OutcomeSnoozed, OutcomeCancelled,
	// OutcomeDiscarded (OutcomeFenced or OutcomeUnrecorded if the
	// completion was refused or failed).
	Outcome queue.Outcome
	// Job is the job after the run, read in the run's transaction for
	// WorkTx and WorkJobTx.
	Job queue.JobInfo
}

// NewWorker returns a Worker for the handlers and configuration of cfg,
// as queue.NewProcessor takes them (cfg.Workers is required; MinRetry,
// MaxRetry, Rand, JobTimeout, UnknownKindDelay, Fence, Hooks,
// TracerProvider and Propagator apply to the runs). The test fails on an
// invalid cfg. Its lease client is closed, releasing the partitions it
// holds, when the test ends.
func NewWorker(t testing.TB, db *leasehold.DB, cfg queue.ProcessorConfig) *Worker {
	t.Helper()
	p, err := queue.NewProcessor(db, cfg)
	if err != nil {
		t.Fatalf("leaseholdtest: NewWorker: %v", err)
		return nil
	}
	client, err := queue.New(db, queue.Config{})
	if err != nil {
		t.Fatalf("leaseholdtest: NewWorker: %v", err)
		return nil
	}
	lc, err := lease.New(db, lease.Config{})
	if err != nil {
		t.Fatalf("leaseholdtest: NewWorker: %v", err)
		return nil
	}
	w := &Worker{db: db, p: p, client: client, leases: lc, held: map[string]*lease.Lease{}}
	t.Cleanup(func() {
		// A lease that a WorkTx run took may be locked by the test's
		// transaction until its own cleanup rolls it back, which runs
		// after this one if the transaction began first: do not wait for
		// its release then. The release goes on in the background, and
		// the lease expires anyway.
		w.mu.Lock()
		inTx := len(w.held) > 0
		w.mu.Unlock()
		wait := 30 * time.Second
		if inTx {
			wait = time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := lc.Close(ctx); err != nil && !inTx {
			t.Logf("leaseholdtest: close the Worker's lease client: %v", err)
		}
	})
	return w
}

// Work enqueues job (its group must exist: see queue.Client.EnsureGroup)
// and runs its handler once, inline, committing as the processor would.
// It returns the run's Result and the handler's error (nil when it
// returned nil; the Snooze or Cancel error it returned, say). The test
// fails if the job cannot be enqueued (or is a duplicate of a pending job
// with its UniqueKey) or run.
func (w *Worker) Work(ctx context.Context, t testing.TB, job queue.Job) (*Result, error) {
	t.Helper()
	enq, err := w.client.Enqueue(ctx, job)
	return w.enqueued(ctx, t, nil, enq, err)
}

// WorkTx is Work in tx, the test's transaction: the job is enqueued, run
// and its outcome recorded in tx (a transactional handler's effects in a
// savepoint of it, rolled back if the handler fails), and nothing is
// committed, so that rolling tx back undoes it all. The job's partition
// stays held until the test ends (tx may lock its lease until it ends);
// keep tx shorter than the lease's TTL (15s).
func (w *Worker) WorkTx(ctx context.Context, t testing.TB, tx pgx.Tx, job queue.Job) (*Result, error) {
	t.Helper()
	enq, err := w.client.EnqueueTx(ctx, tx, job)
	var e queue.Enqueued
	if err == nil {
		e = enq[0]
	}
	return w.enqueued(ctx, t, tx, e, err)
}

func (w *Worker) enqueued(ctx context.Context, t testing.TB, tx pgx.Tx, enq queue.Enqueued, err error) (*Result, error) {
	t.Helper()
	switch {
	case err != nil:
		t.Fatalf("leaseholdtest: enqueue: %v", err)
		return nil, nil
	case enq.Duplicate:
		t.Fatalf("leaseholdtest: enqueue: a pending job has the job's UniqueKey: nothing was enqueued")
		return nil, nil
	}
	return w.run(ctx, t, tx, enq.ID)
}

// WorkJob runs the handler of the pending job id (one RequireEnqueued
// found, say) once, inline, committing as the processor would. It returns
// as Work does.
func (w *Worker) WorkJob(ctx context.Context, t testing.TB, id int64) (*Result, error) {
	t.Helper()
	return w.run(ctx, t, nil, id)
}

// WorkJobTx is WorkJob in tx, the test's transaction, as WorkTx.
func (w *Worker) WorkJobTx(ctx context.Context, t testing.TB, tx pgx.Tx, id int64) (*Result, error) {
	t.Helper()
	if tx == nil {
		t.Fatalf("leaseholdtest: WorkJobTx: nil transaction")
		return nil, nil
	}
	return w.run(ctx, t, tx, id)
}

func (w *Worker) run(ctx context.Context, t testing.TB, tx pgx.Tx, id int64) (*Result, error) {
	t.Helper()
	var taken *lease.Lease // taken for this run alone: released after it
	own := func(ctx context.Context, group string, p int) (*lease.Lease, error) {
		name := partition.LeaseName(group, p)
		w.mu.Lock()
		l := w.held[name]
		w.mu.Unlock()
		if l == nil || l.Err() != nil {
			var err error
			if l, err = w.leases.TryAcquire(ctx, name); err != nil {
				if errors.Is(err, lease.ErrHeld) {
					err = fmt.Errorf("partition %d of group %q is owned by another worker (one running in this test?), "+
						"and an inline run needs its lease: %w", p, group, err)
				}
				return nil, err
			}
			if tx != nil {
				w.mu.Lock()
				w.held[name] = l
				w.mu.Unlock()
			} else {
				taken = l
			}
		}
		return l, nil
	}
	res, err := queuehook.Run(ctx, queuehook.Request{Processor: w.p, Job: id, Tx: tx, Own: own})
	if taken != nil {
		if rerr := taken.Release(context.WithoutCancel(ctx)); rerr != nil {
			t.Logf("leaseholdtest: release %s: %v", taken.Name(), rerr)
		}
	}
	if err != nil {
		t.Fatalf("leaseholdtest: run job %d: %v", id, err)
		return nil, nil
	}
	var q fence.Querier = w.db.Pool()
	if tx != nil {
		q = tx
	}
	v, err := queuehook.Job(ctx, w.db, q, id)
	if err != nil {
		t.Fatalf("leaseholdtest: read job %d after its run: %v", id, err)
		return nil, nil
	}
	return &Result{Outcome: queue.Outcome(res.Outcome), Job: v.(queue.JobInfo)}, res.Err
}

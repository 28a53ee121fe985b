package leaseholdtest_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// setupWork returns a schema with group "g" (4 partitions) and a table
// greeted(name), on which the transactional handlers write.
func setupWork(t *testing.T) (context.Context, *leasehold.DB) {
	ctx := context2m(t)
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	leaseholdtest.Group(ctx, t, db, "g", 4)
	_, err := db.Pool().Exec(ctx, `CREATE TABLE `+db.Schema()+`.greeted (name text NOT NULL, token bigint NOT NULL)`)
	must(t, err)
	return ctx, db
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func greetedCount(ctx context.Context, t *testing.T, db *leasehold.DB, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) int {
	t.Helper()
	var n int
	must(t, q.QueryRow(ctx, `SELECT count(*) FROM `+db.Schema()+`.greeted`).Scan(&n))
	return n
}

// A plain handler runs under a real, current token of the job's
// partition: the completion records it, and the partition is free again
// after the run.
func TestWorkPlain(t *testing.T) {
	ctx, db := setupWork(t)
	ws := queue.NewWorkers()
	var seen queue.Work[Greeting]
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[Greeting]) error {
		seen = *w
		switch w.Args.Name {
		case "fail":
			return errors.New("boom")
		case "snooze":
			return queue.Snooze(time.Hour)
		case "cancel":
			return queue.Cancel(errors.New("no"))
		case "panic":
			panic("oops")
		}
		return nil
	})
	var events []queue.JobEvent
	var mu sync.Mutex
	w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws,
		Hooks: queue.Hooks{OnJob: func(ev queue.JobEvent) { mu.Lock(); events = append(events, ev); mu.Unlock() }}})

	res, err := w.Work(ctx, t, queue.Job{Group: "g", Key: "k", Args: Greeting{"Ada"}})
	if err != nil || res.Outcome != queue.OutcomeCompleted || res.Job.State != queue.StateCompleted || res.Job.Attempt != 1 {
		t.Fatalf("Work: %+v, %v; want completed", res, err)
	}
	if seen.Token == 0 || seen.Args.Name != "Ada" || seen.Attempt != 1 || seen.ID != res.Job.ID {
		t.Fatalf("the handler saw %+v", seen)
	}
	if res.Job.FinishedToken == nil || *res.Job.FinishedToken != seen.Token {
		t.Fatalf("finished with token %v; the handler's was %d", res.Job.FinishedToken, seen.Token)
	}
	// The run's lease was released: another owner takes the partition at once.
	lc, err := lease.New(db, lease.Config{})
	must(t, err)
	defer lc.Close(context.Background())
	l, err := lc.TryAcquire(ctx, partition.LeaseName("g", res.Job.Partition))
	must(t, err)
	if l.Token() <= seen.Token {
		t.Fatalf("a later grant has token %d, not above the run's %d", l.Token(), seen.Token)
	}
	must(t, l.Release(ctx))

	before := time.Now()
	res, err = w.Work(ctx, t, queue.Job{Group: "g", Args: Greeting{"fail"}, MaxAttempts: 2})
	if err == nil || err.Error() != "boom" || res.Outcome != queue.OutcomeRetried || res.Job.State != queue.StatePending ||
		res.Job.Attempt != 1 || len(res.Job.Errors) != 1 || res.Job.Errors[0].Error != "boom" || !res.Job.RunAt.After(before) {
		t.Fatalf("a failing run: %+v, %v; want retried later, the error recorded", res, err)
	}
	res, err = w.WorkJob(ctx, t, res.Job.ID) // the last attempt
	if err == nil || res.Outcome != queue.OutcomeDiscarded || res.Job.State != queue.StateDiscarded || res.Job.Attempt != 2 {
		t.Fatalf("the last attempt: %+v, %v; want discarded", res, err)
	}
	res, _ = w.Work(ctx, t, queue.Job{Group: "g", Args: Greeting{"snooze"}})
	if res.Outcome != queue.OutcomeSnoozed || res.Job.State != queue.StatePending || res.Job.Attempt != 0 || !res.Job.RunAt.After(before.Add(50*time.Minute)) {
		t.Fatalf("a snooze: %+v; want pending an hour, no attempt spent", res)
	}
	res, _ = w.Work(ctx, t, queue.Job{Group: "g", Args: Greeting{"cancel"}})
	if res.Outcome != queue.OutcomeCancelled || res.Job.State != queue.StateCancelled {
		t.Fatalf("a cancel: %+v", res)
	}
	res, err = w.Work(ctx, t, queue.Job{Group: "g", Args: Greeting{"panic"}})
	if res.Outcome != queue.OutcomeRetried || err == nil || !strings.Contains(err.Error(), "handler panicked: oops") {
		t.Fatalf("a panic: %+v, %v; want a failed attempt", res, err)
	}
	res, err = w.Work(ctx, t, queue.Job{Group: "g", Args: badGreeting{Name: 5}})
	if res.Outcome != queue.OutcomeDiscarded || err == nil || !strings.Contains(err.Error(), "do not decode") {
		t.Fatalf("args that do not decode: %+v, %v; want discarded", res, err)
	}
	mu.Lock()
	if len(events) != 7 || events[0].Outcome != queue.OutcomeCompleted || events[6].Outcome != queue.OutcomeDiscarded {
		t.Errorf("OnJob saw %d events: %+v; want one per run", len(events), events)
	}
	mu.Unlock()

	// Inline runs refuse what they cannot run, failing the test clearly.
	mustFail(t, func(tb testing.TB) { w.Work(ctx, tb, queue.Job{Group: "g", Args: Farewell{"Ada"}}) }, `no handler registered for kind "farewell"`)
	mustFail(t, func(tb testing.TB) { w.WorkJob(ctx, tb, res.Job.ID+1000) }, "job not found")
	done, _ := w.Work(ctx, t, queue.Job{Group: "g", Args: Greeting{"Grace"}})
	mustFail(t, func(tb testing.TB) { w.WorkJob(ctx, tb, done.Job.ID) }, "is completed, not pending")
	mustFail(t, func(tb testing.TB) { w.Work(ctx, tb, queue.Job{Group: "nope", Args: Greeting{"Ada"}}) }, "enqueue")
}

// badGreeting is of Greeting's kind, with args a Greeting cannot decode.
type badGreeting struct {
	Name int `json:"name"`
}

func (badGreeting) Kind() string { return "greeting" }

// The run holds the partition's lease for real: while another owner holds
// it, the run is refused (its completion would be fenced).
func TestWorkNeedsThePartition(t *testing.T) {
	ctx, db := setupWork(t)
	ws := queue.NewWorkers()
	ran := false
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[Greeting]) error { ran = true; return nil })
	w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws})
	c, err := queue.New(db, queue.Config{})
	must(t, err)
	e, err := c.Enqueue(ctx, queue.Job{Group: "g", Key: "k", Args: Greeting{"Ada"}})
	must(t, err)
	lc, err := lease.New(db, lease.Config{})
	must(t, err)
	defer lc.Close(context.Background())
	l, err := lc.TryAcquire(ctx, partition.LeaseName("g", e.Partition))
	must(t, err)
	mustFail(t, func(tb testing.TB) { w.WorkJob(ctx, tb, e.ID) }, "is owned by another worker", "held by another owner")
	if ran {
		t.Fatal("the handler ran while another owner held the partition")
	}
	leaseholdtest.RequireEnqueued[Greeting](ctx, t, db, nil)
	must(t, l.Release(ctx))
	if res, err := w.WorkJob(ctx, t, e.ID); err != nil || res.Outcome != queue.OutcomeCompleted || !ran {
		t.Fatalf("after the release: %+v, %v", res, err)
	}
}

// A transactional handler's effects and the job's completion commit
// together, fenced: the handler can check its token against the lease; a
// failure rolls its effects back and records the attempt.
func TestWorkTransactional(t *testing.T) {
	ctx, db := setupWork(t)
	f, err := lease.NewFence(db, lease.FenceConfig{})
	must(t, err)
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[Greeting]) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+db.Schema()+`.greeted VALUES ($1, $2)`, w.Args.Name, int64(w.Token)); err != nil {
			return err
		}
		// The token is current: a fenced check passes; one token older is refused.
		if err := f.Check(ctx, tx, partition.LeaseName(w.Group, w.Partition), w.Token); err != nil {
			return err
		}
		if w.Args.Name == "stale" {
			return f.Check(ctx, tx, partition.LeaseName(w.Group, w.Partition), w.Token-1)
		}
		if w.Args.Name == "fail" {
			return errors.New("boom")
		}
		return nil
	})
	w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws})
	res, err := w.Work(ctx, t, queue.Job{Group: "g", Args: Greeting{"Ada"}})
	if err != nil || res.Outcome != queue.OutcomeCompleted || res.Job.State != queue.StateCompleted {
		t.Fatalf("Work: %+v, %v", res, err)
	}
	if n := greetedCount(ctx, t, db, db.Pool()); n != 1 {
		t.Fatalf("%d rows committed; want the handler's 1", n)
	}
	res, err = w.Work(ctx, t, queue.Job{Group: "g", Args: Greeting{"fail"}})
	if err == nil || res.Outcome != queue.OutcomeRetried || res.Job.Attempt != 1 || greetedCount(ctx, t, db, db.Pool()) != 1 {
		t.Fatalf("a failing run: %+v, %v, %d rows; want retried, its row rolled back", res, err, greetedCount(ctx, t, db, db.Pool()))
	}
	res, err = w.Work(ctx, t, queue.Job{Group: "g", Args: Greeting{"stale"}})
	if !errors.Is(err, fence.ErrFenced) || res.Outcome != queue.OutcomeRetried || greetedCount(ctx, t, db, db.Pool()) != 1 {
		t.Fatalf("a stale token's check: %+v, %v; want ErrFenced", res, err)
	}
}

// WorkTx runs in the test's transaction: the job, its completion and the
// handler's effects are visible in it, and all gone after a rollback. A
// failing handler's effects are rolled back to a savepoint while its
// attempt is recorded in the transaction.
func TestWorkTx(t *testing.T) {
	ctx, db := setupWork(t)
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[Greeting]) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+db.Schema()+`.greeted VALUES ($1, $2)`, w.Args.Name, int64(w.Token)); err != nil {
			return err
		}
		if w.Args.Name == "fail" {
			return errors.New("boom")
		}
		return nil
	})
	var plain int
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[Farewell]) error { plain++; return nil })
	w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws})
	tx, err := db.Pool().Begin(ctx)
	must(t, err)
	defer tx.Rollback(ctx)
	res, err := w.WorkTx(ctx, t, tx, queue.Job{Group: "g", Args: Greeting{"Ada"}})
	if err != nil || res.Outcome != queue.OutcomeCompleted || res.Job.State != queue.StateCompleted {
		t.Fatalf("WorkTx: %+v, %v", res, err)
	}
	res, err = w.WorkTx(ctx, t, tx, queue.Job{Group: "g", Args: Greeting{"fail"}})
	if err == nil || res.Outcome != queue.OutcomeRetried || res.Job.Attempt != 1 {
		t.Fatalf("a failing run in the tx: %+v, %v", res, err)
	}
	res, err = w.WorkTx(ctx, t, tx, queue.Job{Group: "g", Args: Farewell{"Ada"}})
	if err != nil || res.Outcome != queue.OutcomeCompleted || plain != 1 {
		t.Fatalf("a plain handler in the tx: %+v, %v", res, err)
	}
	if n := greetedCount(ctx, t, db, tx); n != 1 {
		t.Fatalf("%d rows in the tx; want Ada's alone (the failed run's rolled back)", n)
	}
	if n := greetedCount(ctx, t, db, db.Pool()); n != 0 {
		t.Fatalf("%d rows outside the uncommitted tx; want 0", n)
	}
	must(t, tx.Rollback(ctx))
	leaseholdtest.RequireNotEnqueued[Greeting](ctx, t, db, &leaseholdtest.RequireOpts{State: queue.StateCompleted})
	leaseholdtest.RequireNotEnqueued[Greeting](ctx, t, db, nil)
}

// A batch handler runs the job as a batch of one, in its transaction.
func TestWorkBatch(t *testing.T) {
	ctx, db := setupWork(t)
	ws := queue.NewWorkers()
	var sizes []int
	queue.HandleTxBatch(ws, func(ctx context.Context, tx pgx.Tx, works []*queue.Work[Greeting]) error {
		sizes = append(sizes, len(works))
		for _, w := range works {
			if _, err := tx.Exec(ctx, `INSERT INTO `+db.Schema()+`.greeted VALUES ($1, $2)`, w.Args.Name, int64(w.Token)); err != nil {
				return err
			}
		}
		return nil
	})
	w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws})
	res, err := w.Work(ctx, t, queue.Job{Group: "g", Args: Greeting{"Ada"}})
	if err != nil || res.Outcome != queue.OutcomeCompleted || len(sizes) != 1 || sizes[0] != 1 || greetedCount(ctx, t, db, db.Pool()) != 1 {
		t.Fatalf("a batch handler: %+v, %v, batches %v", res, err, sizes)
	}
	tx, err := db.Pool().Begin(ctx)
	must(t, err)
	defer tx.Rollback(ctx)
	res, err = w.WorkTx(ctx, t, tx, queue.Job{Group: "g", Args: Greeting{"Grace"}})
	if err != nil || res.Outcome != queue.OutcomeCompleted || greetedCount(ctx, t, db, tx) != 2 {
		t.Fatalf("a batch handler in the tx: %+v, %v", res, err)
	}
}

// Inline runs honour the handlers' registration options as a Processor
// does: the kind's Policy (its MaxAttempts for jobs enqueued without a
// limit, its Timeout) and middleware (Workers.Use).
func TestWorkHonoursHandlerOptions(t *testing.T) {
	ctx, db := setupWork(t)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[Greeting]) error {
		return errors.New("boom")
	}, queue.WithPolicy(queue.Policy{MaxAttempts: 1}))
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[Farewell]) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(time.Minute):
			return errors.New("the policy's timeout did not apply")
		}
	}, queue.WithPolicy(queue.Policy{Timeout: 10 * time.Millisecond}))
	var runs []queue.RunJob
	ws.Use(func(next queue.HandlerFunc) queue.HandlerFunc {
		return func(ctx context.Context, r *queue.Run) error {
			runs = append(runs, r.Jobs...)
			return next(ctx, r)
		}
	})
	w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws})

	// Enqueued without a limit: the policy's MaxAttempts (1) applies, so
	// the first failure discards it.
	res, err := w.Work(ctx, t, queue.Job{Group: "g", Args: Greeting{"Ada"}})
	if err == nil || res.Outcome != queue.OutcomeDiscarded || res.Job.State != queue.StateDiscarded {
		t.Fatalf("a failing run under a policy of 1 attempt: %+v, %v; want discarded", res, err)
	}
	// Enqueued with a limit: the enqueuer's limit stands.
	res, err = w.Work(ctx, t, queue.Job{Group: "g", Args: Greeting{"Grace"}, MaxAttempts: 3})
	if err == nil || res.Outcome != queue.OutcomeRetried || res.Job.State != queue.StatePending {
		t.Fatalf("a failing run with MaxAttempts 3: %+v, %v; want retried", res, err)
	}
	if len(runs) != 2 || runs[0].MaxAttempts != 1 || runs[1].MaxAttempts != 3 {
		t.Fatalf("the middleware saw %+v; want 2 runs, of 1 and 3 attempts", runs)
	}

	res, err = w.Work(ctx, t, queue.Job{Group: "g", Args: Farewell{"Ada"}})
	if !errors.Is(err, queue.ErrJobTimeout) || res.Outcome != queue.OutcomeRetried {
		t.Fatalf("a run past the policy's Timeout: %+v, %v; want retried with ErrJobTimeout", res, err)
	}
	if len(runs) != 3 || runs[2].ID != res.Job.ID {
		t.Fatalf("the middleware saw %+v; want the farewell run last", runs)
	}
}

// With a TracerProvider, an inline run's span joins the trace the job was
// enqueued under, as a worker's run does.
func TestWorkJoinsTheEnqueuersTrace(t *testing.T) {
	ctx, db := setupWork(t)
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	prop := propagation.TraceContext{}
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[Greeting]) error { return nil })
	w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws, TracerProvider: tp, Propagator: prop})
	c, err := queue.New(db, queue.Config{TracerProvider: tp, Propagator: prop})
	must(t, err)
	enq, err := c.Enqueue(ctx, queue.Job{Group: "g", Args: Greeting{"Ada"}})
	must(t, err)
	res, err := w.WorkJob(ctx, t, enq.ID)
	if err != nil || res.Outcome != queue.OutcomeCompleted {
		t.Fatalf("WorkJob: %+v, %v", res, err)
	}
	var enqueue, run sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		switch s.Name() {
		case "leasehold.enqueue":
			enqueue = s
		case "leasehold.run":
			run = s
		}
	}
	if enqueue == nil || run == nil {
		t.Fatalf("spans: enqueue %v, run %v; want both", enqueue, run)
	}
	if run.SpanContext().TraceID() != enqueue.SpanContext().TraceID() || run.Parent().SpanID() != enqueue.SpanContext().SpanID() {
		t.Errorf("the run's span is in trace %s under %s; want a child of the enqueue span %s",
			run.SpanContext().TraceID(), run.Parent().SpanID(), enqueue.SpanContext().SpanID())
	}
}

package queue_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// recorder returns a tracer provider whose spans sr records.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp, sr
}

// attr returns the value of span s's attribute k (invalid: none).
func attr(s sdktrace.ReadOnlySpan, k string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// spansNamed returns the ended spans named name.
func spansNamed(sr *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// runSpanOf waits for the ended run span of job id, and returns it.
func runSpanOf(t *testing.T, sr *tracetest.SpanRecorder, id int64) sdktrace.ReadOnlySpan {
	t.Helper()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		for _, s := range spansNamed(sr, "leasehold.run") {
			if attr(s, "leasehold.job.id").AsInt64() == id || slices.Contains(attr(s, "leasehold.job.ids").AsInt64Slice(), id) {
				return s
			}
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no leasehold.run span for job %d", id)
		}
	}
}

// completeSpanOf waits for the ended completion span recording job id.
func completeSpanOf(t *testing.T, sr *tracetest.SpanRecorder, id int64) sdktrace.ReadOnlySpan {
	t.Helper()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		for _, s := range spansNamed(sr, "leasehold.complete") {
			if slices.Contains(attr(s, "leasehold.job.ids").AsInt64Slice(), id) && s.Status().Code != codes.Error {
				return s
			}
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no leasehold.complete span for job %d", id)
		}
	}
}

// joins checks that run, a run span, is in the trace of enq, the enqueue
// span of its job: its child, and linked to it.
func joins(run, enq sdktrace.ReadOnlySpan) error {
	sc := enq.SpanContext()
	switch {
	case run.SpanContext().TraceID() != sc.TraceID():
		return fmt.Errorf("run span in trace %s; the enqueue's is %s", run.SpanContext().TraceID(), sc.TraceID())
	case run.Parent().SpanID() != sc.SpanID():
		return fmt.Errorf("run span's parent is %s; want the enqueue span %s", run.Parent().SpanID(), sc.SpanID())
	case !slices.ContainsFunc(run.Links(), func(l sdktrace.Link) bool { return l.SpanContext.SpanID() == sc.SpanID() }):
		return fmt.Errorf("run span has no link to the enqueue span (links %v)", run.Links())
	}
	return nil
}

// storedTrace reads the trace carrier stored with job id ("": NULL).
func storedTrace(t *testing.T, pool *pgxpool.Pool, id int64) string {
	t.Helper()
	var s *string
	pgtest.Must(t, pool.QueryRow(pgtest.Context(t), `SELECT trace::text FROM leasehold.jobs WHERE id = $1`, id).Scan(&s))
	if s == nil {
		return ""
	}
	return *s
}

// A job enqueued under a span runs under a run span in that span's trace,
// the child of the enqueue span, with the job's attributes; its
// completion, fetch and (transactional) fenced completion have spans with
// the token; a batch's run span links to its jobs' enqueue span; a job
// enqueued without tracing stores no trace and runs under a root span.
func TestTraceFollowsTheJobFromEnqueueToCompletion(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	ledgerSetup(t, pool)
	tp, sr := recorder(t)
	prop := propagation.TraceContext{}
	db := pgtest.DBOn(t, pool)
	traced, err := queue.New(db, queue.Config{TracerProvider: tp, Propagator: prop})
	pgtest.Must(t, err)
	untraced, err := queue.New(db, queue.Config{TracerProvider: noop.NewTracerProvider(), Propagator: prop})
	pgtest.Must(t, err)

	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[email]) error {
		if !trace.SpanFromContext(ctx).SpanContext().IsValid() {
			return fmt.Errorf("the handler's context has no span")
		}
		return nil
	})
	queue.HandleTx(ws, record)
	queue.HandleTxBatch(ws, func(ctx context.Context, tx pgx.Tx, works []*queue.Work[reprice]) error { return nil })

	rctx, request := tp.Tracer("test").Start(ctx, "request")
	plain, err := traced.Enqueue(rctx, queue.Job{Group: "emails", Args: email{To: "a@example.com"}})
	pgtest.Must(t, err)
	tx, err := traced.Enqueue(rctx, queue.Job{Group: "emails", Key: "acct", Args: deposit{Seq: 1}})
	pgtest.Must(t, err)
	batch, err := traced.EnqueueMany(rctx, queue.Job{Group: "emails", Key: "k", Args: reprice{User: 1}, Ordering: queue.OrderNonBlocking},
		queue.Job{Group: "emails", Key: "k", Args: reprice{User: 2}, Ordering: queue.OrderNonBlocking})
	pgtest.Must(t, err)
	request.End()
	bare, err := untraced.Enqueue(ctx, queue.Job{Group: "emails", Args: email{To: "b@example.com"}})
	pgtest.Must(t, err)

	if s := storedTrace(t, pool, plain.ID); !strings.Contains(s, `"traceparent"`) {
		t.Fatalf("stored trace of a traced job = %q; want a traceparent", s)
	}
	if s := storedTrace(t, pool, bare.ID); s != "" {
		t.Fatalf("stored trace of an untraced job = %q; want NULL", s)
	}
	enqs := spansNamed(sr, "leasehold.enqueue")
	if len(enqs) != 3 {
		t.Fatalf("%d enqueue spans; want 3 (one per traced call)", len(enqs))
	}
	for _, e := range enqs {
		if e.Parent().SpanID() != request.SpanContext().SpanID() || e.SpanKind() != trace.SpanKindProducer {
			t.Fatalf("enqueue span %v: parent %s, kind %v; want a producer child of the request", e.Name(), e.Parent().SpanID(), e.SpanKind())
		}
	}
	enqOf := func(id int64) sdktrace.ReadOnlySpan {
		for _, e := range enqs {
			if attr(e, "leasehold.job.id").AsInt64() == id || slices.Contains(attr(e, "leasehold.job.ids").AsInt64Slice(), id) {
				return e
			}
		}
		t.Fatalf("no enqueue span lists job %d", id)
		return nil
	}

	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		TracerProvider: tp, Propagator: prop}, true)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)

	// The plain job: a consumer run span in the request's trace, its
	// completion recorded by a fenced statement under the same token.
	run := runSpanOf(t, sr, plain.ID)
	if err := joins(run, enqOf(plain.ID)); err != nil {
		t.Fatal(err)
	}
	if run.SpanKind() != trace.SpanKindConsumer || run.Status().Code != codes.Unset ||
		attr(run, "leasehold.job.kind").AsString() != "email" || attr(run, "leasehold.group").AsString() != "emails" ||
		attr(run, "leasehold.partition").AsInt64() != int64(plain.Partition) || attr(run, "leasehold.job.attempt").AsInt64() != 1 ||
		attr(run, "leasehold.token").AsInt64() <= 0 || attr(run, "leasehold.job.outcome").AsString() != "completed" {
		t.Fatalf("plain run span: kind %v, status %v, attributes %v", run.SpanKind(), run.Status(), run.Attributes())
	}
	comp := completeSpanOf(t, sr, plain.ID)
	if got := completeToken(comp, plain.Partition); got != attr(run, "leasehold.token").AsInt64() {
		t.Fatalf("completion span token %v (attributes %v); the run's is %v", got, comp.Attributes(), attr(run, "leasehold.token"))
	}

	// The transactional job: its fenced completion is a child of its run.
	txRun := runSpanOf(t, sr, tx.ID)
	if err := joins(txRun, enqOf(tx.ID)); err != nil {
		t.Fatal(err)
	}
	if c := completeSpanOf(t, sr, tx.ID); c.Parent().SpanID() != txRun.SpanContext().SpanID() {
		t.Fatalf("the transactional completion span's parent is %s; want its run span %s", c.Parent().SpanID(), txRun.SpanContext().SpanID())
	}

	// The batch: a root run span linked to its jobs' enqueue span.
	for _, b := range batch {
		br := runSpanOf(t, sr, b.ID)
		sc := enqOf(b.ID).SpanContext()
		if br.Parent().IsValid() || !slices.ContainsFunc(br.Links(), func(l sdktrace.Link) bool { return l.SpanContext.SpanID() == sc.SpanID() }) {
			t.Fatalf("batch run span: parent %v, links %v; want a root linked to %s", br.Parent(), br.Links(), sc.SpanID())
		}
	}

	// The untraced job: a root run span with no link.
	br := runSpanOf(t, sr, bare.ID)
	if br.Parent().IsValid() || len(br.Links()) != 0 || br.SpanContext().TraceID() == request.SpanContext().TraceID() {
		t.Fatalf("untraced job's run span: parent %v, links %v; want a new root without links", br.Parent(), br.Links())
	}

	fetches := spansNamed(sr, "leasehold.fetch")
	if len(fetches) == 0 || !slices.ContainsFunc(fetches, func(s sdktrace.ReadOnlySpan) bool {
		return attr(s, "leasehold.job.count").AsInt64() > 0 && attr(s, "leasehold.token").AsInt64() > 0
	}) {
		t.Fatalf("fetch spans %d; want some that fetched jobs, with the token", len(fetches))
	}
}

// A handler's error marks its run span as an error with the error's text;
// a snooze is no error.
func TestTraceRecordsHandlerErrors(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	tp, sr := recorder(t)
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{TracerProvider: tp})
	pgtest.Must(t, err)
	ws := queue.NewWorkers()
	var snoozed atomic.Bool
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[email]) error {
		if w.Args.To == "later" {
			if snoozed.CompareAndSwap(false, true) {
				return queue.Snooze(time.Millisecond)
			}
			return nil
		}
		return fmt.Errorf("smtp refused %s", w.Args.To)
	})
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: email{To: "x@example.com"}, MaxAttempts: 1})
	pgtest.Must(t, err)
	later, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: email{To: "later"}})
	pgtest.Must(t, err)
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond, TracerProvider: tp}, true)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	run := runSpanOf(t, sr, res.ID)
	if run.Status().Code != codes.Error || !strings.Contains(run.Status().Description, "smtp refused x@example.com") ||
		attr(run, "leasehold.job.outcome").AsString() != "discarded" {
		t.Fatalf("failed run span: status %v, attributes %v; want an error status with the handler's error, outcome discarded",
			run.Status(), run.Attributes())
	}
	var outcomes []string
	for _, s := range spansNamed(sr, "leasehold.run") {
		if attr(s, "leasehold.job.id").AsInt64() == later.ID {
			if s.Status().Code != codes.Unset {
				t.Fatalf("run span of job %d (%v): status %v; want unset", later.ID, attr(s, "leasehold.job.outcome"), s.Status())
			}
			outcomes = append(outcomes, attr(s, "leasehold.job.outcome").AsString())
		}
	}
	if !slices.Equal(outcomes, []string{"snoozed", "completed"}) {
		t.Fatalf("run spans of the snoozed job: outcomes %v; want snoozed, completed", outcomes)
	}
}

// The negative control of joins: with a propagator that carries nothing,
// no trace is stored, and the run span does not join the enqueue's trace;
// joins says so.
func TestTraceJoinsCatchesAnUnlinkedRun(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	tp, sr := recorder(t)
	none := propagation.NewCompositeTextMapPropagator() // carries nothing
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{TracerProvider: tp, Propagator: none})
	pgtest.Must(t, err)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[email]) error { return nil })
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: email{To: "a@example.com"}})
	pgtest.Must(t, err)
	if s := storedTrace(t, pool, res.ID); s != "" {
		t.Fatalf("stored trace = %q; want NULL with a propagator that carries nothing", s)
	}
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond, TracerProvider: tp, Propagator: none}, true)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	enqs := spansNamed(sr, "leasehold.enqueue")
	if len(enqs) != 1 {
		t.Fatalf("%d enqueue spans; want 1", len(enqs))
	}
	if err := joins(runSpanOf(t, sr, res.ID), enqs[0]); err == nil {
		t.Fatal("joins accepted a run span that is not in its enqueue's trace")
	}
}

// completeToken is the token a completion span names for partition part:
// its leasehold.token when it records one grant's outcomes, else the entry
// of leasehold.tokens beside part in leasehold.partitions (0: none).
func completeToken(span sdktrace.ReadOnlySpan, part int) int64 {
	if v := attr(span, "leasehold.token"); v.Type() != attribute.INVALID {
		return v.AsInt64()
	}
	parts, tokens := attr(span, "leasehold.partitions").AsInt64Slice(), attr(span, "leasehold.tokens").AsInt64Slice()
	for i, p := range parts {
		if int(p) == part && i < len(tokens) {
			return tokens[i]
		}
	}
	return 0
}

package worker_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// Config.Queue's TracerProvider and Propagator reach the worker's
// processor: a job enqueued under a span runs under a child of its
// enqueue span, whose token attribute is the job's run's token.
func TestQueueTracingThroughTheWorker(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	ledgerSetup(t, pool)
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	prop := propagation.TraceContext{}
	ws := queue.NewWorkers()
	queue.HandleTx(ws, record("w1"))
	start(t, pool, worker.Config{Workers: ws, Queue: queue.ProcessorConfig{TracerProvider: tp, Propagator: prop}})
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{TracerProvider: tp, Propagator: prop})
	pgtest.Must(t, err)
	rctx, span := tp.Tracer("test").Start(ctx, "request")
	res, err := c.Enqueue(rctx, queue.Job{Group: "g", Key: "k", Args: deposit{Seq: 1}})
	span.End()
	pgtest.Must(t, err)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	var token int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT token FROM ledger WHERE job_id = $1`, res.ID).Scan(&token))
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		var enq, run sdktrace.ReadOnlySpan
		for _, s := range sr.Ended() {
			switch s.Name() {
			case "leasehold.enqueue":
				enq = s
			case "leasehold.run":
				run = s
			}
		}
		if enq != nil && run != nil {
			var runToken int64
			for _, kv := range run.Attributes() {
				if kv.Key == "leasehold.token" {
					runToken = kv.Value.AsInt64()
				}
			}
			if run.Parent().SpanID() != enq.SpanContext().SpanID() || run.SpanContext().TraceID() != span.SpanContext().TraceID() || runToken != token {
				t.Fatalf("run span: parent %s, trace %s, token %d; want the enqueue span %s, trace %s, token %d",
					run.Parent().SpanID(), run.SpanContext().TraceID(), runToken, enq.SpanContext().SpanID(), span.SpanContext().TraceID(), token)
			}
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("no enqueue and run spans")
		}
	}
}

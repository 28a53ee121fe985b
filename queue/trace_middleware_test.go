package queue_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// TraceMiddleware wraps each run in a leasehold.handler span: the child of
// the Processor's run span when the Processor traces, a root of its own
// when only the middleware does; with the run's attributes, and an Error
// status for a failed run only (a snooze is none). A no-op provider's
// middleware records nothing.
func TestTraceMiddleware(t *testing.T) {
	t.Parallel()
	for _, processorTraces := range []bool{true, false} {
		t.Run(map[bool]string{true: "under the run span", false: "alone"}[processorTraces], func(t *testing.T) {
			t.Parallel()
			ctx := pgtest.Context(t)
			pool, c := setup(t)
			tp, sr := recorder(t)
			ws := queue.NewWorkers()
			ws.Use(queue.TraceMiddleware(noop.NewTracerProvider())) // records nothing
			ws.Use(queue.TraceMiddleware(tp))
			snoozed := false
			queue.Handle(ws, func(ctx context.Context, w *queue.Work[email]) error {
				switch {
				case w.Args.To == "fail":
					return errors.New("smtp refused")
				case w.Args.To == "later" && !snoozed:
					snoozed = true // one job of this kind runs at a time: its key
					return queue.Snooze(time.Millisecond)
				}
				return nil
			})
			var ids []int64
			for _, to := range []string{"ok", "fail", "later"} {
				res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: email{To: to}, MaxAttempts: 1})
				pgtest.Must(t, err)
				ids = append(ids, res.ID)
			}
			cfg := queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond}
			if processorTraces {
				cfg.TracerProvider = tp
			}
			member(t, pool, 8, cfg, true)
			pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
			spans := spansNamed(sr, "leasehold.handler")
			if len(spans) != 4 { // ok, fail, later twice
				t.Fatalf("%d leasehold.handler spans; want 4 (one per run)", len(spans))
			}
			for _, s := range spans {
				id := attr(s, "leasehold.job.id").AsInt64()
				if attr(s, "leasehold.job.kind").AsString() != "email" || attr(s, "leasehold.group").AsString() != "emails" ||
					attr(s, "leasehold.token").AsInt64() == 0 {
					t.Fatalf("handler span of job %d: attributes %v", id, s.Attributes())
				}
				wantErr := id == ids[1]
				if got := s.Status().Code == codes.Error; got != wantErr {
					t.Fatalf("handler span of job %d: status %v; want error %v", id, s.Status(), wantErr)
				}
				if processorTraces {
					runSpanOf(t, sr, id) // waits for the job's run spans to end
					var runs []trace.SpanID
					for _, r := range spansNamed(sr, "leasehold.run") {
						if attr(r, "leasehold.job.id").AsInt64() == id {
							runs = append(runs, r.SpanContext().SpanID())
						}
					}
					if !slices.Contains(runs, s.Parent().SpanID()) {
						t.Fatalf("handler span of job %d: parent %s; want one of its run spans %v", id, s.Parent().SpanID(), runs)
					}
				} else if s.Parent().IsValid() {
					t.Fatalf("handler span of job %d has a parent %s; the Processor does not trace", id, s.Parent().SpanID())
				}
			}
			if !processorTraces && len(spansNamed(sr, "leasehold.run")) != 0 {
				t.Fatal("run spans recorded though the Processor does not trace")
			}
		})
	}
}

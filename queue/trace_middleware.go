package queue

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/trace"
)

// spanHandler is the span of TraceMiddleware.
const spanHandler = "leasehold.handler"

// TraceMiddleware returns a Middleware that traces every run it wraps with
// a leasehold.handler span of tp's tracer: a child of the context's span
// (the leasehold.run span when the Processor traces too, see
// ProcessorConfig.TracerProvider), with the run's group, partition,
// fencing token, kind and job ids as attributes, and Error status when the
// run fails. Put it last (innermost) in Workers.Use to time the handler
// alone, apart from the middleware around it (rate limits, retries of
// your own), or give it a provider of its own to trace handlers without
// the Processor's spans. A nil tp, or a no-op one, returns a middleware
// that only calls next.
//
// The Processor's leasehold.run span, not this one, joins the trace the
// job was enqueued under: see docs/tracing.md.
func TraceMiddleware(tp trace.TracerProvider) Middleware {
	t := newTracing(tp, nil)
	return func(next HandlerFunc) HandlerFunc {
		if t.tracer == nil {
			return next
		}
		return func(ctx context.Context, run *Run) error {
			ctx, span := t.tracer.Start(ctx, spanHandler, trace.WithSpanKind(trace.SpanKindInternal))
			if span.IsRecording() {
				ids := make([]int64, min(len(run.Jobs), maxSpanIDs))
				for i := range ids {
					ids[i] = run.Jobs[i].ID
				}
				span.SetAttributes(attrSystem.String("leasehold"), attrGroup.String(run.Group),
					attrPartition.Int(run.Partition), attrToken.Int64(int64(run.Token)), attrKind.String(run.Kind),
					attrJobCount.Int(len(run.Jobs)), attrJobIDs.Int64Slice(ids))
				if len(run.Jobs) == 1 {
					span.SetAttributes(attrJobID.Int64(run.Jobs[0].ID), attrAttempt.Int(run.Jobs[0].Attempt))
				}
			}
			err := next(ctx, run)
			var oc Outcome
			if _, ok := errors.AsType[snoozeError](err); ok {
				oc = OutcomeSnoozed // a snooze is no error
			}
			end(span, err, oc)
			return err
		}
	}
}

package queue

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/leasehold/leasehold/partition"
)

// Span names (see docs/tracing.md).
const (
	spanEnqueue  = "leasehold.enqueue"
	spanFetch    = "leasehold.fetch"
	spanRun      = "leasehold.run"
	spanComplete = "leasehold.complete"
)

// Attribute keys of the spans (see docs/tracing.md).
const (
	attrSystem    = attribute.Key("messaging.system") // always "leasehold"
	attrGroup     = attribute.Key("leasehold.group")
	attrPartition = attribute.Key("leasehold.partition")
	attrToken     = attribute.Key("leasehold.token")
	// attrPartitions and attrTokens replace attrPartition and attrToken on
	// a completion span that records the outcomes of several grants.
	attrPartitions = attribute.Key("leasehold.partitions")
	attrTokens     = attribute.Key("leasehold.tokens")
	attrJobID      = attribute.Key("leasehold.job.id")
	attrJobIDs     = attribute.Key("leasehold.job.ids")
	attrJobCount   = attribute.Key("leasehold.job.count")
	attrKind       = attribute.Key("leasehold.job.kind")
	attrAttempt    = attribute.Key("leasehold.job.attempt")
	attrOutcome    = attribute.Key("leasehold.job.outcome")
	attrWaiting    = attribute.Key("leasehold.fetch.waiting_keys")
	attrLimit      = attribute.Key("leasehold.fetch.limit")
)

// tracerName names the queue's tracer (its instrumentation scope).
const tracerName = "github.com/leasehold/leasehold/queue"

// maxSpanIDs bounds the job ids listed in one span's leasehold.job.ids.
const maxSpanIDs = 1000

// tracing is a component's tracer and propagator. A zero tracing (nil
// tracer) is off: every method is then a no-op that allocates nothing.
type tracing struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// newTracing returns the tracing of tp and prop, prop defaulting to the
// global propagator; off for a nil tp or a noop.TracerProvider. (Off by
// default, not the global provider: even with no SDK installed, the
// global one costs about 1µs and 6 allocations per job run, see
// BenchmarkRunSpan, some 8% of the client CPU a no-op job costs.)
func newTracing(tp trace.TracerProvider, prop propagation.TextMapPropagator) tracing {
	if tp == nil {
		return tracing{}
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return tracing{}
	}
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	return tracing{tracer: tp.Tracer(tracerName), prop: prop}
}

// start starts a span as a child of ctx's (nil span when off). Its
// attributes are the caller's to set, and only when the span records: a
// span that is not sampled then costs no attribute slice.
func (t tracing) start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if t.tracer == nil {
		return ctx, nil
	}
	return t.tracer.Start(ctx, name, trace.WithSpanKind(kind))
}

// carrier returns the propagator's carrier of ctx's span context as JSON,
// to store with enqueued jobs; nil when tracing is off or there is none.
func (t tracing) carrier(ctx context.Context) *string {
	if t.tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	t.prop.Inject(ctx, c)
	if len(c) == 0 {
		return nil // a propagator that carries nothing (the global default)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil // a map of strings: cannot fail
	}
	s := string(b)
	return &s
}

// remote returns the span context stored with a job (invalid: none).
func (t tracing) remote(stored []byte) trace.SpanContext {
	if len(stored) == 0 {
		return trace.SpanContext{}
	}
	var c propagation.MapCarrier
	if json.Unmarshal(stored, &c) != nil {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(t.prop.Extract(context.Background(), c))
}

// startRun starts the run span of one job: a child of the span it was
// enqueued under (stored with it), which it also links to, or a new root.
func (t tracing) startRun(ctx context.Context, o partition.Ownership, f fetched) (context.Context, trace.Span) {
	if t.tracer == nil {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	if sc := t.remote(f.trace); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	} else {
		opts = append(opts, trace.WithNewRoot()) // not a child of whatever ran the worker
	}
	ctx, span := t.tracer.Start(ctx, spanRun, opts...)
	if span.IsRecording() {
		span.SetAttributes(attrSystem.String("leasehold"), attrGroup.String(o.Group), attrPartition.Int(o.Partition),
			attrToken.Int64(int64(o.Token)), attrJobID.Int64(f.id), attrKind.String(f.kind), attrAttempt.Int(f.attempt+1))
	}
	return ctx, span
}

// startBatch starts the run span of a batch handler's batch: a new root,
// linked to the span each job was enqueued under.
func (t tracing) startBatch(ctx context.Context, o partition.Ownership, fs []fetched) (context.Context, trace.Span) {
	if t.tracer == nil {
		return ctx, nil
	}
	var links []trace.Link
	for _, f := range fs {
		if sc := t.remote(f.trace); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attrJobID.Int64(f.id)}})
		}
	}
	ctx, span := t.tracer.Start(ctx, spanRun, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithNewRoot(), trace.WithLinks(links...))
	if span.IsRecording() {
		ids := make([]int64, min(len(fs), maxSpanIDs))
		for i := range ids {
			ids[i] = fs[i].id
		}
		span.SetAttributes(attrSystem.String("leasehold"), attrGroup.String(o.Group), attrPartition.Int(o.Partition),
			attrToken.Int64(int64(o.Token)), attrKind.String(fs[0].kind), attrJobCount.Int(len(fs)), attrJobIDs.Int64Slice(ids))
	}
	return ctx, span
}

// fetched records the span of a fetch that began at start, once it
// ended: only for a fetch that found jobs or failed, so that an idle
// partition's polls make no spans.
func (t tracing) fetched(ctx context.Context, start time.Time, o partition.Ownership, n int, res *fetchResult, err *error) {
	if *err == nil && len(res.jobs) == 0 {
		return
	}
	_, span := t.tracer.Start(ctx, spanFetch, trace.WithTimestamp(start), trace.WithNewRoot())
	if span.IsRecording() {
		span.SetAttributes(attrSystem.String("leasehold"), attrGroup.String(o.Group), attrPartition.Int(o.Partition),
			attrToken.Int64(int64(o.Token)), attrLimit.Int(n), attrJobCount.Int(len(res.jobs)), attrWaiting.Int(len(res.waiting)))
	}
	end(span, *err, "")
}

// startComplete starts the span of a fenced completion statement: a child
// of the run's span for a transactional run, a new root for the outcomes
// the completer records together.
func (t tracing) startComplete(ctx context.Context, gs []grantOutcomes) (context.Context, trace.Span) {
	ctx, span := t.tracer.Start(ctx, spanComplete, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() && len(gs) > 0 {
		var ids []int64
		jobs := 0
		for _, g := range gs {
			jobs += len(g.outs)
			for _, o := range g.outs {
				if len(ids) < maxSpanIDs {
					ids = append(ids, o.id)
				}
			}
		}
		o := gs[0].o
		span.SetAttributes(attrSystem.String("leasehold"), attrGroup.String(o.Group), attrJobCount.Int(jobs), attrJobIDs.Int64Slice(ids))
		if len(gs) == 1 {
			span.SetAttributes(attrPartition.Int(o.Partition), attrToken.Int64(int64(o.Token)))
		} else {
			parts, tokens := make([]int, len(gs)), make([]int64, len(gs))
			for i, g := range gs {
				parts[i], tokens[i] = g.o.Partition, int64(g.o.Token)
			}
			span.SetAttributes(attrPartitions.IntSlice(parts), attrTokens.Int64Slice(tokens))
		}
	}
	return ctx, span
}

// startEnqueue starts the span of one Enqueue, EnqueueMany or EnqueueTx
// call: one span for all its jobs, whose context every job stores.
func (t tracing) startEnqueue(ctx context.Context, jobs []Job) (context.Context, trace.Span) {
	ctx, span := t.tracer.Start(ctx, spanEnqueue, trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(attrSystem.String("leasehold"), attrJobCount.Int(len(jobs)))
		if len(jobs) == 1 && !isNil(jobs[0].Args) {
			span.SetAttributes(attrGroup.String(jobs[0].Group), attrKind.String(jobs[0].Args.Kind()))
		}
	}
	return ctx, span
}

// endEnqueue ends an enqueue span with the ids of the jobs enqueued.
func (t tracing) endEnqueue(span trace.Span, out []Enqueued, err error) {
	if span.IsRecording() && err == nil {
		if len(out) == 1 {
			span.SetAttributes(attrJobID.Int64(out[0].ID), attrPartition.Int(out[0].Partition))
		} else {
			ids := make([]int64, 0, min(len(out), maxSpanIDs))
			for _, e := range out[:min(len(out), maxSpanIDs)] {
				ids = append(ids, e.ID) // 0: a duplicate, not enqueued
			}
			span.SetAttributes(attrJobIDs.Int64Slice(ids))
		}
	}
	end(span, err, "")
}

// end ends span (nil: off) with the outcome, and err as an error status
// unless the outcome says it was none (a snooze, a job already finished).
func end(span trace.Span, err error, oc Outcome) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		if oc != "" {
			span.SetAttributes(attrOutcome.String(string(oc)))
		}
		if err != nil && oc != OutcomeSnoozed && oc != OutcomeSkipped && oc != OutcomeCompleted {
			var he handlerError
			if errors.As(err, &he) {
				err = he.err
			}
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

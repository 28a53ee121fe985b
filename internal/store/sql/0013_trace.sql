-- Tracing (package queue, docs/tracing.md). A job enqueued under a sampled
-- or remote trace context keeps that context, as the propagator's carrier
-- (for W3C Trace Context: {"traceparent": "...", "tracestate": "..."}),
-- so that its runs join the enqueuer's trace. NULL when the enqueue had no
-- valid span context (tracing off): no cost then. Nullable, no default: a
-- metadata-only change, no table rewrite.
ALTER TABLE {{schema}}.jobs ADD COLUMN trace jsonb;

package queue

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/leasehold/leasehold/partition"
)

// BenchmarkRunSpan is the per-job cost tracing adds to a run (startRun and
// end): off (the default), the global provider (otel.GetTracerProvider(),
// no SDK installed), and an SDK that samples nothing or everything (no
// exporter), with and without a stored trace context.
func BenchmarkRunSpan(b *testing.B) {
	o := partition.Ownership{Group: "g", Partition: 3, Token: 42}
	prop := propagation.TraceContext{}
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	always := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	stored := []byte(`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`)
	cases := []struct {
		name string
		t    tracing
		f    fetched
	}{
		{"off", newTracing(noop.NewTracerProvider(), nil), fetched{id: 1, kind: "k"}},
		{"global", newTracing(otel.GetTracerProvider(), nil), fetched{id: 1, kind: "k"}},
		{"never-sampled", newTracing(never, prop), fetched{id: 1, kind: "k"}},
		{"never-sampled-stored", newTracing(never, prop), fetched{id: 1, kind: "k", trace: stored}},
		{"sampled", newTracing(always, prop), fetched{id: 1, kind: "k"}},
		{"sampled-stored", newTracing(always, prop), fetched{id: 1, kind: "k", trace: stored}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				_, span := c.t.startRun(ctx, o, c.f)
				end(span, nil, OutcomeCompleted)
			}
		})
	}
}

// BenchmarkCall is the per-job cost of a handler call without middleware
// (as before middleware existed) and through one pass-through middleware.
func BenchmarkCall(b *testing.B) {
	plain := handler{kind: "k", run: func(context.Context, pgx.Tx, *Work[rawArgs]) error { return nil }}
	ws := &Workers{use: []Middleware{func(next HandlerFunc) HandlerFunc { return next }}}
	wrapped := ws.wrap(plain)
	w := &Work[rawArgs]{ID: 1, Group: "g", Args: rawArgs{[]byte(`{}`)}}
	for _, c := range []struct {
		name string
		h    handler
	}{{"no-middleware", plain}, {"one-middleware", wrapped}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				if err := call(ctx, c.h, nil, w); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

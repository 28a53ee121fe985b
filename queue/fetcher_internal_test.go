package queue

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
)

// batchCount counts the batches (the fetcher's round trips) sent on a pool.
type batchCount struct{ n atomic.Int64 }

func (b *batchCount) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	b.n.Add(1)
	return ctx
}
func (b *batchCount) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (b *batchCount) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData)     {}
func (b *batchCount) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (b *batchCount) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// An ask whose grant ended while it waited (its context done) is dropped
// by the fetcher without a statement: a handoff of many partitions costs no
// fetch for them. Control: the same asks with a live context are read, in
// one statement.
func TestFetcherDropsAsksOfEndedGrants(t *testing.T) {
	t.Parallel()
	pc, err := pgxpool.ParseConfig(pgtest.MigratedURL(t))
	pgtest.Must(t, err)
	tr := &batchCount{}
	pc.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	pgtest.Must(t, err)
	t.Cleanup(pool.Close)
	p, err := NewProcessor(pgtest.Open(t, pool, leasehold.Config{}), ProcessorConfig{Workers: NewWorkers()})
	pgtest.Must(t, err)
	fr := p.fetcher
	idle := func() bool {
		fr.mu.Lock()
		defer fr.mu.Unlock()
		return !fr.running
	}
	for _, live := range []bool{false, true} {
		before := tr.n.Load()
		ctx, cancel := context.WithCancel(pgtest.Context(t))
		if !live {
			cancel()
		}
		// Hold the fetcher's lock so that all asks queue before it reads.
		fr.mu.Lock()
		fr.running = true
		done := make(chan struct{}, 8)
		for part := range 8 {
			w := &asked{fetchAsk: fetchAsk{group: "g", part: part, n: 10}, done: make(chan struct{}), gone: ctx.Done()}
			fr.asks = append(fr.asks, w)
			go func() { <-w.done; done <- struct{}{} }()
		}
		fr.mu.Unlock()
		go fr.loop()
		for range 8 {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("live=%v: an ask was never answered", live)
			}
		}
		for !idle() {
			time.Sleep(time.Millisecond)
		}
		cancel()
		got := tr.n.Load() - before
		switch {
		case !live && got != 0:
			t.Fatalf("asks of ended grants: %d statements; want none", got)
		case live && got != 1:
			t.Fatalf("control, live asks: %d statements; want 1 (the 8 partitions read together)", got)
		}
	}
}

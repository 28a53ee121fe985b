package queue_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/queue"
)

// openCount counts the statements that open runs, and the grants they name.
type openCount struct {
	sql, kindsSQL string

	mu                        sync.Mutex
	statements, grants, kinds int
}

func (c *openCount) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if d.SQL == c.kindsSQL {
		c.mu.Lock()
		c.kinds++
		c.mu.Unlock()
	}
	if d.SQL == c.sql && len(d.Args) > 1 {
		parts, _ := d.Args[1].([]int32)
		c.mu.Lock()
		c.statements++
		c.grants += len(parts)
		c.mu.Unlock()
	}
	return ctx
}
func (c *openCount) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The runs of grants that start together are opened by a few statements,
// not one each: a member starting alone is granted its 32 partitions at
// once; and the kinds the worker handles are recorded once, not by each
// grant. The grants the statements name are the control: every grant's run
// is opened, and a run recorded for each partition.
func TestGrantsStartingTogetherOpenTheirRunsTogether(t *testing.T) {
	t.Parallel()
	const parts = 32
	st, err := store.For("")
	pgtest.Must(t, err)
	pc, err := pgxpool.ParseConfig(pgtest.MigratedURL(t))
	pgtest.Must(t, err)
	count := &openCount{sql: st.Queue.OpenRun, kindsSQL: st.Batch.RegisterKinds}
	pc.ConnConfig.Tracer = count
	pool, err := pgxpool.NewWithConfig(pgtest.Context(t), pc)
	pgtest.Must(t, err)
	t.Cleanup(pool.Close)
	p, m := groupMember(t, pool, "emails", parts, queue.ProcessorConfig{Workers: queue.NewWorkers()}, false)
	waitOwned(t, m, parts)
	waitFetched(t, p, parts)
	var runs int
	pgtest.Must(t, pool.QueryRow(pgtest.Context(t), `SELECT count(*) FROM leasehold.queue_runs WHERE group_name = 'emails' AND open`).Scan(&runs))
	count.mu.Lock()
	defer count.mu.Unlock()
	if count.grants != parts || runs != parts {
		t.Fatalf("control: the open statements named %d grants and %d runs are open; want %d each", count.grants, runs, parts)
	}
	if count.statements > 4 {
		t.Fatalf("%d grants starting together were opened by %d statements; want at most 4", parts, count.statements)
	}
	if count.kinds != 1 {
		t.Fatalf("%d grants starting together recorded the worker's kinds %d times; want once", parts, count.kinds)
	}
}

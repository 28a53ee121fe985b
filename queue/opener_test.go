package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/queue"
)

// openCount counts the statements that open runs, and the grants they name.
type openCount struct {
	sql, kindsSQL, closeSQL string

	mu                                sync.Mutex
	statements, grants, kinds, closes int
}

func (c *openCount) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	switch d.SQL {
	case c.kindsSQL:
		c.kinds++
	case c.closeSQL:
		c.closes++
	}
	c.mu.Unlock()
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
// once; the kinds the worker handles are recorded once, not by each grant;
// and the runs that end together (a Stop) are closed by a few statements.
// The controls: the grants the open statements name, and the runs open
// after the start and closed after the stop: every run was opened and
// closed.
func TestGrantsOpenAndCloseTheirRunsTogether(t *testing.T) {
	t.Parallel()
	const parts = 32
	st, err := store.For("")
	pgtest.Must(t, err)
	pc, err := pgxpool.ParseConfig(pgtest.MigratedURL(t))
	pgtest.Must(t, err)
	count := &openCount{sql: st.Queue.OpenRun, kindsSQL: st.Batch.RegisterKinds, closeSQL: st.Queue.CloseRun}
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
	count.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pgtest.Must(t, m.Stop(ctx))
	pgtest.Must(t, pool.QueryRow(pgtest.Context(t), `SELECT count(*) FROM leasehold.queue_runs WHERE group_name = 'emails' AND open`).Scan(&runs))
	count.mu.Lock()
	if runs != 0 {
		t.Fatalf("control: %d runs still open after the stop; want 0", runs)
	}
	if count.closes < 1 || count.closes > 4 {
		t.Fatalf("%d runs ending together were closed by %d statements; want 1 to 4", parts, count.closes)
	}
}

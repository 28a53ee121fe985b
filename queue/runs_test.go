package queue_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/queue"
)

// The runs of grants that start together are opened by a few statements,
// not one each: a member starting alone is granted its 32 partitions at
// once; and the runs that end together (a Stop) are closed by a few statements.
// The controls: the grants the open statements name, and the runs open
// after the start and closed after the stop: every run was opened and
// closed. The bound is a quarter of the grants, not a fixed few: the
// first ask goes out at once and the others gather behind it, so how many
// statements it takes follows how the grants' goroutines are scheduled (5
// were seen under -race on a loaded machine; one per grant would be 32).
func TestGrantsOpenAndCloseTheirRunsTogether(t *testing.T) {
	t.Parallel()
	const parts = 32
	st, err := store.For("")
	pgtest.Must(t, err)
	var granted atomic.Int64 // the grants the open statements name
	pool, count := pgtest.CountingPool(t, func(sql string, args []any) {
		if sql == st.Queue.OpenRun && len(args) > 1 {
			parts, _ := args[1].([]int32)
			granted.Add(int64(len(parts)))
		}
	})
	p, m := groupMember(t, pool, "emails", parts, queue.ProcessorConfig{Workers: queue.NewWorkers()}, false)
	waitOwned(t, m, parts)
	waitFetched(t, p, parts)
	openRuns := func() int {
		var n int
		pgtest.Must(t, pool.QueryRow(pgtest.Context(t), `SELECT count(*) FROM leasehold.queue_runs WHERE group_name = 'emails' AND open`).Scan(&n))
		return n
	}
	if g, runs := granted.Load(), openRuns(); g != parts || runs != parts {
		t.Fatalf("control: the open statements named %d grants and %d runs are open; want %d each", g, runs, parts)
	}
	if n := count.Count(st.Queue.OpenRun); n > parts/4 {
		t.Fatalf("%d grants starting together were opened by %d statements; want at most %d", parts, n, parts/4)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pgtest.Must(t, m.Stop(ctx))
	if runs := openRuns(); runs != 0 {
		t.Fatalf("control: %d runs still open after the stop; want 0", runs)
	}
	if n := count.Count(st.Queue.CloseRun); n < 1 || n > parts/4 {
		t.Fatalf("%d runs ending together were closed by %d statements; want 1 to %d", parts, n, parts/4)
	}
}

// A Processor records the kinds it handles once per group, however many of
// its grants start together (each grant asks: 64 workers of 1,024
// partitions sent 403 such statements, queued on one row). Control: the
// one statement was sent, and the kind is recorded.
func TestKindsAreRecordedOncePerProcessor(t *testing.T) {
	t.Parallel()
	const parts = 32
	st, err := store.For("")
	pgtest.Must(t, err)
	pool, count := pgtest.CountingPool(t, nil)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(context.Context, *queue.Work[email]) error { return nil })
	p, m := groupMember(t, pool, "emails", parts, queue.ProcessorConfig{Workers: ws}, false)
	waitOwned(t, m, parts)
	waitFetched(t, p, parts) // every grant is past its ask
	if n := count.Count(st.Batch.RegisterKinds); n != 1 {
		t.Fatalf("%d grants starting together recorded the kinds in %d statements; want 1", parts, n)
	}
	var kinds int
	pgtest.Must(t, pool.QueryRow(pgtest.Context(t), `SELECT count(*) FROM leasehold.group_kinds WHERE group_name = 'emails' AND kind = $1`,
		email{}.Kind()).Scan(&kinds))
	if kinds != 1 {
		t.Fatalf("control: kind %q recorded %d times; want once", email{}.Kind(), kinds)
	}
}

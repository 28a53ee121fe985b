package queue_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// roundTrips counts the round trips of the queue's statements (those on
// the jobs and pauses tables) sent on a pool: a statement on its own, or a
// batch (pipelined statements) as one. The partition member's statements
// (leases, members) are not counted.
type roundTrips struct{ n atomic.Int64 }

func queueSQL(sql string) bool {
	return strings.Contains(sql, ".jobs") || strings.Contains(sql, ".pauses")
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if queueSQL(d.SQL) {
		r.n.Add(1)
	}
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		if queueSQL(q.SQL) {
			r.n.Add(1)
			break
		}
	}
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// An idle member costs the database its poll, one round trip per
// PollInterval, whatever its partition count: no statement runs per
// partition. Measured on a member of 4 partitions and one of 64, on a pool
// that counts the Processor's round trips; the counts must be alike and
// near 1 s / PollInterval. The count must also see the polls (at least
// half of them), so that the check cannot pass on a counter that misses
// statements.
func TestIdleMemberCostIsFlatInPartitions(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	const poll = 50 * time.Millisecond
	const window = time.Second
	counts := map[int]int64{}
	for _, n := range []int{4, 64} {
		rt := &roundTrips{}
		pc, err := pgxpool.ParseConfig(url)
		pgtest.Must(t, err)
		pc.ConnConfig.Tracer = rt
		pool, err := pgxpool.NewWithConfig(context.Background(), pc)
		pgtest.Must(t, err)
		t.Cleanup(pool.Close)
		ws := queue.NewWorkers()
		queue.Handle(ws, func(context.Context, *queue.Work[step]) error { return nil })
		p, m := groupMember(t, pool, fmt.Sprintf("idle-%d", n), n, queue.ProcessorConfig{Workers: ws, PollInterval: poll,
			PauseInterval: time.Hour, PublishInterval: time.Hour, RetentionInterval: time.Hour}, false)
		waitOwned(t, m, n)
		waitFetched(t, p, int64(n)) // every partition opened its run and fetched once
		before := rt.n.Load()
		time.Sleep(window)
		counts[n] = rt.n.Load() - before
		t.Logf("%d partitions: %d round trips in %v idle (poll every %v)", n, counts[n], window, poll)
	}
	polls := int64(window / poll)
	for n, c := range counts {
		if c < polls/2 || c > polls+5 {
			t.Errorf("%d partitions: %d round trips in %v idle; want about %d (one poll per %v)", n, c, window, polls, poll)
		}
	}
	if d := counts[64] - counts[4]; d > 5 || d < -5 {
		t.Errorf("idle round trips %d with 64 partitions, %d with 4: want the same", counts[64], counts[4])
	}
}

package queue_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

type fragileJob struct{}

func (fragileJob) Kind() string { return "fragile" }

// The idle cost of a kind's GroupConcurrency: the statements per second
// (pg_stat_statements, of the member's database only) and the server
// connections of an idle member of 8 partitions with one limited kind and
// with none, at the default lease timings. A measurement, not a check:
// LEASEHOLD_SLOT_COST=1 runs it (about a minute; it creates the
// pg_stat_statements extension in the server's admin database).
func TestGroupSlotIdleCost(t *testing.T) {
	if os.Getenv("LEASEHOLD_SLOT_COST") == "" {
		t.Skip("a measurement: set LEASEHOLD_SLOT_COST=1")
	}
	admin := pgtest.PoolURL(t, os.Getenv("LEASEHOLD_TEST_DATABASE_URL"))
	ctx := pgtest.Context(t)
	_, err := admin.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	pgtest.Must(t, err)
	const window = 45 * time.Second
	for _, limit := range []int{0, 3} {
		t.Run(fmt.Sprint("limit=", limit), func(t *testing.T) {
			t.Parallel()
			ctx := pgtest.Context(t)
			url := pgtest.MigratedURL(t)
			pool := pgtest.PoolURL(t, url)
			ws := queue.NewWorkers()
			queue.Handle(ws, func(context.Context, *queue.Work[fragileJob]) error { return nil },
				queue.WithPolicy(queue.Policy{GroupConcurrency: limit}))
			db := pgtest.DBOn(t, pool)
			p, err := queue.NewProcessor(db, queue.ProcessorConfig{Workers: ws})
			pgtest.Must(t, err)
			m, err := partition.New(db, partition.Config{Group: "g", Partitions: 8, Run: p.Run, Lease: lease.Config{}})
			pgtest.Must(t, err)
			pgtest.Must(t, m.Start(ctx))
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				m.Stop(sctx)
			}()
			time.Sleep(10 * time.Second) // grants, first polls, slot members' joins and claims
			var dbid uint32
			var name string
			pgtest.Must(t, pool.QueryRow(ctx, `SELECT oid, datname FROM pg_database WHERE datname = current_database()`).Scan(&dbid, &name))
			_, err = admin.Exec(ctx, `SELECT pg_stat_statements_reset(0, $1, 0)`, dbid)
			pgtest.Must(t, err)
			time.Sleep(window)
			var calls int64
			var conns int
			pgtest.Must(t, admin.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE dbid = $1`, dbid).Scan(&calls))
			pgtest.Must(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1`, name).Scan(&conns))
			t.Logf("GroupConcurrency %d: %.2f statements/s idle over %v, %d server connections (owns %d partitions)",
				limit, float64(calls)/window.Seconds(), window, conns, len(m.Owned()))
			rows, err := admin.Query(ctx, `SELECT calls, left(regexp_replace(query, '\s+', ' ', 'g'), 90) FROM pg_stat_statements
				WHERE dbid = $1 ORDER BY calls DESC LIMIT 12`, dbid)
			pgtest.Must(t, err)
			for rows.Next() {
				var c int64
				var q string
				pgtest.Must(t, rows.Scan(&c, &q))
				t.Logf("  limit %d: %5d  %s", limit, c, q)
			}
			rows.Close()
		})
	}
}

// The statements per second of the slots alone (pg_stat_statements, of
// the test's database only), default timings (lease TTL 15s, turn 2s):
// idle (a group served, no demand), one node continuously busy with the
// kind (N=1), and two nodes competing for N=1. A measurement, not a check:
// LEASEHOLD_SLOT_COST=1 runs it (about 40s).
func TestGroupSlotBusyCost(t *testing.T) {
	if os.Getenv("LEASEHOLD_SLOT_COST") == "" {
		t.Skip("a measurement: set LEASEHOLD_SLOT_COST=1")
	}
	admin := pgtest.PoolURL(t, os.Getenv("LEASEHOLD_TEST_DATABASE_URL"))
	_, err := admin.Exec(pgtest.Context(t), `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	pgtest.Must(t, err)
	const window = 12 * time.Second
	for _, busy := range []int{0, 1, 2} {
		t.Run(fmt.Sprint("busy=", busy), func(t *testing.T) {
			ctx := pgtest.Context(t)
			url := pgtest.MigratedURL(t)
			pool := pgtest.PoolURL(t, url)
			var nodes []*queue.SlotNode
			for i := range max(busy, 1) {
				nodes = append(nodes, queue.StartSlotNode(t, url, fmt.Sprint("w", i)))
			}
			var dbid uint32
			pgtest.Must(t, pool.QueryRow(ctx, `SELECT oid FROM pg_database WHERE datname = current_database()`).Scan(&dbid))
			_, err = admin.Exec(ctx, `SELECT pg_stat_statements_reset(0, $1, 0)`, dbid)
			pgtest.Must(t, err)
			stop := make(chan struct{})
			runs := make([]int, busy)
			done := make(chan struct{})
			for i := range busy {
				go func() {
					defer func() { done <- struct{}{} }()
					runs[i] = nodes[i].Busy(stop)
				}()
			}
			time.Sleep(window)
			close(stop)
			for range busy {
				<-done
			}
			var calls int64
			pgtest.Must(t, admin.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE dbid = $1`, dbid).Scan(&calls))
			t.Logf("%d busy: %.2f statements/s over %v; runs by node %v", busy, float64(calls)/window.Seconds(), window, runs)
		})
	}
}

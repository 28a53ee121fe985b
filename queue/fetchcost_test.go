package queue_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
)

// explain runs EXPLAIN (ANALYZE, BUFFERS) of sql on db (the pool, or a
// transaction to roll back) and returns the buffers the statement touched
// and the plan.
func explain(t *testing.T, ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sql string, args ...any) (int, string) {
	t.Helper()
	var plan string
	pgtest.Must(t, db.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+sql, args...).Scan(&plan))
	var doc []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		} `json:"Plan"`
	}
	pgtest.Must(t, json.Unmarshal([]byte(plan), &doc))
	return doc[0].Plan.Hit + doc[0].Plan.Read, plan
}

// The fetch's cost does not grow with a key's backlog, on a table never
// analysed: draining 20,000 jobs of one key touches about as many buffers
// per fetch as draining 1,000, with the first 200 jobs in flight (as in the
// pipeline), and the fetch returns the key's next 100 jobs at once. The
// previous fetch, the control, touches many times more for the larger
// backlog and returns one job.
func TestFetchCostDoesNotGrowWithKeyBacklog(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	_, err := pool.Exec(ctx, `ALTER TABLE leasehold.jobs SET (autovacuum_enabled = false)`) // never analysed
	pgtest.Must(t, err)
	backlogs := map[int]int{1: 1000, 2: 20000} // partition: jobs of key "hot"
	for p, n := range backlogs {
		_, err := pool.Exec(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at)
			SELECT 'emails', $1, 'hot', 'step', '{}', 25, clock_timestamp() - interval '1 hour' + i * interval '1 microsecond'
			FROM generate_series(1, $2) AS i`, p, n)
		pgtest.Must(t, err)
	}
	var analysed bool
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL
		FROM pg_stat_user_tables WHERE relname = 'jobs'`).Scan(&analysed))
	if analysed {
		t.Fatal("the jobs table was analysed; the test is about plans without statistics")
	}
	st, err := store.For("")
	pgtest.Must(t, err)
	fetch := st.Queue.Fetch
	cost := map[int]int{}
	oldCost := map[int]int{}
	for p := range backlogs {
		var inFlight []int64
		rows, err := pool.Query(ctx, `SELECT id FROM leasehold.jobs WHERE partition = $1 ORDER BY id LIMIT 200`, p)
		pgtest.Must(t, err)
		for rows.Next() {
			var id int64
			pgtest.Must(t, rows.Scan(&id))
			inFlight = append(inFlight, id)
		}
		pgtest.Must(t, rows.Err())
		var plan string
		cost[p], plan = explain(t, ctx, pool, fetch, fetchOf("emails", p, 100, inFlight, nil)...)
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("the fetch plans a sequential scan on an unanalysed table:\n%s", plan)
		}
		var got int
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM (`+fetch+`) AS f WHERE f.kind IS NOT NULL`,
			fetchOf("emails", p, 100, inFlight, nil)...).Scan(&got))
		if got != 100 {
			t.Errorf("partition %d: the fetch returned %d of the key's next jobs; want 100", p, got)
		}
		oldCost[p], _ = explain(t, ctx, pool, st.Queue.FetchBefore12, "emails", p, 100)
	}
	t.Logf("buffers per fetch: 1,000 jobs of one key %d, 20,000: %d (control, the previous fetch: %d and %d)",
		cost[1], cost[2], oldCost[1], oldCost[2])
	if cost[2] > 2*cost[1]+20 {
		t.Errorf("a fetch touches %d buffers with 20,000 jobs of one key, %d with 1,000: it grows with the backlog", cost[2], cost[1])
	}
	if oldCost[2] < 5*oldCost[1] {
		t.Errorf("control: the previous fetch touched %d buffers with 20,000 jobs of one key and %d with 1,000; "+
			"want it to grow with the backlog, or this test cannot tell", oldCost[2], oldCost[1])
	}
}

// The completion statement finds its jobs by primary key even with
// statistics taken when no job was pending (a drained table, refilled):
// the planner would otherwise take the pending-only index for one row and
// walk every pending job for each completion. The control, the same
// statement testing state = 'pending' plainly, does walk them.
func TestCompletionPlanWithStaleStatistics(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	for _, s := range []string{
		`ALTER TABLE leasehold.jobs SET (autovacuum_enabled = false)`,
		`INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at, state, finished_at)
		 SELECT 'emails', i % 8, 'k' || i, 'step', '{}', 25, now(), 'completed', now() FROM generate_series(1, 40) AS i`,
		`ANALYZE leasehold.jobs`, // every job finished
		`TRUNCATE leasehold.jobs`,
		`INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at)
		 SELECT 'emails', i % 8, 'k' || (i % 1000), 'step', '{}', 25, now() FROM generate_series(1, 100000) AS i`,
	} {
		_, err := pool.Exec(ctx, s)
		pgtest.Must(t, err)
	}
	var ids []int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT array_agg(id) FROM (SELECT id FROM leasehold.jobs ORDER BY id LIMIT 100) AS x`).Scan(&ids))
	st, err := store.For("")
	pgtest.Must(t, err)
	complete := st.Queue.Complete
	plain := strings.Replace(complete, "coalesce(j.state = 'pending', false)", "j.state = 'pending'", 1)
	if plain == complete {
		t.Fatal("the control could not be made: the completion statement's state test changed")
	}
	n := len(ids)
	states, spent := make([]string, n), make([]int32, n)
	for i := range ids {
		states[i], spent[i] = "completed", 1
	}
	buffers := func(sql string) int {
		tx, err := pool.Begin(ctx)
		pgtest.Must(t, err)
		defer tx.Rollback(ctx) // the EXPLAIN ANALYZE of an UPDATE changes the jobs
		b, _ := explain(t, ctx, tx, sql, ids, states, spent, make([]*int64, n), make([]*string, n), make([]int64, n), []string(nil))
		return b
	}
	got, control := buffers(complete), buffers(plain)
	t.Logf("buffers to complete 100 of 100,000 pending jobs on stale statistics: %d (control: %d)", got, control)
	if got > 2500 {
		t.Errorf("completing 100 jobs touched %d buffers: it walks the pending jobs", got)
	}
	if control < 5*got {
		t.Errorf("control: the plain state test touched %d buffers, the statement %d; want the control to walk the pending jobs, or this test cannot tell", control, got)
	}
}

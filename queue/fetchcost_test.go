package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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

// explainGeneric is explain of sql's generic plan, as the member runs a
// fetch: the plan a prepared statement runs under settings (a statement
// setting them for the transaction, such as store.FetchSettings, whose
// plan_cache_mode is force_generic_plan), its parameters unknown when it
// is planned.
func explainGeneric(t *testing.T, ctx context.Context, pool *pgxpool.Pool, settings, sql string, args ...any) (int, string) {
	t.Helper()
	conn, err := pool.Acquire(ctx)
	pgtest.Must(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `PREPARE generic_explained AS `+sql)
	pgtest.Must(t, err)
	defer conn.Exec(ctx, `DEALLOCATE generic_explained`)
	tx, err := conn.Begin(ctx) // rolled back: an EXPLAIN ANALYZE of a write writes
	pgtest.Must(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, settings)
	pgtest.Must(t, err)
	// The simple protocol writes the arguments into EXECUTE as literals.
	buffers, plan := explain(t, ctx, simpleProtocol{tx}, `EXECUTE generic_explained(`+params(len(args))+`)`, args...)
	if !strings.Contains(plan, "$1") {
		t.Fatalf("control: the plan explained is not the generic one (no parameter in it):\n%s", plan)
	}
	return buffers, plan
}

// explainWith is explain of sql in a transaction that ran settings first.
func explainWith(t *testing.T, ctx context.Context, pool *pgxpool.Pool, settings, sql string, args ...any) (int, string) {
	t.Helper()
	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, settings)
	pgtest.Must(t, err)
	return explain(t, ctx, tx, sql, args...)
}

// params returns "$1, $2, ..., $n".
func params(n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf("$%d", i+1)
	}
	return strings.Join(ps, ", ")
}

// simpleProtocol runs its queries with pgx's simple protocol.
type simpleProtocol struct{ tx pgx.Tx }

func (s simpleProtocol) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return s.tx.QueryRow(ctx, sql, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
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
		// The member runs the fetch on its prepared statement's generic
		// plan (genericFetch): it must be as cheap as the custom one.
		generic, plan := explainGeneric(t, ctx, pool, store.FetchSettings, fetch, fetchOf("emails", p, 100, inFlight, nil)...)
		t.Logf("partition %d: buffers per fetch on the generic plan: %d", p, generic)
		if strings.Contains(plan, "Seq Scan") || generic > 2*cost[p]+20 {
			t.Errorf("partition %d: the fetch's generic plan touches %d buffers, its custom plan %d:\n%s", p, generic, cost[p], plan)
		}
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

// The member's poll and fetch run as prepared statements on its pool's
// connections. Planned while the jobs table is empty and analysed so (a
// new deployment, or a queue truncated, before autovacuum sees it
// filled), PostgreSQL's plan cache can keep a
// generic plan that scans the table (free when empty): the poll and
// fetch, a probe per partition and priority level, would then each read
// the whole table for as long as the connection lives. Under the member's
// settings (store.MemberSettings, store.FetchSettings) the plan made on
// the empty table probes the index. The controls, the same statements
// planned without them, scan the table once it is filled.
func TestMemberPlansOnAnEmptyTable(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	for _, s := range []string{`ALTER TABLE leasehold.jobs SET (autovacuum_enabled = false)`, `ANALYZE leasehold.jobs`} {
		_, err := pool.Exec(ctx, s) // analysed empty, as autovacuum does a new or truncated table
		pgtest.Must(t, err)
	}
	st, err := store.For("")
	pgtest.Must(t, err)
	parts := []int32{0, 1, 2, 3, 4, 5, 6, 7}
	type planned struct {
		what, settings, sql string
		args                []any
		control             bool
		conn                *pgxpool.Conn
	}
	generic := `set_config('plan_cache_mode', 'force_generic_plan', true)`
	ps := []*planned{
		{what: "poll", settings: store.MemberSettings + ", " + generic, sql: st.Queue.Poll, args: []any{"emails", parts, int64(1_000_000)}},
		{what: "poll", settings: `SELECT set_config('jit', 'off', true), ` + generic, sql: st.Queue.Poll, args: []any{"emails", parts, int64(1_000_000)}, control: true},
		{what: "fetch", settings: store.FetchSettings, sql: st.Queue.Fetch, args: fetchOf("emails", 1, 100, nil, nil)},
		{what: "fetch", settings: `SELECT set_config('jit', 'off', true), ` + generic, sql: st.Queue.Fetch, args: fetchOf("emails", 1, 100, nil, nil), control: true},
	}
	for _, p := range ps { // planned on the empty table, as a member's first poll and fetch
		p.conn, err = pool.Acquire(ctx)
		pgtest.Must(t, err)
		defer p.conn.Release()
		_, err = p.conn.Exec(ctx, `PREPARE member_stmt AS `+p.sql)
		pgtest.Must(t, err)
		defer p.conn.Exec(ctx, `DEALLOCATE member_stmt`)
		tx, err := p.conn.Begin(ctx)
		pgtest.Must(t, err)
		_, err = tx.Exec(ctx, p.settings)
		pgtest.Must(t, err)
		_, err = tx.Exec(ctx, `EXECUTE member_stmt(`+params(len(p.args))+`)`, append([]any{pgx.QueryExecModeSimpleProtocol}, p.args...)...)
		pgtest.Must(t, err)
		pgtest.Must(t, tx.Rollback(ctx))
	}
	for _, s := range []string{
		`INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at, state, finished_at)
		 SELECT 'emails', i % 8, 'k' || i, 'step', '{}', 25, now(), 'completed', now() FROM generate_series(1, 20000) AS i`,
		`INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at)
		 SELECT 'emails', 1, '', 'step', '{}', 25, now() FROM generate_series(1, 50) AS i`,
	} {
		_, err := ps[0].conn.Exec(ctx, s) // the pool's connections are all taken
		pgtest.Must(t, err)
	}
	for _, p := range ps {
		tx, err := p.conn.Begin(ctx)
		pgtest.Must(t, err)
		_, err = tx.Exec(ctx, p.settings)
		pgtest.Must(t, err)
		buffers, plan := explain(t, ctx, simpleProtocol{tx}, `EXECUTE member_stmt(`+params(len(p.args))+`)`, p.args...)
		pgtest.Must(t, tx.Rollback(ctx))
		scans := strings.Contains(plan, `"Seq Scan"`)
		t.Logf("%s (control %v): %d buffers, sequential scan %v", p.what, p.control, buffers, scans)
		switch {
		case !p.control && (scans || buffers > 500):
			t.Errorf("the %s planned on an empty table touches %d buffers once it is filled:\n%s", p.what, buffers, plan)
		case p.control && !scans:
			t.Errorf("control: the %s planned on an empty table without the member's settings does not scan it once filled; "+
				"this test cannot tell:\n%s", p.what, plan)
		}
	}
}

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
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// preparedCost is the buffers one statement touches, prepared on conn
// under plan_cache_mode mode (force_custom_plan or force_generic_plan) and
// run with EXPLAIN (ANALYZE, BUFFERS) on args (SQL literals), and its plan.
func preparedCost(t *testing.T, ctx context.Context, conn *pgxpool.Conn, mode, stmt, types, args string) (int, string) {
	t.Helper()
	for _, s := range []string{`DEALLOCATE ALL`, `SET plan_cache_mode = ` + mode, `PREPARE pg(` + types + `) AS ` + stmt} {
		_, err := conn.Exec(ctx, s)
		pgtest.Must(t, err)
	}
	var plan string
	pgtest.Must(t, conn.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE pg`+args, pgx.QueryExecModeSimpleProtocol).Scan(&plan))
	var doc []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		} `json:"Plan"`
	}
	pgtest.Must(t, json.Unmarshal([]byte(plan), &doc))
	return doc[0].Plan.Hit + doc[0].Plan.Read, plan
}

// previousPage is the form of the failed and key paths before they read
// their index in chunks (the control): one LIMIT $8 over every match,
// which the planner may serve by a bitmap scan and a sort of all of them.
func previousPage(stmt, cond string) string {
	return `WITH w AS MATERIALIZED (
    SELECT j.id, j.group_name, j.state, j.kind, j.partition, j.batch_id, j.key, row_number() OVER (ORDER BY j.id DESC) AS n
    FROM leasehold.jobs AS j
    WHERE ` + cond + ` AND j.id < coalesce($5::bigint, 9223372036854775807)
    ORDER BY j.id DESC
    LIMIT $8)` + stmt[strings.Index(stmt, ",\nm AS MATERIALIZED"):]
}

// A full first page on the failed and key paths touches buffers in
// proportion to its Limit, not to its Scan, on an analysed table with
// 5,000 matches spread among 200,000 jobs, under custom and generic
// plans: 50 jobs of a Scan of 10,000 touch a few hundred buffers (the
// previous form, one LIMIT of Scan over every match, was planned as a
// bitmap scan and a sort of them all on the failed path: 6,907). The
// control runs that form with that plan (index scans disabled) and
// touches many times the bound, so the bound can see a page that reads
// every match.
func TestPageIndexPathsReadOnlyThePage(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	hot := partition.OfString("hot", 8)
	// Every 40th job discarded, every 40th (another one) a pending job of
	// key "hot": 5,000 each, fewer than the Scan (the planner then expects
	// to read every match), each on a heap page of its own, or nearly.
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at, state)
		SELECT 'emails', CASE WHEN i % 40 = 5 THEN $1 ELSE i % 8 END, CASE WHEN i % 40 = 5 THEN 'hot' ELSE 'k' || (i % 97) END,
		       'step', '{"pad":"`+strings.Repeat("x", 200)+`"}', 3, clock_timestamp(),
		       CASE i % 40 WHEN 0 THEN 'discarded' WHEN 5 THEN 'pending' WHEN 7 THEN 'cancelled' ELSE 'completed' END
		FROM generate_series(1, 200000) AS i`, hot)
	pgtest.Must(t, err)
	_, err = pool.Exec(ctx, `ANALYZE leasehold.jobs`)
	pgtest.Must(t, err)
	st, err := store.For("")
	pgtest.Must(t, err)
	conn, err := pool.Acquire(ctx)
	pgtest.Must(t, err)
	defer conn.Release()
	const types9 = `text, text, text, int[], bigint, int, bigint, int, text`
	paths := []struct {
		name, stmt, cond, types, args string
	}{
		{"failed", st.Insight.PageFailed, `j.group_name = $1 AND j.state IN ('discarded', 'cancelled') AND j.state = $2`,
			types9, `('emails', 'discarded', NULL, NULL, NULL, 50, NULL, 10000, NULL)`},
		{"key", st.Insight.PageKey, `j.group_name = $1 AND j.partition = $10 AND j.key = $9 AND j.key <> '' AND j.state = 'pending'`,
			types9 + `, int`, fmt.Sprintf(`('emails', 'pending', NULL, NULL, NULL, 50, NULL, 10000, 'hot', %d)`, hot)},
	}
	worst := 0 // the control's fewest buffers
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		for _, p := range paths {
			got, plan := preparedCost(t, ctx, conn, mode, p.stmt, p.types, p.args)
			// The control: the previous form as the planner served it on
			// such a table (a bitmap scan and a sort of every match).
			_, err := conn.Exec(ctx, `SET enable_indexscan = off`)
			pgtest.Must(t, err)
			control, _ := preparedCost(t, ctx, conn, mode, previousPage(p.stmt, p.cond), p.types, p.args)
			_, err = conn.Exec(ctx, `RESET enable_indexscan`)
			pgtest.Must(t, err)
			t.Logf("%s, %s: %d buffers for a page of 50 (control, the previous form: %d)", p.name, mode, got, control)
			if got > 400 {
				t.Errorf("%s, %s: a page of 50 touched %d buffers: it reads beyond the page\n%s", p.name, mode, got, plan)
			}
			if strings.Contains(plan, "Bitmap") || strings.Contains(plan, "Seq Scan") {
				t.Errorf("%s, %s: the plan reads the matches whole:\n%s", p.name, mode, plan)
			}
			if worst == 0 || control < worst {
				worst = control
			}
		}
	}
	if worst < 2500 {
		t.Errorf("control: the previous form read every match in %d buffers only; the bound of 400 cannot tell", worst)
	}
	// The pages themselves: full, Next the last job, few jobs scanned.
	for _, f := range []queue.Filter{
		{Group: "emails", State: queue.StateDiscarded, Limit: 50},
		{Group: "emails", State: queue.StatePending, Key: "hot", Limit: 50},
	} {
		pg, err := c.Page(ctx, f)
		pgtest.Must(t, err)
		if len(pg.Jobs) != 50 || pg.Next != pg.Jobs[49].ID || pg.Scanned != 51 {
			t.Errorf("Page(%+v): %d jobs, Next %d, %d scanned; want 50, the last job's id, 51 (the page and one more)",
				f, len(pg.Jobs), pg.Next, pg.Scanned)
		}
	}
}

// Pages of the failed path are full whatever the other failed state
// holds: 5 discarded jobs under 300 newer cancelled ones come in one page
// (the state is in the index's condition, not filtered after a walk of
// both states), and a last page that is full has no Next (nothing older
// is left), on every path.
func TestPageFailedSkewAndLastPage(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	for _, s := range []string{"discarded", "cancelled"} {
		n := map[string]int{"discarded": 5, "cancelled": 300}[s]
		_, err := pool.Exec(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at, state)
			SELECT 'emails', i % 8, 'hot', 'k', '{}', 3, clock_timestamp(), $2 FROM generate_series(1, $1) AS i`, n, s)
		pgtest.Must(t, err)
	}
	f := queue.Filter{Group: "emails", State: queue.StateDiscarded, Limit: 5, Scan: 100}
	pg, err := c.Page(ctx, f)
	pgtest.Must(t, err)
	if want := expected(t, ctx, pool, f); len(pg.Jobs) != 5 || len(want) != 5 || pg.Jobs[0].ID != want[0] || pg.Next != 0 {
		t.Errorf("5 discarded jobs under 300 cancelled: %d jobs, Next %d; want all 5 on the first page, no Next", len(pg.Jobs), pg.Next)
	}
	// A full last page: no Next, on the index path, the walk, the running
	// list.
	for _, f := range []queue.Filter{
		{Group: "emails", State: queue.StateCancelled, Limit: 100},
		{Group: "emails", State: queue.StateCancelled, Limit: 100, Scan: 100},
		{Group: "emails", Kind: "k", Limit: 100},
	} {
		var pages []queue.JobPage
		for {
			pg, err := c.Page(ctx, f)
			pgtest.Must(t, err)
			pages = append(pages, pg)
			if pg.Next == 0 || len(pages) > 10 {
				break
			}
			f.Before = pg.Next
		}
		last := pages[len(pages)-1]
		if len(last.Jobs) == 0 {
			t.Errorf("Page(%+v): an empty last page after %d pages: a full page's Next led nowhere", f, len(pages))
		}
	}
}

package periodic_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
)

// prunePerRow is the prune statement before it was bounded (the control):
// a max() subquery for every retained row of the group.
const prunePerRow = `
DELETE FROM leasehold.periodic_slots AS p
WHERE p.group_name = $1 AND p.slot < $2
  AND p.slot < (SELECT max(l.slot) FROM leasehold.periodic_slots AS l
                WHERE l.group_name = p.group_name AND l.schedule = p.schedule)`

// buffers runs EXPLAIN (ANALYZE, BUFFERS) of sql and returns the buffers
// it touched, and the plan.
func buffers(t *testing.T, ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (int, string) {
	t.Helper()
	var plan string
	pgtest.Must(t, pool.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+sql, args...).Scan(&plan))
	var doc []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		} `json:"Plan"`
	}
	pgtest.Must(t, json.Unmarshal([]byte(plan), &doc))
	return doc[0].Plan.Hit + doc[0].Plan.Read, plan
}

// The prune's cost does not grow with the rows retained: with every row
// within the retention (the usual case), it touches about as many buffers
// for a schedule with 50,000 rows as for one with 1,000, where the earlier
// statement (the control) walks them all. And it deletes the oldest rows,
// at most its batch per schedule, never a schedule's latest.
func TestPruneCostDoesNotGrowWithRetainedRows(t *testing.T) {
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	pgtest.DBOn(t, pool)
	st, err := store.For("")
	pgtest.Must(t, err)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sizes := map[string]int{"small": 1000, "big": 50000}
	for g, n := range sizes {
		for _, s := range []string{
			`INSERT INTO leasehold.periodic_schedules (group_name, name, spec, policy, since) VALUES ($1, 's', 'every 1s', 'run-once', $2)`,
			`INSERT INTO leasehold.periodic_slots (group_name, schedule, slot, token)
			 SELECT $1, 's', $2::timestamptz + i * interval '1 second', 1 FROM generate_series(1, $3::int) AS i`,
		} {
			args := []any{g, base}
			if strings.Contains(s, "generate_series") {
				args = append(args, n)
			}
			_, err := pool.Exec(ctx, s, args...)
			pgtest.Must(t, err)
		}
	}
	_, err = pool.Exec(ctx, `ANALYZE leasehold.periodic_slots`)
	pgtest.Must(t, err)
	cost, old := map[string]int{}, map[string]int{}
	for g := range sizes {
		var plan string
		cost[g], plan = buffers(t, ctx, pool, st.Periodic.Prune, g, base, 1000) // every row within the retention
		if strings.Contains(plan, "Seq Scan on periodic_slots") {
			t.Errorf("%s: the prune scans the table:\n%s", g, plan)
		}
		old[g], _ = buffers(t, ctx, pool, prunePerRow, g, base.Add(time.Duration(sizes[g]+1)*time.Second))
	}
	t.Logf("buffers per prune: 1,000 rows %d, 50,000 rows %d (control: %d and %d)", cost["small"], cost["big"], old["small"], old["big"])
	if cost["big"] > 2*cost["small"]+10 {
		t.Errorf("the prune touches %d buffers with 50,000 rows retained, %d with 1,000: it grows with them", cost["big"], cost["small"])
	}
	if old["big"] < 5*old["small"] {
		t.Errorf("control: the per-row prune touched %d and %d buffers; want it to grow, or this test cannot tell", old["big"], old["small"])
	}

	// The control deleted the rows of both groups but their latest: refill
	// "small" and prune it for real.
	_, err = pool.Exec(ctx, `INSERT INTO leasehold.periodic_slots (group_name, schedule, slot, token)
		SELECT 'small', 's', $1::timestamptz + i * interval '1 second', 1 FROM generate_series(1, 999) AS i`, base)
	pgtest.Must(t, err)
	far := base.Add(24 * time.Hour)
	for _, c := range []struct{ batch, deleted, left int }{{100, 100, 900}, {1000, 899, 1}, {1000, 0, 1}} {
		tag, err := pool.Exec(ctx, st.Periodic.Prune, "small", far, c.batch)
		pgtest.Must(t, err)
		var left int
		var first, last time.Time
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*), min(slot), max(slot) FROM leasehold.periodic_slots
			WHERE group_name = 'small'`).Scan(&left, &first, &last))
		if int(tag.RowsAffected()) != c.deleted || left != c.left || !last.Equal(base.Add(1000*time.Second)) ||
			!first.Equal(base.Add(time.Duration(1001-c.left)*time.Second)) {
			t.Errorf("prune of batch %d: deleted %d, left %d from %v to %v; want %d deleted, the latest %d left",
				c.batch, tag.RowsAffected(), left, first, last, c.deleted, c.left)
		}
	}
}

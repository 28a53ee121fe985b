package queue_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
)

// A retention round reads the old finished jobs of its partition, not
// every finished job kept: with 20,000 recent completed jobs and 10 old
// ones in a partition, the chunk statement deletes the 10 touching a few
// dozen buffers, under custom and generic plans. The control, the
// statement comparing finished_at with clock_timestamp() in place (a
// volatile function, which cannot bound an index scan), reads the 20,000
// (about 1,000 buffers).
func TestRetainReadsOnlyOldJobs(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at, state, finished_at)
		SELECT 'emails', 0, '', 'step', '{"pad":"`+strings.Repeat("x", 200)+`"}', 3, clock_timestamp(), 'completed',
		       CASE WHEN i <= 10 THEN clock_timestamp() - interval '2 days' ELSE clock_timestamp() END
		FROM generate_series(1, 20000) AS i`)
	pgtest.Must(t, err)
	_, err = pool.Exec(ctx, `ANALYZE leasehold.jobs`)
	pgtest.Must(t, err)
	st, err := store.For("")
	pgtest.Must(t, err)
	control := strings.Replace(st.Queue.Retain, `(SELECT clock_timestamp() - $3 * interval '1 microsecond')`,
		`clock_timestamp() - $3 * interval '1 microsecond'`, 1)
	if control == st.Queue.Retain {
		t.Fatal("the control's rewrite did not apply: the statement changed form")
	}
	conn, err := pool.Acquire(ctx)
	pgtest.Must(t, err)
	defer conn.Release()
	const types, args = `text, int[], bigint, int`, `('emails', '{0}', 86400000000, 1000)`
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		for _, c := range []struct {
			name, stmt string
			low        bool
		}{{"retain", st.Queue.Retain, true}, {"control", control, false}} {
			_, err := conn.Exec(ctx, `BEGIN`)
			pgtest.Must(t, err)
			got, plan := preparedCost(t, ctx, conn, mode, c.stmt, types, args)
			var left int
			pgtest.Must(t, conn.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE finished_at < clock_timestamp() - interval '1 day'`, pgx.QueryExecModeSimpleProtocol).Scan(&left))
			_, err = conn.Exec(ctx, `ROLLBACK`)
			pgtest.Must(t, err)
			t.Logf("%s, %s: %d buffers", c.name, mode, got)
			if left != 0 {
				t.Errorf("%s, %s: %d old jobs left; want the 10 deleted", c.name, mode, left)
			}
			if c.low && got > 200 {
				t.Errorf("%s, %s: %d buffers to delete 10 old jobs among 20,000 recent ones\n%s", c.name, mode, got, plan)
			}
			if !c.low && got < 800 {
				t.Errorf("control, %s: %d buffers only; the bound of 200 cannot tell", mode, got)
			}
		}
	}
}

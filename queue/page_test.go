package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// pageJob is a job as fillJobs inserts it.
type pageJob struct {
	group, key, kind, state string
	partition               int
	batch                   int64
}

// fillJobs inserts n jobs of groups "emails" and "other" (8 partitions
// each) with states, kinds, keys and batches drawn from a seeded source, in
// one COPY: keyed jobs in their key's partition, as Enqueue places them.
func fillJobs(t *testing.T, ctx context.Context, pool *pgxpool.Pool, n int, seed uint64) {
	t.Helper()
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('other', 8) ON CONFLICT DO NOTHING`)
	pgtest.Must(t, err)
	r := rand.New(rand.NewPCG(seed, 1))
	states := []string{"pending", "pending", "completed", "completed", "completed", "discarded", "cancelled"}
	rows := make([][]any, n)
	now := time.Now()
	for i := range rows {
		j := pageJob{group: "emails", kind: "email", state: states[r.IntN(len(states))]}
		switch x := r.IntN(20); {
		case x == 19:
			j.kind = "rare"
		case x >= 10:
			j.kind = "step"
		}
		if r.IntN(5) == 0 {
			j.group = "other"
		}
		if r.IntN(3) > 0 {
			j.key = fmt.Sprintf("k%d", r.IntN(6))
			j.partition = partition.OfString(j.key, 8)
		} else {
			j.partition = r.IntN(8)
		}
		if r.IntN(4) == 0 {
			j.batch = int64(1 + r.IntN(3))
		}
		var batch *int64
		if j.batch > 0 {
			batch = &j.batch
		}
		rows[i] = []any{j.group, int32(j.partition), j.key, j.kind, `{"n":` + fmt.Sprint(i) + `}`, j.state, int32(3), now, batch}
	}
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"leasehold", "jobs"},
		[]string{"group_name", "partition", "key", "kind", "args", "state", "max_attempts", "run_at", "batch_id"}, pgx.CopyFromRows(rows))
	pgtest.Must(t, err)
}

// expected reads the ids f selects, newest first, by a query of its own
// (not the statements under test).
func expected(t *testing.T, ctx context.Context, pool *pgxpool.Pool, f queue.Filter) []int64 {
	t.Helper()
	where := []string{"group_name = $1"}
	args := []any{f.Group}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.State != "" {
		add("state = $%d", string(f.State))
	}
	if f.Kind != "" {
		add("kind = $%d", f.Kind)
	}
	if f.Key != "" {
		add("key = $%d", f.Key)
	}
	if f.Partitions != nil {
		add("partition = ANY($%d)", f.Partitions)
	}
	if f.Batch != 0 {
		add("batch_id = $%d", f.Batch)
	}
	rows, err := pool.Query(ctx, `SELECT id FROM leasehold.jobs WHERE `+strings.Join(where, " AND ")+` ORDER BY id DESC`, args...)
	pgtest.Must(t, err)
	want, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	pgtest.Must(t, err)
	return want
}

// walk pages through f from the top and returns every job id found, in
// order, and the pages; it fails the test on a page breaking Page's
// bounds or a Next that does not go down.
func walk(t *testing.T, ctx context.Context, c *queue.Client, f queue.Filter) ([]int64, []queue.JobPage) {
	t.Helper()
	var got []int64
	var pages []queue.JobPage
	for {
		pg, err := c.Page(ctx, f)
		if err != nil {
			t.Fatalf("Page(%+v): %v", f, err)
		}
		pages = append(pages, pg)
		if len(pg.Jobs) > f.Limit || pg.Scanned > f.Scan {
			t.Fatalf("Page(%+v): %d jobs, %d scanned; want at most %d and %d", f, len(pg.Jobs), pg.Scanned, f.Limit, f.Scan)
		}
		for _, j := range pg.Jobs {
			got = append(got, j.ID)
		}
		if pg.Next == 0 {
			return got, pages
		}
		if f.Before != 0 && pg.Next >= f.Before {
			t.Fatalf("Page(%+v): Next %d does not go down", f, pg.Next)
		}
		f.Before = pg.Next
		if len(pages) > 10000 {
			t.Fatal("Page never ends")
		}
	}
}

// Walking every page of a filter, with a small Scan and Limit, finds
// exactly the jobs an independent query selects, newest first, none missed
// or repeated, whichever path serves the filter; the index paths fill
// every page but the last; the bounded walk returns short pages with a
// Next for a rare filter (the scan note's case) and still finds them all.
func TestPageWalksEveryJob(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	fillJobs(t, ctx, pool, 3000, 7)
	key := "k3"
	for _, tc := range []struct {
		f     queue.Filter
		full  bool // an index path: every page but the last is full
		short bool // some page is cut short by the scan bound (a rare filter)
	}{
		{f: queue.Filter{}},
		{f: queue.Filter{State: queue.StatePending}},
		{f: queue.Filter{State: queue.StateCompleted}},
		{f: queue.Filter{State: queue.StateDiscarded}, full: true},
		{f: queue.Filter{State: queue.StateCancelled}, full: true},
		{f: queue.Filter{State: queue.StateDiscarded, Kind: "step"}},
		{f: queue.Filter{Kind: "rare"}, short: true},
		{f: queue.Filter{Key: key}},
		{f: queue.Filter{Key: key, State: queue.StatePending}, full: true},
		{f: queue.Filter{Key: key, State: queue.StatePending, Kind: "step"}},
		{f: queue.Filter{Key: key, State: queue.StatePending, Partitions: []int{partition.OfString(key, 8)}}, full: true},
		{f: queue.Filter{Key: key, State: queue.StateCompleted}},
		{f: queue.Filter{Partitions: []int{2, 5}}},
		{f: queue.Filter{Batch: 2}},
		{f: queue.Filter{Batch: 3, State: queue.StateCancelled, Partitions: []int{0, 1, 2, 3}}},
		{f: queue.Filter{Kind: "nope"}, short: true},
	} {
		f := tc.f
		f.Group, f.Limit, f.Scan = "emails", 13, 97
		want := expected(t, ctx, pool, f)
		got, pages := walk(t, ctx, c, f)
		if !slices.Equal(got, want) {
			t.Errorf("Page(%+v) walked %d jobs; want %d (the same ids, newest first)\ngot  %v\nwant %v", f, len(got), len(want), got, want)
			continue
		}
		short := false
		for i, pg := range pages {
			last := i == len(pages)-1
			if tc.full && !last && len(pg.Jobs) != f.Limit {
				t.Errorf("Page(%+v): page %d holds %d jobs; an index path fills every page but the last", f, i, len(pg.Jobs))
			}
			short = short || !last && len(pg.Jobs) < f.Limit
		}
		if tc.short && !short {
			t.Errorf("Page(%+v): no page cut short by the scan bound; a rare filter's are", f)
		}
	}
	// A page's job is the job as JobInfo reads it (but where it waits and
	// runs, which Page leaves out, as List does).
	pg, err := c.Page(ctx, queue.Filter{Group: "emails", Limit: 1})
	pgtest.Must(t, err)
	j, err := c.JobInfo(ctx, pg.Jobs[0].ID)
	pgtest.Must(t, err)
	j.WaitingBehind, j.Running = 0, nil
	if fmt.Sprintf("%+v", pg.Jobs[0]) != fmt.Sprintf("%+v", j) {
		t.Errorf("Page's job %+v; JobInfo %+v", pg.Jobs[0], j)
	}
	// A filled page reads only up to its last job.
	if pg, err := c.Page(ctx, queue.Filter{Group: "emails", Limit: 5, Scan: 1000}); err != nil || len(pg.Jobs) != 5 || pg.Scanned >= 1000 || pg.Next != pg.Jobs[4].ID {
		t.Errorf("a full page: %+v, %v; want 5 jobs, fewer than 1000 scanned, Next the last job", pg, err)
	}
	// The running pseudo-state: none runs.
	if pg, err := c.Page(ctx, queue.Filter{Group: "emails", State: queue.StateRunning}); err != nil || len(pg.Jobs) != 0 || pg.Next != 0 {
		t.Errorf("running: %+v, %v; want no job", pg, err)
	}
}

// A key's pending jobs under a Partitions filter that leaves out the key's
// partition: none. Invalid filters and an unknown group are refused as
// List refuses them; Scan out of range too.
func TestPageBadFilter(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	fillJobs(t, ctx, pool, 200, 3)
	other := (partition.OfString("k1", 8) + 1) % 8
	if pg, err := c.Page(ctx, queue.Filter{Group: "emails", Key: "k1", State: queue.StatePending, Partitions: []int{other}}); err != nil || len(pg.Jobs) != 0 || pg.Next != 0 {
		t.Errorf("a key outside the partitions: %+v, %v; want no job", pg, err)
	}
	if _, err := c.Page(ctx, queue.Filter{Group: "nope"}); !errors.Is(err, queue.ErrUnknownGroup) {
		t.Errorf("unknown group: %v; want ErrUnknownGroup", err)
	}
	if _, err := c.Page(ctx, queue.Filter{Group: "nope", Key: "k", State: queue.StatePending}); !errors.Is(err, queue.ErrUnknownGroup) {
		t.Errorf("unknown group by key: %v; want ErrUnknownGroup", err)
	}
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('empty', 2)`)
	pgtest.Must(t, err)
	if pg, err := c.Page(ctx, queue.Filter{Group: "empty"}); err != nil || len(pg.Jobs) != 0 || pg.Next != 0 || pg.Jobs == nil {
		t.Errorf("a group without jobs: %+v, %v; want an empty page, no Next", pg, err)
	}
	for _, f := range []queue.Filter{
		{},
		{Group: "emails", State: "runnin"},
		{Group: "emails", Limit: -1},
		{Group: "emails", Limit: queue.MaxListLimit + 1},
		{Group: "emails", Partitions: []int{8}},
		{Group: "emails", Before: -5},
		{Group: "emails", Batch: -1},
		{Group: "emails", Scan: -1},
		{Group: "emails", Scan: queue.MaxListLimit*10 + 1},
	} {
		if _, err := c.Page(ctx, f); !errors.Is(err, queue.ErrInvalidFilter) {
			t.Errorf("Page(%+v) = %v; want ErrInvalidFilter", f, err)
		}
	}
}

// List and the running list filter by key.
func TestListKey(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	fillJobs(t, ctx, pool, 300, 5)
	f := queue.Filter{Group: "emails", Key: "k2", Limit: queue.MaxListLimit}
	jobs, err := c.List(ctx, f)
	pgtest.Must(t, err)
	if want := expected(t, ctx, pool, f); len(want) == 0 || !slices.Equal(ids(jobs), want) {
		t.Errorf("List(%+v) = %v; want %v", f, ids(jobs), want)
	}
	f.State = queue.StateRunning
	if jobs, err := c.List(ctx, f); err != nil || len(jobs) != 0 {
		t.Errorf("List(%+v) = %v, %v; want none", f, ids(jobs), err)
	}
}

// pageCost is the buffers one Page statement touches: form "walk",
// "failed" or "key", filtering kind (NULL: none), Limit limit, Scan scan.
func pageCost(t *testing.T, ctx context.Context, pool *pgxpool.Pool, form string, kind *string, limit, scan int) (int, string) {
	t.Helper()
	st, err := store.For("")
	pgtest.Must(t, err)
	var none *string
	var noParts []int32
	var noID *int64
	args := []any{"emails", none, kind, noParts, noID, limit, noID, scan, none}
	stmt := st.Insight.PageWalk
	switch form {
	case "failed":
		d := "discarded"
		stmt, args[1] = st.Insight.PageFailed, &d
	case "key":
		p, k := "pending", "hot"
		stmt, args[1], args[8] = st.Insight.PageKey, &p, &k
		args = append(args, int32(partition.OfString("hot", 8)))
	}
	return explain(t, ctx, pool, stmt, args...)
}

// Page's cost does not grow with the table, on a table never analysed:
// with 500 jobs read at most, a filter matching nothing touches about as
// many buffers with 21,000 jobs as with 1,000, on each path (the primary key; the failed jobs; a
// key's pending jobs). The control, List with the same filter (unbounded), touches many
// times more on the larger table.
func TestPageCostDoesNotGrowWithTable(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	insert := func(n int) {
		_, err := pool.Exec(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at, state)
			SELECT 'emails', $2, 'hot', 'step', '{}', 3, clock_timestamp(), CASE WHEN i % 2 = 0 THEN 'pending' ELSE 'discarded' END
			FROM generate_series(1, $1) AS i`, n, partition.OfString("hot", 8))
		pgtest.Must(t, err)
	}
	// Never analysed: the plans must not depend on statistics.
	_, err := pool.Exec(ctx, `ALTER TABLE leasehold.jobs SET (autovacuum_enabled = false)`)
	pgtest.Must(t, err)
	nope := "nope"
	index := map[string]string{"walk": `"Index Name": "jobs_pkey"`, "failed": `"Index Name": "jobs_failed"`, "key": `"Index Name": "jobs_key"`}
	measure := func(big bool) (map[string]int, int) {
		cost := map[string]int{}
		for _, form := range []string{"walk", "failed", "key"} {
			var plan string
			cost[form], plan = pageCost(t, ctx, pool, form, &nope, 50, 500)
			// (A small table is read whole: the planner's choice.)
			if big && (strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, index[form])) {
				t.Errorf("Page (%s) does not walk %s:\n%s", form, index[form], plan)
			}
		}
		if _, plan := pageCost(t, ctx, pool, "walk", &nope, 50, queue.DefaultScan); strings.Contains(plan, "Seq Scan") {
			t.Errorf("Page (walk, default Scan) plans a sequential scan:\n%s", plan)
		}
		st, err := store.For("")
		pgtest.Must(t, err)
		var none *string
		var noParts []int32
		var noID *int64
		list, _ := explain(t, ctx, pool, st.Queue.List, "emails", none, &nope, noParts, noID, 50, noID, none)
		return cost, list
	}
	insert(1000)
	small, smallList := measure(false)
	insert(20000)
	big, bigList := measure(true)
	t.Logf("buffers with 1,000 jobs: %v, List %d; with 21,000: %v, List %d", small, smallList, big, bigList)
	for form := range small {
		if big[form] > 2*small[form]+10 {
			t.Errorf("Page (%s) touches %d buffers with 21,000 jobs, %d with 1,000: it grows with the table", form, big[form], small[form])
		}
	}
	if bigList < 5*smallList {
		t.Errorf("control: List touches %d buffers with 21,000 jobs, %d with 1,000; the comparison cannot see growth", bigList, smallList)
	}
	// And the pages themselves: 500 read, none found, the walk goes on.
	pg, err := c.Page(ctx, queue.Filter{Group: "emails", Kind: "nope", Scan: 500})
	pgtest.Must(t, err)
	if len(pg.Jobs) != 0 || pg.Scanned != 500 || pg.Next == 0 {
		t.Errorf("a page of a filter matching nothing: %+v; want 500 scanned, none found, a Next", pg)
	}
}

package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/queue"
)

type prio struct {
	Key      string `json:"key"`
	Priority int    `json:"priority"`
	Seq      int    `json:"seq"`
}

func (prio) Kind() string { return "prio" }

// checkPriorityOrder checks a run history: keyless jobs ran in priority
// order (1 first), and each key's jobs in enqueue order (seq), whatever
// their priorities.
func checkPriorityOrder(runs []prio) error {
	last := 0
	seqs := map[string]int{}
	for i, r := range runs {
		if r.Key == "" {
			if r.Priority < last {
				return fmt.Errorf("run %d: a priority %d job ran after a priority %d one", i, r.Priority, last)
			}
			last = r.Priority
			continue
		}
		if s, ok := seqs[r.Key]; ok && r.Seq < s {
			return fmt.Errorf("run %d: job %d of key %q ran after job %d", i, r.Seq, r.Key, s)
		}
		seqs[r.Key] = r.Seq
	}
	return nil
}

// Jobs of one partition enqueued lowest priority first run highest
// priority first; a key's jobs run in enqueue order even when the later
// one has the higher priority. The control: the same jobs in enqueue
// order (the order before priorities) fail the check.
func TestPrioritiesOrderAPartition(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	_, err := c.EnsureGroup(ctx, "prio", 1)
	pgtest.Must(t, err)
	var jobs []queue.Job
	var enqueued []prio
	add := func(key string, priority int) {
		a := prio{Key: key, Priority: max(priority, 1), Seq: len(jobs)} // 0: the default, 1
		jobs = append(jobs, queue.Job{Group: "prio", Key: key, Args: a, Priority: priority})
		enqueued = append(enqueued, a)
	}
	add("k", 4) // the key's first job, lowest priority
	for p := 4; p >= 1; p-- {
		for range 3 {
			add("", p)
		}
	}
	add("k", 1) // the key's second, highest priority: still after the first
	add("", 0)  // the default: 1
	_, err = c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)

	var mu sync.Mutex
	var runs []prio
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[prio]) error {
		mu.Lock()
		defer mu.Unlock()
		runs = append(runs, w.Args)
		return nil
	})
	groupMember(t, pool, "prio", 1, queue.ProcessorConfig{Workers: ws, Concurrency: 1, PollInterval: 20 * time.Millisecond}, true)
	waitUntil(t, "every job ran", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) == len(jobs)
	})
	mu.Lock()
	got := slices.Clone(runs)
	mu.Unlock()
	if err := checkPriorityOrder(got); err != nil {
		t.Fatalf("%v\nruns: %+v", err, got)
	}
	if got[0].Priority != 1 || got[0].Key != "" {
		t.Fatalf("first run %+v; want a keyless job of priority 1", got[0])
	}
	if err := checkPriorityOrder(enqueued); err == nil {
		t.Fatal("control: the enqueue order passed the check")
	}
	waitUntil(t, "every job's completion is recorded", func() bool {
		var n int
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE group_name = 'prio' AND state = 'completed'`).Scan(&n))
		return n == len(jobs)
	})
}

func TestPriorityInput(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	_, c := setup(t)
	for _, p := range []int{-1, 5} {
		_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: email{}, Priority: p})
		var je *queue.JobError
		if !errors.Is(err, queue.ErrInvalidJob) || !errors.As(err, &je) || je.Field != "Priority" {
			t.Errorf("priority %d: %v; want a *JobError on Priority", p, err)
		}
	}
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: email{}, Priority: 3})
	pgtest.Must(t, err)
	j, err := c.JobInfo(ctx, res.ID)
	pgtest.Must(t, err)
	if j.Priority != 3 || !j.DefaultMaxAttempts {
		t.Errorf("JobInfo: priority %d, default max attempts %v; want 3, true", j.Priority, j.DefaultMaxAttempts)
	}
	res, err = c.Enqueue(ctx, queue.Job{Group: "emails", Args: email{}, MaxAttempts: 3, UniqueKey: "u"})
	pgtest.Must(t, err)
	j, err = c.JobInfo(ctx, res.ID)
	pgtest.Must(t, err)
	if j.Priority != 1 || j.DefaultMaxAttempts {
		t.Errorf("JobInfo: priority %d, default max attempts %v; want 1, false", j.Priority, j.DefaultMaxAttempts)
	}
}

// The fetch's cost does not grow with a low-priority backlog or a future
// one: with 50 due jobs of priority 1, it takes them and the first 50 of a
// priority-4 backlog, touching about as many buffers with 20,000 future
// priority-1 jobs and 20,000 due priority-4 ones as with 1,000 of each.
// The control, one scan of jobs_due in (priority, run_at, id) order,
// walks the future jobs of priority 1 before it reaches priority 4.
func TestFetchCostDoesNotGrowWithPriorityBacklog(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	_, err := pool.Exec(ctx, `ALTER TABLE leasehold.jobs SET (autovacuum_enabled = false)`)
	pgtest.Must(t, err)
	backlogs := map[int]int{1: 1000, 2: 20000}
	for p, n := range backlogs {
		for _, q := range []string{
			`SELECT 'emails', $1::int, '', 'step', '{}'::jsonb, 25, clock_timestamp() - interval '1 hour' + i * interval '1 microsecond', 1::smallint FROM generate_series(1, 50) AS i WHERE $2::int > 0`,
			`SELECT 'emails', $1::int, '', 'step', '{}'::jsonb, 25, clock_timestamp() + interval '1 hour' + i * interval '1 microsecond', 1::smallint FROM generate_series(1, $2::int) AS i`,
			`SELECT 'emails', $1::int, '', 'step', '{}'::jsonb, 25, clock_timestamp() - interval '2 hour' + i * interval '1 microsecond', 4::smallint FROM generate_series(1, $2::int) AS i`,
		} {
			_, err := pool.Exec(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at, priority) `+q, p, n)
			pgtest.Must(t, err)
		}
	}
	st, err := store.For("")
	pgtest.Must(t, err)
	naive := `SELECT j.id FROM leasehold.jobs AS j
		WHERE j.group_name = $1 AND j.partition = $2 AND j.state = 'pending' AND j.run_at <= clock_timestamp()
		ORDER BY j.priority, j.run_at, j.id LIMIT $3`
	cost, naiveCost := map[int]int{}, map[int]int{}
	for p := range backlogs {
		cost[p], _ = explainGeneric(t, ctx, pool, store.FetchSettings, st.Queue.Fetch, fetchOf("emails", p, 100, nil, nil)...) // as the member runs it
		naiveCost[p], _ = explain(t, ctx, pool, naive, "emails", p, 100)
		rows, err := pool.Query(ctx, `SELECT f.kind IS NOT NULL, j.priority FROM (`+st.Queue.Fetch+`) AS f JOIN leasehold.jobs AS j USING (id)`,
			fetchOf("emails", p, 100, nil, nil)...)
		pgtest.Must(t, err)
		var prios []int16
		for rows.Next() {
			var job bool
			var pr int16
			pgtest.Must(t, rows.Scan(&job, &pr))
			prios = append(prios, pr)
		}
		pgtest.Must(t, rows.Err())
		if len(prios) != 100 || prios[0] != 1 || prios[49] != 1 || prios[50] != 4 {
			t.Errorf("partition %d: the fetch returned priorities %v; want 50 of 1, then 50 of 4", p, prios)
		}
	}
	t.Logf("buffers per fetch: 1,000 %d, 20,000: %d (control: %d and %d)", cost[1], cost[2], naiveCost[1], naiveCost[2])
	if cost[2] > 2*cost[1]+20 {
		t.Errorf("a fetch touches %d buffers with 20,000-job backlogs, %d with 1,000: it grows with the backlog", cost[2], cost[1])
	}
	if naiveCost[2] < 5*naiveCost[1] {
		t.Errorf("control: the naive fetch touched %d and %d buffers; want it to grow with the backlog, or this test cannot tell",
			naiveCost[2], naiveCost[1])
	}
}

// The priority's CHECK, added NOT VALID by migration 0010 so that it does
// not scan the table, is enforced on new and updated rows.
func TestPriorityCheckEnforced(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at, priority)
		VALUES ('emails', 0, '', 'step', '{}', 25, now(), 5)`)
	if err == nil || !strings.Contains(err.Error(), "jobs_priority_check") {
		t.Fatalf("inserting priority 5: %v; want the check refusing it", err)
	}
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: step{}})
	pgtest.Must(t, err)
	_, err = pool.Exec(ctx, `UPDATE leasehold.jobs SET priority = 0 WHERE id = $1`, res.ID)
	if err == nil || !strings.Contains(err.Error(), "jobs_priority_check") {
		t.Fatalf("updating to priority 0: %v; want the check refusing it", err)
	}
}

// With a kind paused, the fetch's cost does not grow with that kind's due
// backlog: a partition with 20,000 due jobs of the paused kind ahead of
// 100 of another kind touches about as many buffers per fetch as one with
// 1,000, and walking on from the positions the fetch returns reaches the
// other kind's jobs, never returning a paused one. The control, the fetch
// without the cap (filtering the paused kind inside each level's probe),
// grows with the backlog.
func TestFetchCostDoesNotGrowWithPausedBacklog(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	_, err := pool.Exec(ctx, `ALTER TABLE leasehold.jobs SET (autovacuum_enabled = false)`)
	pgtest.Must(t, err)
	backlogs := map[int]int{1: 1000, 2: 20000}
	for p, n := range backlogs {
		_, err := pool.Exec(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at)
			SELECT 'emails', $1, '', 'slow', '{}', 25, clock_timestamp() - interval '2 hour' + i * interval '1 microsecond'
			FROM generate_series(1, $2) AS i`, p, n)
		pgtest.Must(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at)
			SELECT 'emails', $1, '', 'step', '{}', 25, clock_timestamp() - interval '1 hour' + i * interval '1 microsecond'
			FROM generate_series(1, 100) AS i`, p)
		pgtest.Must(t, err)
	}
	st, err := store.For("")
	pgtest.Must(t, err)
	paused := []string{"slow"}
	const n, walk = 100, 8 * 100
	start := make([]*time.Time, 4)
	startID := make([]*int64, 4)
	cost, control := map[int]int{}, map[int]int{}
	for p, backlog := range backlogs {
		var plan string
		cost[p], plan = explainGeneric(t, ctx, pool, store.FetchSettings, st.Queue.FetchWalk, append(fetchOf("emails", p, n, nil, paused), walk, start, startID, []string{}, []string{}, []int32{})...)
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("the paused fetch plans a sequential scan:\n%s", plan)
		}
		control[p], _ = explain(t, ctx, pool, st.Queue.Fetch, fetchOf("emails", p, n, nil, paused)...)
		// Walk on until the other kind's 100 jobs are fetched.
		at, ids := make([]*time.Time, 4), make([]*int64, 4)
		got, fetches := 0, 0
		for got < 100 {
			fetches++
			if fetches > backlog/walk+5 {
				t.Fatalf("partition %d: %d fetches found %d of the 100 runnable jobs", p, fetches, got)
			}
			rows, err := pool.Query(ctx, st.Queue.FetchWalk, append(fetchOf("emails", p, n, nil, paused), walk, at, ids, []string{}, []string{}, []int32{})...)
			pgtest.Must(t, err)
			var seen []int64
			positions := 0
			for rows.Next() {
				var id int64
				var kind string
				var holds bool
				var wait *int64
				var runAt time.Time
				var prio int16
				pgtest.Must(t, rows.Scan(&id, nil, &kind, nil, nil, nil, nil, &holds, &wait, nil, &runAt, nil, nil, &prio, nil, nil, nil, nil))
				switch {
				case kind == "" && wait == nil:
					positions++
					switch {
					case holds:
						at[prio-1], ids[prio-1] = nil, nil
					case id == 0: // the position stays
					default:
						a, i := runAt, id
						at[prio-1], ids[prio-1] = &a, &i
					}
				case kind == "slow":
					t.Fatalf("partition %d: the fetch returned job %d of the paused kind", p, id)
				case kind != "":
					seen = append(seen, id)
				}
			}
			pgtest.Must(t, rows.Err())
			if positions != 4 {
				// One per priority level, always: the bench tells the
				// statement's jobs from its rows by it.
				t.Fatalf("partition %d: the walk returned %d position rows; want 4", p, positions)
			}
			got += len(seen)
			if len(seen) > 0 {
				// Completed, as the owner would.
				_, err := pool.Exec(ctx, `UPDATE leasehold.jobs SET state = 'completed' WHERE id = ANY($1)`, seen)
				pgtest.Must(t, err)
			}
		}
		t.Logf("partition %d (%d paused jobs): %d fetches to reach the runnable ones", p, backlog, fetches)
	}
	t.Logf("buffers per fetch: 1,000 paused %d, 20,000: %d (control, the uncapped fetch: %d and %d)",
		cost[1], cost[2], control[1], control[2])
	if cost[2] > 2*cost[1]+20 {
		t.Errorf("a fetch touches %d buffers with 20,000 paused jobs, %d with 1,000: it grows with the backlog", cost[2], cost[1])
	}
	// (Buffers count pages, not rows: the uncapped walk of 20,000 rows
	// shows as about 400 more pages, not 20 times as many.)
	if control[2] < control[1]+200 {
		t.Errorf("control: the uncapped fetch touched %d and %d buffers; want it to grow with the backlog, or this test cannot tell",
			control[2], control[1])
	}
}

// fetchOf is the arguments of the fetch statement (store's queueFetch) for
// partition part of group alone: up to n jobs, past the held ids, leaving
// out the paused kinds.
func fetchOf(group string, part, n int, held []int64, paused []string) []any {
	in := make([]int32, len(held))
	for i := range in {
		in[i] = int32(part)
	}
	if held == nil {
		held = []int64{}
	}
	if paused == nil {
		paused = []string{}
	}
	return []any{group, []int32{int32(part)}, []int32{int32(n)}, held, in, []string{}, []int32{}, paused}
}

// The walk returns one position row per priority level, always, also for a
// level whose first walked row the window could not take (a full window of
// a higher level's jobs): id 0, the position stays. The bench tells the
// statement's jobs from its rows by it.
func TestFetchWalkReturnsAPositionPerLevel(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at, priority)
		SELECT 'emails', 1, '', 'step', '{}', 25, clock_timestamp() - interval '1 hour', p FROM generate_series(1, 2) AS p`)
	pgtest.Must(t, err)
	st, err := store.For("")
	pgtest.Must(t, err)
	rows, err := pool.Query(ctx, st.Queue.FetchWalk, append(fetchOf("emails", 1, 1, nil, []string{"slow"}), 8,
		make([]*time.Time, 4), make([]*int64, 4), []string{}, []string{}, []int32{})...)
	pgtest.Must(t, err)
	levels := map[int16]int64{}
	jobs := 0
	for rows.Next() {
		var id int64
		var kind string
		var wait *int64
		var prio int16
		pgtest.Must(t, rows.Scan(&id, nil, &kind, nil, nil, nil, nil, nil, &wait, nil, nil, nil, nil, &prio, nil, nil, nil, nil))
		if kind == "" && wait == nil {
			levels[prio]++
		} else {
			jobs++
		}
	}
	pgtest.Must(t, rows.Err())
	if len(levels) != 4 || levels[1] != 1 || levels[2] != 1 || levels[3] != 1 || levels[4] != 1 || jobs != 1 {
		t.Fatalf("position rows per level %v and %d jobs; want one row per level 1 to 4 and the one job the window takes", levels, jobs)
	}
}

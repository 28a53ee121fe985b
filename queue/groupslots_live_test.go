package queue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// No worker starves: 3 workers of a group of 6 partitions (each some) run
// the jobs of a kind limited to 1 at once, enqueued in every partition
// (1200 jobs of 10ms: about 5s of the slot's time per worker). Every job
// completes within 30s, and no worker waits more than 5s between two of
// its runs (nor for its first): the slot goes round by turns (of 1s
// here). The negative control, the turns removed (the old assignment's
// defect, in time: a worker holds the slot as long as it has jobs
// waiting), makes a worker wait for the others' whole backlogs, more than
// 5s.
func TestGroupSlotsNoWorkerStarves(t *testing.T) {
	t.Parallel()
	for _, turns := range []bool{true, false} {
		t.Run(fmt.Sprint("turns=", turns), func(t *testing.T) {
			t.Parallel()
			most, who := starvation(t, turns)
			const bound = 5 * time.Second
			switch {
			case turns && most > bound:
				t.Errorf("%s waited %v for a run of the limited kind; want at most %v", who, most, bound)
			case !turns && most <= bound:
				t.Errorf("the control (no turns) waited at most %v: the check cannot fail", most)
			default:
				t.Logf("turns %v: the longest wait %v (%s)", turns, most, who)
			}
		})
	}
}

// starvation runs the test's workers and returns the longest a worker
// waited, from the enqueue to its first run or between two of its runs,
// and which worker.
func starvation(t *testing.T, turns bool) (most time.Duration, who string) {
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	var mu sync.Mutex
	starts := map[string][]time.Time{}
	var members []*partition.Member
	for i := range 3 {
		id := fmt.Sprintf("w%d", i)
		ws := NewWorkers()
		Handle(ws, func(ctx context.Context, w *Work[slotJob]) error {
			mu.Lock()
			starts[id] = append(starts[id], time.Now())
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			return nil
		}, WithPolicy(Policy{GroupConcurrency: 1}))
		db := pgtest.DBOn(t, pgtest.PoolURL(t, url))
		p, err := NewProcessor(db, ProcessorConfig{Workers: ws})
		pgtest.Must(t, err)
		p.groupSlots.turn = time.Second
		if !turns {
			p.groupSlots.turn = time.Hour
		}
		lctx, stop := context.WithCancel(ctx)
		go p.Listen(lctx)
		m, err := partition.New(db, partition.Config{Group: "g", Partitions: 6, ID: id, Run: p.Run,
			PollInterval: 100 * time.Millisecond, Lease: lease.Config{TTL: time.Second}})
		pgtest.Must(t, err)
		pgtest.Must(t, m.Start(ctx))
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			m.Stop(sctx)
			stop()
		})
		members = append(members, m)
	}
	waitSlots(t, 20*time.Second, "the partitions spread", func() bool {
		total := 0
		for _, m := range members {
			n := len(m.Owned())
			if n == 0 {
				return false
			}
			total += n
		}
		return total == 6
	})
	pool := pgtest.PoolURL(t, url)
	c, err := New(pgtest.DBOn(t, pool), Config{})
	pgtest.Must(t, err)
	jobs := make([]Job, 1200)
	for i := range jobs {
		jobs[i] = Job{Group: "g", Key: fmt.Sprint("k", i), Args: slotJob{}}
	}
	t0 := time.Now()
	_, err = c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	for done := 0; done < len(jobs); time.Sleep(50 * time.Millisecond) {
		if time.Since(t0) > 30*time.Second {
			t.Fatalf("%d of %d jobs completed within 30s", done, len(jobs))
		}
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE state = 'completed'`).Scan(&done))
	}
	t.Logf("all %d jobs completed in %v", len(jobs), time.Since(t0))
	mu.Lock()
	defer mu.Unlock()
	for id, ss := range starts {
		slices.SortFunc(ss, func(a, b time.Time) int { return a.Compare(b) })
		prev := t0
		for _, s := range ss {
			if d := s.Sub(prev); d > most {
				most, who = d, id
			}
			prev = s
		}
		t.Logf("%s ran %d jobs", id, len(ss))
	}
	if len(starts) != 3 {
		t.Fatalf("runs by %d workers; want 3", len(starts))
	}
	return most, who
}

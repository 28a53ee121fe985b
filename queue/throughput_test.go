package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// fate is what a throughput test job's handler does.
type fate struct {
	Do string `json:"do"` // "ok", "fail" (every attempt), "once" (fails its first), "cancel", "snooze"
}

func (fate) Kind() string { return "fate" }

// sumThroughput adds up minutes of counts.
func sumThroughput(ts []queue.Throughput) queue.Throughput {
	var s queue.Throughput
	for _, t := range ts {
		s.Completed += t.Completed
		s.Retried += t.Retried
		s.Discarded += t.Discarded
		s.Cancelled += t.Cancelled
		s.Snoozed += t.Snoozed
		s.Fenced += t.Fenced
	}
	return s
}

// observed counts the outcomes the OnJob hook saw, as a Throughput.
type observed struct {
	mu sync.Mutex
	t  queue.Throughput
}

func (o *observed) hook(e queue.JobEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch e.Outcome {
	case queue.OutcomeCompleted:
		o.t.Completed++
	case queue.OutcomeRetried:
		o.t.Retried++
	case queue.OutcomeDiscarded:
		o.t.Discarded++
	case queue.OutcomeCancelled:
		o.t.Cancelled++
	case queue.OutcomeSnoozed:
		o.t.Snoozed++
	case queue.OutcomeFenced:
		o.t.Fenced++
	}
}

// sameCounts reports how got differs from want ("" when it does not).
func sameCounts(got, want queue.Throughput) string {
	got.Minute, want.Minute = time.Time{}, time.Time{}
	if got == want {
		return ""
	}
	return fmt.Sprintf("recorded %+v; the hooks saw %+v", got, want)
}

// The outcome counts a worker's Processor records add up, once it stopped
// (its last counts written at the stop), to exactly what its OnJob hook
// observed, outcome by outcome, under the worker's member id; the minutes
// come oldest first, one per minute, ending with the current one. A
// doctored expectation is caught, and a member whose Processor ran no job
// writes no count. The negative control of the mechanism: a Processor
// that writes only at its stop has written nothing before it (the sums
// differ), and everything after.
func TestThroughputCountsWhatTheHooksSaw(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ws := queue.NewWorkers()
	var mu sync.Mutex
	tried := map[int64]bool{}
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[fate]) error {
		switch w.Args.Do {
		case "fail":
			return errors.New("always fails")
		case "once":
			mu.Lock()
			defer mu.Unlock()
			if !tried[w.ID] {
				tried[w.ID] = true
				return errors.New("fails once")
			}
		case "cancel":
			return queue.Cancel(errors.New("not wanted"))
		case "snooze":
			mu.Lock()
			defer mu.Unlock()
			if !tried[w.ID] {
				tried[w.ID] = true
				return queue.Snooze(time.Millisecond)
			}
		}
		return nil
	})
	var obs observed
	p, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		MinRetry: time.Millisecond, MaxRetry: 5 * time.Millisecond, Hooks: queue.Hooks{OnJob: obs.hook}})
	pgtest.Must(t, err)
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "emails", Partitions: 8, ID: "worker-7", Run: p.Run,
		PollInterval: 100 * time.Millisecond, Lease: lease.Config{TTL: time.Second}})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(ctx))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			m.Stop(context.Background())
		}
	})
	var jobs []queue.Job
	for do, n := range map[string]int{"ok": 30, "fail": 4, "once": 5, "cancel": 3, "snooze": 2} {
		for range n {
			jobs = append(jobs, queue.Job{Group: "emails", Args: fate{Do: do}, MaxAttempts: 2})
		}
	}
	_, err = c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	pgtest.WaitNoPendingJobs(t, pool, 30*time.Second)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pgtest.Must(t, m.Stop(sctx))
	stopped = true

	obs.mu.Lock()
	want := obs.t
	obs.mu.Unlock()
	// Every run: 30 + 5 completed after their retry + 2 after their snooze;
	// 4 failed twice (a retry, then discarded), 5 once.
	if want.Completed != 37 || want.Retried != 9 || want.Discarded != 4 || want.Cancelled != 3 || want.Snoozed != 2 {
		t.Fatalf("the hooks saw %+v", want)
	}
	var before, after time.Time // the current minute, read around Throughput
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT date_trunc('minute', clock_timestamp())`).Scan(&before))
	ts, err := c.Throughput(ctx, "emails", 0)
	pgtest.Must(t, err)
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT date_trunc('minute', clock_timestamp())`).Scan(&after))
	if len(ts) != 15 {
		t.Fatalf("%d minutes; want the default 15", len(ts))
	}
	for i := 1; i < len(ts); i++ {
		if !ts[i].Minute.Equal(ts[i-1].Minute.Add(time.Minute)) {
			t.Fatalf("minutes not consecutive, oldest first: %v then %v", ts[i-1].Minute, ts[i].Minute)
		}
	}
	if last := ts[len(ts)-1].Minute; !last.Equal(before) && !last.Equal(after) {
		t.Errorf("last minute %v; want the current one, %v", last, after)
	}
	if d := sameCounts(sumThroughput(ts), want); d != "" {
		t.Error(d)
	}
	if got := sumThroughput(ts).Failed(); got != want.Retried+want.Discarded {
		t.Errorf("Failed() = %d", got)
	}
	// The negative control: one run more or less is seen.
	doctored := want
	doctored.Completed++
	if sameCounts(sumThroughput(ts), doctored) == "" {
		t.Error("control: a doctored expectation matches")
	}
	var workers []string
	rows, err := pool.Query(ctx, `SELECT DISTINCT worker FROM leasehold.job_stats`)
	pgtest.Must(t, err)
	for rows.Next() {
		var w string
		pgtest.Must(t, rows.Scan(&w))
		workers = append(workers, w)
	}
	pgtest.Must(t, rows.Err())
	if fmt.Sprint(workers) != "[worker-7]" {
		t.Errorf("counts written by %v; want the member worker-7", workers)
	}

	// An idle member writes no count: its group's minutes are all zero.
	_, err = pool.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('idle', 2)`)
	pgtest.Must(t, err)
	ip, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		PublishInterval: 10 * time.Millisecond})
	pgtest.Must(t, err)
	im, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "idle", Partitions: 2, Run: ip.Run,
		PollInterval: 100 * time.Millisecond, Lease: lease.Config{TTL: time.Second}})
	pgtest.Must(t, err)
	pgtest.Must(t, im.Start(ctx))
	waitOwned(t, im, 2)
	pgtest.Must(t, im.Stop(sctx))
	var n int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.job_stats WHERE group_name = 'idle'`).Scan(&n))
	if n != 0 {
		t.Errorf("an idle Processor wrote %d rows of counts", n)
	}
	ts, err = c.Throughput(ctx, "idle", 3)
	pgtest.Must(t, err)
	if len(ts) != 3 || sumThroughput(ts) != (queue.Throughput{}) {
		t.Errorf("idle group: %+v; want 3 empty minutes", ts)
	}

	// The final write is what makes the counts complete (the negative
	// control of the mechanism): a Processor that never writes
	// periodically (PublishInterval an hour) has written nothing while it
	// runs, its jobs done, and everything once it stopped.
	_, err = pool.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('ctl', 2)`)
	pgtest.Must(t, err)
	var cobs observed
	cp, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		PublishInterval: time.Hour, Hooks: queue.Hooks{OnJob: cobs.hook}})
	pgtest.Must(t, err)
	// A long TTL: a lease lost to a stalled (loaded) machine ends the
	// member's loop, which writes the counts early, and the control fails.
	cm, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "ctl", Partitions: 2, Run: cp.Run,
		PollInterval: 100 * time.Millisecond, Lease: lease.Config{TTL: 10 * time.Second}})
	pgtest.Must(t, err)
	pgtest.Must(t, cm.Start(ctx))
	cstopped := false
	t.Cleanup(func() {
		if !cstopped {
			cm.Stop(context.Background())
		}
	})
	jobs = jobs[:0]
	for range 6 {
		jobs = append(jobs, queue.Job{Group: "ctl", Args: fate{Do: "ok"}})
	}
	_, err = c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	pgtest.WaitNoPendingJobs(t, pool, 30*time.Second)
	for { // the hooks run after the outcomes are written
		cobs.mu.Lock()
		n := cobs.t.Completed
		cobs.mu.Unlock()
		if n == 6 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the hooks saw %d of 6 completions", n)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cobs.mu.Lock()
	cwant := cobs.t
	cobs.mu.Unlock()
	ts, err = c.Throughput(ctx, "ctl", 2)
	pgtest.Must(t, err)
	if sameCounts(sumThroughput(ts), cwant) == "" {
		t.Errorf("control: before the final write the counts already match the hooks (%+v): the test cannot tell it wrote them", cwant)
	}
	pgtest.Must(t, cm.Stop(sctx))
	cstopped = true
	ts, err = c.Throughput(ctx, "ctl", 2)
	pgtest.Must(t, err)
	if d := sameCounts(sumThroughput(ts), cwant); d != "" {
		t.Errorf("after the final write: %s", d)
	}

	if _, err := c.Throughput(ctx, "nope", 0); !errors.Is(err, queue.ErrUnknownGroup) {
		t.Errorf("unknown group: %v; want ErrUnknownGroup", err)
	}
	for _, n := range []int{-1, 61} {
		if _, err := c.Throughput(ctx, "emails", n); !errors.Is(err, queue.ErrInvalidFilter) {
			t.Errorf("minutes %d: %v; want ErrInvalidFilter", n, err)
		}
	}
}

package queue_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// A busy partition (a job running throughout, and a stream of jobs
// completing) still has its old finished jobs deleted, on the retention
// schedule, in statements of at most queue.RetainChunk rows each (counted
// by a statement-level trigger). Recent finished jobs and pending jobs are
// kept (the control).
func TestRetentionDeletesInChunksWhileBusy(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	_, err := pool.Exec(ctx, `
		CREATE TABLE deletes (n bigint NOT NULL);
		CREATE FUNCTION count_deletes() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO deletes SELECT count(*) FROM old; RETURN NULL; END $$;
		CREATE TRIGGER count_deletes AFTER DELETE ON leasehold.jobs
		REFERENCING OLD TABLE AS old FOR EACH STATEMENT EXECUTE FUNCTION count_deletes();`)
	pgtest.Must(t, err)
	keys := keysIn(2, 2, "busy")
	blocked, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	var blockedOnce atomic.Bool
	var completed atomic.Int64
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		if w.Args.Name == "block" {
			if blockedOnce.CompareAndSwap(false, true) {
				close(blocked)
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}
		completed.Add(1)
		return nil
	})
	_, err = c.Enqueue(ctx, queue.Job{Group: "emails", Key: keys[0], Args: step{"block"}})
	pgtest.Must(t, err)
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		JobTimeout: -1, RetentionInterval: 100 * time.Millisecond}, true)
	<-blocked
	// A stream of jobs in the same partition, completing throughout.
	sctx, stopStream := context.WithCancel(ctx)
	streamed := make(chan error, 1)
	go func() {
		for sctx.Err() == nil {
			if _, err := c.Enqueue(sctx, queue.Job{Group: "emails", Key: keys[1], Args: step{"x"}}); err != nil && sctx.Err() == nil {
				streamed <- err
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		streamed <- nil
	}()
	// The stream runs before the old jobs arrive: under CI's load the
	// retention once finished before its first job completed.
	waitCompleted := func(than int64) {
		for start := time.Now(); completed.Load() <= than; time.Sleep(10 * time.Millisecond) {
			if time.Since(start) > 20*time.Second {
				t.Fatalf("no streamed job completed in 20s (%d so far)", completed.Load())
			}
		}
	}
	waitCompleted(0)
	// Old finished jobs, and recent ones, added while the partition is busy.
	const old = 2*queue.RetainChunk + 500
	_, err = pool.Exec(ctx, `
		INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at, state, finished_at)
		SELECT 'emails', 2, '', 'step', '{}', 1, now(), s, clock_timestamp() - interval '2 days' * g
		FROM generate_series(1, $1) AS g, (VALUES ('completed'), ('discarded'), ('cancelled')) AS v(s)
		WHERE g % 3 = 0 OR s = 'completed' LIMIT $1`, old)
	pgtest.Must(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at, state, finished_at)
		SELECT 'emails', 2, '', 'step', '{}', 1, now(), 'completed', clock_timestamp() FROM generate_series(1, 10)`)
	pgtest.Must(t, err)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		var left int
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs
			WHERE state <> 'pending' AND finished_at < clock_timestamp() - interval '1 day'`).Scan(&left))
		if left == 0 {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("%d old finished jobs left after 20s of a busy partition (retention every 100ms)", left)
		}
	}
	waitCompleted(completed.Load()) // the partition still runs jobs after the retention
	stopStream()
	pgtest.Must(t, <-streamed)
	var statements, deleted, largest int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(n), 0), coalesce(max(n), 0) FROM deletes WHERE n > 0`).Scan(&statements, &deleted, &largest))
	if deleted != old || largest > queue.RetainChunk || statements < old/queue.RetainChunk+1 {
		t.Fatalf("%d rows deleted by %d statements, the largest %d; want %d in statements of at most %d", deleted, statements, largest, old, queue.RetainChunk)
	}
	var recent, pending int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state <> 'pending'), count(*) FILTER (WHERE state = 'pending' AND args->>'name' = 'block')
		FROM leasehold.jobs`).Scan(&recent, &pending))
	if recent < 10 || pending != 1 {
		t.Fatalf("%d recent finished jobs, blocking job pending: %d; want ≥10 kept, the blocker pending", recent, pending)
	}
}

// A partition granted after the member's loop started has its old
// finished jobs deleted at the next poll, not a RetentionInterval later:
// one Processor serves group "emails" first (its first round deletes that
// group's old job), then group "later"; with an interval of an hour,
// "later"'s old job goes within seconds. Its recent finished job is kept
// (the control).
func TestRetentionCoversPartitionsGrantedLater(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('later', 4);
		INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at, state, finished_at) VALUES
		('emails', 1, '', 'step', '{}', 1, now(), 'completed', clock_timestamp() - interval '2 days'),
		('later', 2, '', 'step', '{}', 1, now(), 'completed', clock_timestamp() - interval '2 days'),
		('later', 2, '', 'step', '{}', 1, now(), 'completed', clock_timestamp())`)
	pgtest.Must(t, err)
	p, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: queue.NewWorkers(),
		PollInterval: 20 * time.Millisecond, RetentionInterval: time.Hour})
	pgtest.Must(t, err)
	left := func(group string) (old, recent int) {
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE finished_at < now() - interval '1 day'), count(*) FILTER (WHERE finished_at > now() - interval '1 day')
			FROM leasehold.jobs WHERE group_name = $1`, group).Scan(&old, &recent))
		return old, recent
	}
	waitRetained := func(group string) {
		t.Helper()
		for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
			old, _ := left(group)
			if old == 0 {
				return
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("group %s: %d old finished jobs left after 10s (retention interval 1h)", group, old)
			}
		}
	}
	for _, g := range []struct {
		name       string
		partitions int
	}{{"emails", 8}, {"later", 4}} {
		m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: g.name, Partitions: g.partitions,
			Run: p.Run, PollInterval: 100 * time.Millisecond, Lease: lease.Config{TTL: time.Second}})
		pgtest.Must(t, err)
		pgtest.Must(t, m.Start(ctx))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			m.Stop(ctx)
		})
		waitOwned(t, m, g.partitions)
		waitRetained(g.name)
	}
	if _, recent := left("later"); recent != 1 {
		t.Fatalf("group later: %d recent finished jobs left; want 1 (kept)", recent)
	}
}

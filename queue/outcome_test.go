package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/queue"
	"sync/atomic"
)

type step struct {
	Name string `json:"name"`
}

func (step) Kind() string { return "step" }

type orphan struct{}

func (orphan) Kind() string { return "nobody_handles_this" }

// Each outcome of a plain handler, and the order of a key's jobs across
// retries.
func TestOutcomesAndOrderUnderRetries(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var mu sync.Mutex
	var ran []string // "name@attempt" in the order handlers ran to success
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		switch w.Args.Name {
		case "a1": // fails twice, then succeeds
			if w.Attempt < 3 {
				return errors.New("transient")
			}
		case "cancel":
			return queue.Cancel(errors.New("no longer wanted"))
		case "snooze":
			if w.Attempt == 1 {
				mu.Lock()
				snoozed := len(ran) == 0 || ran[len(ran)-1] != "snooze-once"
				if snoozed {
					ran = append(ran, "snooze-once")
				}
				mu.Unlock()
				if snoozed {
					return queue.Snooze(50 * time.Millisecond)
				}
			}
		case "panic":
			if w.Attempt == 1 {
				panic("handler bug")
			}
		case "doomed":
			return errors.New("always fails")
		}
		mu.Lock()
		ran = append(ran, w.Args.Name)
		mu.Unlock()
		return nil
	})
	_, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: "a", Args: step{"a1"}},
		queue.Job{Group: "emails", Key: "a", Args: step{"a2"}},
		queue.Job{Group: "emails", Key: "c", Args: step{"cancel"}},
		queue.Job{Group: "emails", Key: "s", Args: step{"snooze"}},
		queue.Job{Group: "emails", Key: "p", Args: step{"panic"}},
		queue.Job{Group: "emails", Key: "d", Args: step{"doomed"}, MaxAttempts: 2},
		queue.Job{Group: "emails", Key: "u", Args: orphan{}},
	)
	pgtest.Must(t, err)
	// Args that do not decode into step: enqueued behind the client's back.
	_, err = pool.Exec(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at)
		VALUES ('emails', 0, 'b', 'step', '{"name": 5}', 25, clock_timestamp())`)
	pgtest.Must(t, err)
	startWorker(t, pool, "w1", ws, nil)

	type row struct {
		state   string
		attempt int
		errs    int
		last    string
	}
	get := func(key string) row {
		var r row
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT state, attempt, jsonb_array_length(errors), coalesce(errors->-1->>'error', '')
			FROM leasehold.jobs WHERE key = $1 ORDER BY id LIMIT 1`, key).Scan(&r.state, &r.attempt, &r.errs, &r.last))
		return r
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var pending int
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE state = 'pending' AND key <> 'u'`).Scan(&pending))
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs still pending", pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for key, want := range map[string]struct {
		state         string
		attempt, errs int
		last          string
	}{
		"a": {"completed", 3, 2, "transient"},
		"c": {"cancelled", 1, 1, "no longer wanted"},
		"s": {"completed", 1, 0, ""}, // the snooze spent no attempt
		"p": {"completed", 2, 1, "handler panicked: handler bug"},
		"d": {"discarded", 2, 2, "always fails"},
		"b": {"discarded", 1, 1, "do not decode"},
		"u": {"pending", 0, 1, "no handler"},
	} {
		got := get(key)
		if got.state != want.state || got.attempt != want.attempt || got.errs != want.errs || !strings.Contains(got.last, want.last) {
			t.Errorf("job %s: %+v; want %+v", key, got, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	ia, i2 := index(ran, "a1"), index(ran, "a2")
	if ia < 0 || i2 < 0 || i2 < ia {
		t.Fatalf("ran %v: a2 ran before a1 had succeeded (per-key order across retries)", ran)
	}
}

func index(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

func TestRetentionDeletesOldFinishedJobs(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	res, err := c.EnqueueMany(ctx, queue.Job{Group: "emails", Key: "old", Args: step{"x"}}, queue.Job{Group: "emails", Key: "new", Args: step{"x"}})
	pgtest.Must(t, err)
	_, err = pool.Exec(ctx, `UPDATE leasehold.jobs SET state = 'completed',
		finished_at = CASE WHEN id = $1 THEN clock_timestamp() - interval '2 days' ELSE clock_timestamp() END`, res[0].ID)
	pgtest.Must(t, err)
	startWorker(t, pool, "w1", queue.NewWorkers(), nil)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		var ids []int64
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT coalesce(array_agg(id), '{}') FROM leasehold.jobs`).Scan(&ids))
		if len(ids) == 1 && ids[0] == res[1].ID {
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("jobs left %v; want only the recent one (%d)", ids, res[1].ID)
		}
	}
}

// A handler interrupted by a handoff (it returns its context's error) does
// not spend an attempt: the job stays pending for the next owner.
func TestHandoffInterruptsWithoutSpendingAnAttempt(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	started := make(chan struct{})
	var once sync.Once
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return ctx.Err()
	})
	_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: step{"long"}})
	pgtest.Must(t, err)
	m := startWorker(t, pool, "w1", ws, nil)
	<-started
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pgtest.Must(t, m.Stop(sctx))
	var state string
	var attempt, errs int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT state, attempt, jsonb_array_length(errors) FROM leasehold.jobs`).Scan(&state, &attempt, &errs))
	if state != "pending" || attempt != 0 || errs != 0 {
		t.Fatalf("after a handoff mid-job: %s, attempt %d, %d errors; want pending, 0, 0", state, attempt, errs)
	}
}

// A discarded job is kept, inspectable, and can be put back to run again.
func TestDiscardedJobsAreInspectableAndRetryable(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var mu sync.Mutex
	fail := true
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return errors.New("broken downstream")
		}
		return nil
	})
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: step{"x"}, MaxAttempts: 1, UniqueKey: "once"})
	pgtest.Must(t, err)
	startWorker(t, pool, "w1", ws, nil)
	pgtest.WaitNoPendingJobs(t, pool, 10*time.Second)
	info, err := c.JobInfo(ctx, res.ID)
	pgtest.Must(t, err)
	if info.State != "discarded" || info.Attempt != 1 || !strings.Contains(errorsText(info.Errors), "broken downstream") ||
		info.FinishedToken == nil || info.Kind != "step" || info.UniqueKey != "once" {
		t.Fatalf("discarded job = %+v", info)
	}
	if _, err := c.JobInfo(ctx, 999999); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("JobInfo(unknown) = %v; want ErrNotFound", err)
	}

	mu.Lock()
	fail = false
	mu.Unlock()
	changed, err := c.Retry(ctx, res.ID, 999999)
	pgtest.Must(t, err)
	if len(changed) != 1 || changed[0] != res.ID {
		t.Fatalf("Retry changed %v; want [%d]", changed, res.ID)
	}
	pgtest.WaitNoPendingJobs(t, pool, 10*time.Second)
	info, err = c.JobInfo(ctx, res.ID)
	pgtest.Must(t, err)
	if info.State != "completed" || info.Attempt != 1 || !strings.Contains(errorsText(info.Errors), "broken downstream") {
		t.Fatalf("retried job = %+v; want completed, with the old error kept", info)
	}
	if changed, err := c.Retry(ctx, res.ID); err != nil || len(changed) != 0 {
		t.Fatalf("Retry of a completed job = %v, %v; want no change", changed, err)
	}
}

func TestNewProcessorRejectsBadConfig(t *testing.T) {
	pool := pgtest.Pool(t)
	ws := queue.NewWorkers()
	for _, cfg := range []queue.ProcessorConfig{
		{},
		{Workers: ws, BatchSize: -1},
		{Workers: ws, PollInterval: -time.Second},
		{Workers: ws, Fence: lease.FenceConfig{IdleTimeout: -1}},
		{Workers: ws, PartitionConcurrency: -1},
		{Workers: ws, Concurrency: -1},
		{Workers: ws, Window: -1},
		{Workers: ws, CompleteInterval: -time.Millisecond},
	} {
		if _, err := queue.NewProcessor(pgtest.DBOn(t, pool), cfg); !errors.Is(err, queue.ErrInvalidConfig) {
			t.Errorf("NewProcessor(%+v) = %v; want ErrInvalidConfig", cfg, err)
		}
	}
	if _, err := queue.NewProcessor(nil, queue.ProcessorConfig{Workers: ws}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("NewProcessor(nil db) = %v; want ErrInvalidConfig", err)
	}
}

// The concurrency defaults: no per-partition cap below Concurrency, a
// window of two fetches; a PartitionConcurrency above Concurrency is capped
// and says so.
func TestProcessorConcurrencyDefaults(t *testing.T) {
	pool := pgtest.Pool(t)
	ws := queue.NewWorkers()
	p, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws})
	pgtest.Must(t, err)
	if c := p.Config(); c.Concurrency != 100 || c.PartitionConcurrency != 100 || c.Window != 200 ||
		c.BatchSize != 100 || c.CompleteInterval != 100*time.Millisecond || c.FetchCooldown != 10*time.Millisecond {
		t.Errorf("defaults: Concurrency %d, PartitionConcurrency %d, Window %d, BatchSize %d, CompleteInterval %v; "+
			"want 100, 100, 200, 100, 100ms (FetchCooldown %v, want 10ms)", c.Concurrency, c.PartitionConcurrency, c.Window, c.BatchSize, c.CompleteInterval, c.FetchCooldown)
	}
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	p, err = queue.NewProcessor(pgtest.Open(t, pool, leasehold.Config{Logger: log}), queue.ProcessorConfig{Workers: ws, Concurrency: 8, PartitionConcurrency: 50})
	pgtest.Must(t, err)
	if c := p.Config(); c.PartitionConcurrency != 8 || c.Window != 200 {
		t.Errorf("PartitionConcurrency 50 over Concurrency 8: got %d (window %d); want capped at 8 (window 200)", c.PartitionConcurrency, c.Window)
	}
	if !strings.Contains(logs.String(), "capped at Concurrency") {
		t.Errorf("the cap was not logged: %q", logs.String())
	}
}

// An error message PostgreSQL cannot store as text (a NUL byte, invalid
// UTF-8) must not stop the batch's outcomes from being recorded.
func TestUnstorableErrorMessageDoesNotPoisonTheBatch(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var okRuns atomic.Int32
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		if w.Args.Name == "poison" {
			return errors.New("bad input \x00\xff")
		}
		okRuns.Add(1)
		return nil
	})
	keys := keysIn(5, 2, "poison")
	_, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: keys[0], Args: step{"poison"}, MaxAttempts: 2},
		queue.Job{Group: "emails", Key: keys[1], Args: step{"ok"}})
	pgtest.Must(t, err)
	startWorker(t, pool, "w1", ws, nil)
	time.Sleep(2 * time.Second)
	var pending int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE state = 'pending'`).Scan(&pending))
	if pending != 0 || okRuns.Load() != 1 {
		t.Fatalf("%d jobs pending, the good job ran %d times; want 0 pending and 1 run", pending, okRuns.Load())
	}
}

// A huge error (10 MB) is stored cut to its first 4 KiB, on a character
// boundary, with a marker saying how much was cut: the batch's completion
// is recorded (the good job beside it runs once), and the job is retried,
// then discarded, instead of appending 10 MB to its errors per attempt.
func TestHugeErrorMessageIsTruncated(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var okRuns atomic.Int32
	// "€" is 3 bytes: 4 KiB falls inside one, so the cut must step back.
	huge := "x" + strings.Repeat("€", 10<<20/3)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		if w.Args.Name == "huge" {
			return errors.New(huge)
		}
		okRuns.Add(1)
		return nil
	})
	keys := keysIn(5, 2, "huge")
	res, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: keys[0], Args: step{"huge"}, MaxAttempts: 2},
		queue.Job{Group: "emails", Key: keys[1], Args: step{"ok"}})
	pgtest.Must(t, err)
	startWorker(t, pool, "w1", ws, nil)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	info, err := c.JobInfo(ctx, res[0].ID)
	pgtest.Must(t, err)
	errs := info.Errors
	if info.State != "discarded" || len(errs) != 2 || okRuns.Load() != 1 {
		t.Fatalf("huge job %s with %d errors, good job ran %d times; want discarded with 2 errors, 1 run", info.State, len(errs), okRuns.Load())
	}
	for i, e := range errs {
		body, marker, ok := strings.Cut(e.Error, "… [truncated ")
		if !ok || len(body) > 4096 || !strings.HasPrefix(huge, body) || !utf8.ValidString(body) ||
			marker != fmt.Sprintf("%d bytes]", len(huge)-len(body)) {
			t.Errorf("error %d: %d bytes, ends %q; want the first ≤4096 bytes of the error on a character boundary and the truncation marker",
				i, len(e.Error), e.Error[max(0, len(e.Error)-40):])
		}
	}
}

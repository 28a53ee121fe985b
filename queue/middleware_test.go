package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// process runs ws on "emails" until no job is pending.
func process(t *testing.T, pool *pgxpool.Pool, ws *queue.Workers) {
	t.Helper()
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		MinRetry: 20 * time.Millisecond, MaxRetry: 50 * time.Millisecond}, true)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
}

// jobState reads a job's state, attempt and errors.
func jobState(t *testing.T, pool *pgxpool.Pool, id int64) (state string, attempt int, errs string) {
	t.Helper()
	pgtest.Must(t, pool.QueryRow(pgtest.Context(t), `SELECT state, attempt, errors::text FROM leasehold.jobs WHERE id = $1`, id).
		Scan(&state, &attempt, &errs))
	return state, attempt, errs
}

// trail is a concurrency-safe record of what middleware saw.
type trail struct {
	mu    sync.Mutex
	steps []string
}

func (tr *trail) add(s string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.steps = append(tr.steps, s)
}

// named returns a middleware that records "name>" before next and "<name"
// after it.
func (tr *trail) named(name string) queue.Middleware {
	return func(next queue.HandlerFunc) queue.HandlerFunc {
		return func(ctx context.Context, r *queue.Run) error {
			tr.add(name + ">")
			err := next(ctx, r)
			tr.add("<" + name)
			return err
		}
	}
}

// Workers.Use middleware wraps WithMiddleware middleware, each list with
// its first outermost, and an earlier Use outside a later one, also for
// handlers registered before Use.
func TestMiddlewareOrder(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var tr trail
	ws := queue.NewWorkers()
	ws.Use(tr.named("u1"), tr.named("u2"))
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[email]) error {
		tr.add("handler")
		return nil
	}, queue.WithMiddleware(tr.named("h1"), tr.named("h2")))
	ws.Use(tr.named("u3")) // after Handle: still applies, inside u1 and u2
	_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: email{To: "a@example.com"}})
	pgtest.Must(t, err)
	process(t, pool, ws)
	want := []string{"u1>", "u2>", "u3>", "h1>", "h2>", "handler", "<h2", "<h1", "<u3", "<u2", "<u1"}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if !slices.Equal(tr.steps, want) {
		t.Fatalf("steps = %v; want %v", tr.steps, want)
	}
}

// One middleware sees plain, transactional and batch runs: a plain run
// without a transaction, a transactional run whose Tx commits the
// middleware's writes with the job, and a batch run with all its jobs.
func TestMiddlewareAppliesToEveryHandlerShape(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ledgerSetup(t, pool)
	_, err := pool.Exec(ctx, `CREATE TABLE mw_audit (job_id bigint NOT NULL, kind text NOT NULL)`)
	pgtest.Must(t, err)
	var mu sync.Mutex
	runs := map[string][]queue.Run{}
	var batchIDs [][]int64
	ws := queue.NewWorkers()
	ws.Use(func(next queue.HandlerFunc) queue.HandlerFunc {
		return func(ctx context.Context, r *queue.Run) error {
			mu.Lock()
			runs[r.Kind] = append(runs[r.Kind], *r)
			mu.Unlock()
			if r.Tx != nil {
				for _, j := range r.Jobs {
					if _, err := r.Tx.Exec(ctx, `INSERT INTO mw_audit VALUES ($1, $2)`, j.ID, r.Kind); err != nil {
						return err
					}
				}
			}
			return next(ctx, r)
		}
	})
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[email]) error { return nil })
	queue.HandleTx(ws, record)
	queue.HandleTxBatch(ws, func(ctx context.Context, tx pgx.Tx, works []*queue.Work[reprice]) error {
		ids := make([]int64, len(works))
		for i, w := range works {
			ids[i] = w.ID
		}
		mu.Lock()
		batchIDs = append(batchIDs, ids)
		mu.Unlock()
		return nil
	})
	_, err = c.EnqueueMany(ctx, queue.Job{Group: "emails", Args: email{To: "a@example.com"}},
		queue.Job{Group: "emails", Key: "acct", Args: deposit{Seq: 1}})
	pgtest.Must(t, err)
	var batch []queue.Job
	for i := range 20 {
		batch = append(batch, queue.Job{Group: "emails", Key: "b", Args: reprice{User: i}, Ordering: queue.OrderNonBlocking})
	}
	_, err = c.EnqueueMany(ctx, batch...)
	pgtest.Must(t, err)
	process(t, pool, ws)

	mu.Lock()
	defer mu.Unlock()
	if rs := runs["email"]; len(rs) != 1 || rs[0].Tx != nil || len(rs[0].Jobs) != 1 || rs[0].Group != "emails" || rs[0].Token == 0 ||
		rs[0].Jobs[0].Attempt != 1 || !strings.Contains(string(rs[0].Jobs[0].Args), "a@example.com") {
		t.Fatalf("plain runs = %+v; want one run without Tx, of one job, with its args", rs)
	}
	if rs := runs["deposit"]; len(rs) != 1 || rs[0].Tx == nil || len(rs[0].Jobs) != 1 || rs[0].Jobs[0].Key != "acct" {
		t.Fatalf("transactional runs = %+v; want one run with a Tx, of one job", rs)
	}
	// Every batch run's jobs are the jobs its handler got.
	var seen []int64
	for i, r := range runs["reprice"] {
		ids := make([]int64, len(r.Jobs))
		for j, job := range r.Jobs {
			ids[j] = job.ID
		}
		if r.Tx == nil || i >= len(batchIDs) || !slices.Equal(ids, batchIDs[i]) {
			t.Fatalf("batch run %d: jobs %v, Tx %v; the handler got %v", i, ids, r.Tx, batchIDs)
		}
		seen = append(seen, ids...)
	}
	if len(seen) != 20 {
		t.Fatalf("batch runs covered %d jobs; want 20", len(seen))
	}
	// The middleware's writes in Tx committed with the transactional jobs
	// (21 of them), and it wrote nothing for the plain job.
	var audits, kinds int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT kind) FROM mw_audit`).Scan(&audits, &kinds))
	if audits != 21 || kinds != 2 {
		t.Fatalf("mw_audit has %d rows of %d kinds; want 21 of 2", audits, kinds)
	}
}

// A middleware's error is the run's error: a plain error is retried and
// recorded, a wrapped Cancel cancels, a wrapped Snooze spends no attempt,
// a panic is recovered as a failure; and a middleware that returns nil
// without calling next completes the job without running the handler.
func TestMiddlewareErrorsAndShortCircuit(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var handled sync.Map // by To: runs of the handler
	var tries sync.Map   // by To: runs of the middleware
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[email]) error {
		n, _ := handled.LoadOrStore(w.Args.To, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		return nil
	}, queue.WithMiddleware(func(next queue.HandlerFunc) queue.HandlerFunc {
		return func(ctx context.Context, r *queue.Run) error {
			var e email
			pgtest.Must(t, json.Unmarshal(r.Jobs[0].Args, &e))
			n, _ := tries.LoadOrStore(e.To, new(atomic.Int32))
			try := n.(*atomic.Int32).Add(1)
			switch e.To {
			case "fail-once":
				if try == 1 {
					return errors.New("middleware says no")
				}
			case "cancel":
				return fmt.Errorf("policy: %w", queue.Cancel(errors.New("not allowed")))
			case "snooze":
				if try == 1 {
					return fmt.Errorf("later: %w", queue.Snooze(time.Millisecond))
				}
			case "panic":
				panic("middleware bug")
			case "skip":
				return nil // short-circuit: the handler does not run
			case "twice":
				if err := next(ctx, r); err != nil {
					return err
				}
				return next(ctx, r)
			}
			return next(ctx, r)
		}
	}))
	ids := map[string]int64{}
	for _, to := range []string{"fail-once", "cancel", "snooze", "panic", "skip", "twice", "plain"} {
		res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: email{To: to}, MaxAttempts: 2})
		pgtest.Must(t, err)
		ids[to] = res.ID
	}
	process(t, pool, ws)
	runs := func(m *sync.Map, to string) int32 {
		if n, ok := m.Load(to); ok {
			return n.(*atomic.Int32).Load()
		}
		return 0
	}
	check := func(to, state string, attempt int, errPart string, handlerRuns int32) {
		t.Helper()
		st, at, errs := jobState(t, pool, ids[to])
		if st != state || at != attempt || errPart != "" && !strings.Contains(errs, errPart) || errPart == "" && errs != "[]" {
			t.Errorf("%s: state %s, attempt %d, errors %s; want %s, %d, errors with %q", to, st, at, errs, state, attempt, errPart)
		}
		if n := runs(&handled, to); n != handlerRuns {
			t.Errorf("%s: the handler ran %d times; want %d", to, n, handlerRuns)
		}
	}
	check("fail-once", "completed", 2, "middleware says no", 1)
	check("cancel", "cancelled", 1, "not allowed", 0)
	check("snooze", "completed", 1, "", 1) // the snooze spent no attempt
	check("panic", "discarded", 2, "panicked: middleware bug", 0)
	check("skip", "completed", 1, "", 0)
	check("twice", "discarded", 2, queue.ErrNextTwice.Error(), 2) // once per attempt, never twice in one
	check("plain", "completed", 1, "", 1)                         // control: a run through next runs the handler
	if n := runs(&tries, "snooze"); n != 2 {
		t.Errorf("the snoozed job's middleware ran %d times; want 2", n)
	}
}

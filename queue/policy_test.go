package queue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

type maxed struct{}

func (maxed) Kind() string { return "maxed" }

type unmaxed struct{}

func (unmaxed) Kind() string { return "unmaxed" }

var errAlways = errors.New("always fails")

// finished waits until job id is no longer pending and returns it.
func finished(t *testing.T, c *queue.Client, id int64) queue.JobInfo {
	t.Helper()
	var j queue.JobInfo
	waitUntil(t, "the job finishes", func() bool {
		var err error
		j, err = c.JobInfo(pgtest.Context(t), id)
		pgtest.Must(t, err)
		return j.State != queue.StatePending
	})
	return j
}

func policyMember(t *testing.T, pool *pgxpool.Pool, ws *queue.Workers) {
	pauseMember(t, pool, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		MinRetry: 10 * time.Millisecond, MaxRetry: 20 * time.Millisecond}, true)
}

// A kind's MaxAttempts replaces the client's default for jobs enqueued
// without one: discarded after 2 attempts; an explicit Job.MaxAttempts
// wins (3); the control, a kind without a policy, runs the client's 4.
func TestPolicyMaxAttempts(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{MaxAttempts: 4})
	pgtest.Must(t, err)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[maxed]) error { return errAlways },
		queue.WithPolicy(queue.Policy{MaxAttempts: 2}))
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[unmaxed]) error { return errAlways })
	res, err := c.EnqueueMany(ctx, queue.Job{Group: "emails", Args: maxed{}}, queue.Job{Group: "emails", Args: maxed{}, MaxAttempts: 3},
		queue.Job{Group: "emails", Args: unmaxed{}})
	pgtest.Must(t, err)
	policyMember(t, pool, ws)
	for i, want := range []int{2, 3, 4} {
		j := finished(t, c, res[i].ID)
		if j.State != queue.StateDiscarded || j.Attempt != want {
			t.Errorf("job %d (%s, max attempts %d as stored): %s after %d attempts; want discarded after %d",
				i, j.Kind, j.MaxAttempts, j.State, j.Attempt, want)
		}
	}
}

type slow struct{}

func (slow) Kind() string { return "slow" }

type unslow struct{}

func (unslow) Kind() string { return "unslow" }

// A kind's Timeout replaces JobTimeout: its handler's context ends with a
// cause wrapping ErrJobTimeout, and the run is a failed attempt; the
// control's context has JobTimeout's deadline (1h).
func TestPolicyTimeout(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var mu sync.Mutex
	deadlines := map[string]time.Duration{}
	ws := queue.NewWorkers()
	hasDeadline := false
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[slow]) error {
		d, ok := ctx.Deadline()
		mu.Lock()
		hasDeadline = ok
		deadlines["slow"] = time.Until(d)
		mu.Unlock()
		<-ctx.Done()
		return context.Cause(ctx)
	}, queue.WithPolicy(queue.Policy{Timeout: 50 * time.Millisecond}))
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[unslow]) error {
		d, _ := ctx.Deadline()
		mu.Lock()
		deadlines["unslow"] = time.Until(d)
		mu.Unlock()
		return nil
	})
	res, err := c.EnqueueMany(ctx, queue.Job{Group: "emails", Args: slow{}, MaxAttempts: 1}, queue.Job{Group: "emails", Args: unslow{}})
	pgtest.Must(t, err)
	pauseMember(t, pool, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond, JobTimeout: time.Hour}, true)
	j := finished(t, c, res[0].ID)
	if j.State != queue.StateDiscarded || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, queue.ErrJobTimeout.Error()) {
		t.Errorf("the slow job: %s, errors %+v; want discarded with a job timeout", j.State, j.Errors)
	}
	if j := finished(t, c, res[1].ID); j.State != queue.StateCompleted {
		t.Errorf("the control: %s; want completed", j.State)
	}
	mu.Lock()
	defer mu.Unlock()
	// Only an upper bound: on a loaded machine the handler may start after
	// its deadline passed (d <= 0).
	if d := deadlines["slow"]; !hasDeadline || d > 50*time.Millisecond {
		t.Errorf("the slow job's deadline was %v away (has one: %v); want at most the policy's 50ms", d, hasDeadline)
	}
	if d := deadlines["unslow"]; d < 30*time.Minute {
		t.Errorf("control: the job's deadline was %v away; want JobTimeout's 1h", d)
	}
}

type backed struct{}

func (backed) Kind() string { return "backed" }

type unbacked struct{}

func (unbacked) Kind() string { return "unbacked" }

// retryDelay waits until job id has failed and returns how far its first
// retry's run_at was past the time that failure was recorded, both on the
// database clock.
func retryDelay(t *testing.T, pool *pgxpool.Pool, id int64) time.Duration {
	t.Helper()
	var d time.Duration
	waitUntil(t, "the job fails once", func() bool {
		var us *int64
		// The first failure's delay: a discard after a second one leaves
		// run_at as the first retry set it.
		pgtest.Must(t, pool.QueryRow(pgtest.Context(t), `SELECT CASE WHEN attempt >= 1
			THEN (extract(epoch FROM run_at - (errors->0->>'at')::timestamptz) * 1000000)::bigint END
			FROM leasehold.jobs WHERE id = $1`, id).Scan(&us))
		if us == nil {
			return false
		}
		d = time.Duration(*us) * time.Microsecond
		return true
	})
	return d
}

// A kind's Backoff decides when a failed job runs again: its delay is
// added to the database clock (stored run_at); it is called with the
// failed attempt's number. The control's delay is the Processor's
// (MaxRetry 20ms at most).
func TestPolicyBackoff(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var calls sync.Map
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[backed]) error { return errAlways },
		queue.WithPolicy(queue.Policy{Backoff: func(attempt int) time.Duration {
			calls.Store(attempt, true)
			return time.Duration(attempt) * time.Hour
		}}))
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[unbacked]) error { return errAlways })
	res, err := c.EnqueueMany(ctx, queue.Job{Group: "emails", Args: backed{}}, queue.Job{Group: "emails", Args: unbacked{}, MaxAttempts: 2})
	pgtest.Must(t, err)
	policyMember(t, pool, ws)
	if d := retryDelay(t, pool, res[0].ID); d < time.Hour-time.Second || d > time.Hour+time.Second {
		t.Errorf("the retry is due %v after the failure; want the policy's 1h", d)
	}
	if _, ok := calls.Load(1); !ok {
		t.Error("Backoff was not called with attempt 1")
	}
	if d := retryDelay(t, pool, res[1].ID); d > time.Second {
		t.Errorf("control: the retry is due %v after the failure; want the Processor's backoff (at most 20ms)", d)
	}
}

type panicky struct{}

func (panicky) Kind() string { return "panicky" }

// A kind's Backoff that panics does not crash the worker (without the
// recover, the test binary dies): the failed job gets the Processor's
// backoff (MaxRetry 20ms at most) and runs again, and is discarded after
// its last attempt.
func TestPolicyBackoffPanics(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var calls sync.Map
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[panicky]) error { return errAlways },
		queue.WithPolicy(queue.Policy{Backoff: func(attempt int) time.Duration {
			calls.Store(attempt, true)
			panic("a bad backoff")
		}}))
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: panicky{}, MaxAttempts: 3})
	pgtest.Must(t, err)
	policyMember(t, pool, ws)
	if d := retryDelay(t, pool, res.ID); d > time.Second {
		t.Errorf("the retry is due %v after the failure; want the Processor's backoff (at most 20ms)", d)
	}
	if j := finished(t, c, res.ID); j.State != queue.StateDiscarded || j.Attempt != 3 {
		t.Fatalf("job %+v; want discarded after 3 attempts", j)
	}
	if _, ok := calls.Load(2); !ok {
		t.Error("Backoff was not called for attempt 2")
	}
}

type released struct {
	Fail bool `json:"fail"`
}

func (released) Kind() string { return "released" }

type held struct {
	Fail bool `json:"fail"`
}

func (held) Kind() string { return "held" }

type forced struct {
	Fail bool `json:"fail"`
}

func (forced) Kind() string { return "forced" }

// FailureHold overrides a failed keyed job's own Ordering while it waits
// for its retry: ReleaseKey lets a strict job's later jobs run; HoldKey
// makes a non-blocking job hold them. The control, a strict job of a kind
// whose policy leaves it as enqueued, holds them.
func TestPolicyFailureHold(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	hour := func(int) time.Duration { return time.Hour }
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[released]) error {
		if w.Args.Fail {
			return errAlways
		}
		return nil
	}, queue.WithPolicy(queue.Policy{Backoff: hour, FailureHold: queue.ReleaseKey}))
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[held]) error {
		if w.Args.Fail {
			return errAlways
		}
		return nil
	}, queue.WithPolicy(queue.Policy{Backoff: hour}))
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[forced]) error {
		if w.Args.Fail {
			return errAlways
		}
		return nil
	}, queue.WithPolicy(queue.Policy{Backoff: hour, FailureHold: queue.HoldKey}))
	res, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: "a", Args: released{Fail: true}}, // strict, released by its policy
		queue.Job{Group: "emails", Key: "a", Args: released{}},
		queue.Job{Group: "emails", Key: "b", Args: held{Fail: true}}, // strict, the control
		queue.Job{Group: "emails", Key: "b", Args: held{}},
		queue.Job{Group: "emails", Key: "c", Args: forced{Fail: true}, Ordering: queue.OrderNonBlocking}, // held by its policy
		queue.Job{Group: "emails", Key: "c", Args: forced{}})
	pgtest.Must(t, err)
	policyMember(t, pool, ws)
	// Key a: the later job runs while the failed one waits an hour.
	if j := finished(t, c, res[1].ID); j.State != queue.StateCompleted {
		t.Fatalf("key a's second job: %s; want completed", j.State)
	}
	a, err := c.JobInfo(ctx, res[0].ID)
	pgtest.Must(t, err)
	if a.State != queue.StatePending || a.Attempt != 1 || a.Ordering != queue.OrderNonBlocking {
		t.Errorf("key a's failed job: %s, attempt %d, %s; want pending after 1 attempt, non-blocking", a.State, a.Attempt, a.Ordering)
	}
	for _, k := range []struct {
		name          string
		first, second int
	}{{"b (control)", 2, 3}, {"c", 4, 5}} {
		waitUntil(t, "key "+k.name+"'s first job fails", func() bool {
			j, err := c.JobInfo(ctx, res[k.first].ID)
			pgtest.Must(t, err)
			return j.Attempt == 1
		})
		j, err := c.JobInfo(ctx, res[k.second].ID)
		pgtest.Must(t, err)
		if j.State != queue.StatePending || j.WaitingBehind != res[k.first].ID {
			t.Errorf("key %s's second job: %s, waiting behind %d; want pending behind job %d", k.name, j.State, j.WaitingBehind, res[k.first].ID)
		}
	}
}

// A policy out of range is an error of NewProcessor.
func TestPolicyInvalid(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	for _, p := range []queue.Policy{{MaxAttempts: -1}, {MaxAttempts: queue.MaxAttempts + 1}, {FailureHold: 7}} {
		ws := queue.NewWorkers()
		queue.Handle(ws, func(ctx context.Context, w *queue.Work[maxed]) error { return nil }, queue.WithPolicy(p))
		if _, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws}); !errors.Is(err, queue.ErrInvalidConfig) {
			t.Errorf("policy %+v: %v; want ErrInvalidConfig", p, err)
		}
	}
}

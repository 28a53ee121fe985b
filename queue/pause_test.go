package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

type pausable struct {
	N int `json:"n"`
}

func (pausable) Kind() string { return "pausable" }

type other struct {
	N int `json:"n"`
}

func (other) Kind() string { return "other" }

// history is a test's record of events, in the order they happened: job
// starts ("start <n>") and the test's own marks.
type history struct {
	mu     sync.Mutex
	events []string
}

func (h *history) add(e string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

func (h *history) snapshot() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.events...)
}

// noStartBetween checks a history: no job started after the mark from
// (the processor saw the pause) and before the mark to ("" for the end).
func noStartBetween(events []string, from, to string) error {
	in := false
	for i, e := range events {
		switch {
		case e == from:
			in = true
		case to != "" && e == to:
			in = false
		case in && len(e) > 6 && e[:6] == "start ":
			return fmt.Errorf("event %d: %q after %q", i, e, from)
		}
	}
	return nil
}

// pauseMember starts a member of group "emails" (8 partitions) running a
// Processor with cfg, listening for notifications if listen.
func pauseMember(t *testing.T, pool *pgxpool.Pool, cfg queue.ProcessorConfig, listen bool) (*queue.Processor, *partition.Member) {
	t.Helper()
	return groupMember(t, pool, "emails", 8, cfg, listen)
}

// waitUntil polls cond until it holds, failing the test when its context
// ends.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := pgtest.Context(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func completed(t *testing.T, pool *pgxpool.Pool, kind string) int {
	var n int
	pgtest.Must(t, pool.QueryRow(pgtest.Context(t),
		`SELECT count(*) FROM leasehold.jobs WHERE state = 'completed' AND kind = $1`, kind).Scan(&n))
	return n
}

func TestNoStartBetweenCatchesAStart(t *testing.T) {
	t.Parallel()
	ok := []string{"start 1", "observed", "resumed", "start 2"}
	if err := noStartBetween(ok, "observed", "resumed"); err != nil {
		t.Fatalf("a history without a start while paused: %v", err)
	}
	bad := []string{"start 1", "observed", "start 2", "resumed"}
	if err := noStartBetween(bad, "observed", "resumed"); err == nil {
		t.Fatal("the checker missed a start while paused")
	}
}

// Pausing a group stops its owner starting jobs once it has seen the
// pause: the job running meanwhile finishes, and the jobs fetched but not
// started (the window, behind the one handler slot) are let go; none
// starts until Resume, then all run. With listen, the notification
// delivers the pause; without, the poll does (PauseInterval 1s, default).
func TestPauseGroup(t *testing.T) {
	t.Parallel()
	for _, listen := range []bool{true, false} {
		t.Run(fmt.Sprintf("listen=%v", listen), func(t *testing.T) {
			t.Parallel()
			ctx := pgtest.Context(t)
			pool, c := setup(t)
			var h history
			started, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			ws := queue.NewWorkers()
			queue.Handle(ws, func(ctx context.Context, w *queue.Work[pausable]) error {
				h.add(fmt.Sprintf("start %d", w.Args.N))
				once.Do(func() {
					close(started)
					<-release
				})
				return nil
			})
			p, _ := pauseMember(t, pool, queue.ProcessorConfig{Workers: ws, Concurrency: 1, PollInterval: 20 * time.Millisecond}, listen)
			const n = 20
			for i := range n {
				_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: pausable{N: i}})
				pgtest.Must(t, err)
			}
			<-started
			pgtest.Must(t, c.Pause(ctx, "emails", "", "maintenance"))
			waitUntil(t, "the processor sees the pause", func() bool { return queue.PauseSeen(p, "emails", "") })
			h.add("observed")
			skips := queue.PauseSkips(p)
			close(release)
			waitUntil(t, "the running job completes", func() bool { return completed(t, pool, "pausable") == 1 })
			// The partitions keep declining to fetch: many polls later,
			// still nothing started.
			waitUntil(t, "the partitions skip fetches", func() bool { return queue.PauseSkips(p) >= skips+100 })
			ps, err := c.Paused(ctx, "emails")
			pgtest.Must(t, err)
			if len(ps) != 1 || ps[0].Kind != "" || ps[0].Reason != "maintenance" || ps[0].At.IsZero() {
				t.Errorf("Paused: %+v; want the group paused for maintenance", ps)
			}
			h.add("resumed")
			pgtest.Must(t, c.Resume(ctx, "emails", ""))
			waitUntil(t, "every job completes", func() bool { return completed(t, pool, "pausable") == n })
			events := h.snapshot()
			if err := noStartBetween(events, "observed", "resumed"); err != nil {
				t.Fatalf("a job started while the group was paused: %v\n%v", err, events)
			}
			// Negative control: the same history with one more start while
			// paused fails the check.
			r := index(events, "resumed")
			doctored := append(append(append([]string(nil), events[:r]...), "start 99"), events[r:]...)
			if noStartBetween(doctored, "observed", "resumed") == nil {
				t.Fatalf("control: the check missed a start while paused: %v", doctored)
			}
		})
	}
}

// A pause is stored: workers started while the group is paused start none
// of its jobs, across a restart, until Resume.
func TestPauseSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	pgtest.Must(t, c.Pause(ctx, "emails", "", ""))
	pgtest.Must(t, c.Pause(ctx, "emails", "", "again")) // idempotent
	const n = 10
	for i := range n {
		_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: pausable{N: i}})
		pgtest.Must(t, err)
	}
	var h history
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[pausable]) error {
		h.add(fmt.Sprintf("start %d", w.Args.N))
		return nil
	})
	h.add("paused")
	cfg := queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond}
	p1, m1 := pauseMember(t, pool, cfg, true)
	waitUntil(t, "the first worker's partitions wait", func() bool { return queue.PauseSkips(p1) >= 8 })
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pgtest.Must(t, m1.Stop(stopCtx))
	p2, _ := pauseMember(t, pool, cfg, false)
	waitUntil(t, "the second worker's partitions wait", func() bool { return queue.PauseSkips(p2) >= 8 })
	h.add("resumed")
	pgtest.Must(t, c.Resume(ctx, "emails", ""))
	pgtest.Must(t, c.Resume(ctx, "emails", "")) // idempotent
	waitUntil(t, "every job completes", func() bool { return completed(t, pool, "pausable") == n })
	if err := noStartBetween(h.snapshot(), "paused", "resumed"); err != nil {
		t.Fatalf("a job started while the group was paused: %v", err)
	}
}

// Pausing a kind leaves the group's other kinds running, except the jobs
// queued behind a paused job of their key (strict order); resuming it
// runs them, in key order.
func TestPauseKind(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	pgtest.Must(t, c.Pause(ctx, "emails", "pausable", ""))
	var h history
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[pausable]) error {
		h.add(fmt.Sprintf("start pausable %d", w.Args.N))
		return nil
	})
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[other]) error {
		h.add(fmt.Sprintf("start other %d", w.Args.N))
		return nil
	})
	_, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: "k", Args: pausable{N: 1}},
		queue.Job{Group: "emails", Key: "k", Args: other{N: 2}}, // behind a paused job
		queue.Job{Group: "emails", Args: other{N: 3}},
		queue.Job{Group: "emails", Args: pausable{N: 4}})
	pgtest.Must(t, err)
	h.add("paused")
	p, _ := pauseMember(t, pool, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond}, true)
	waitUntil(t, "the unpaused keyless job completes", func() bool { return completed(t, pool, "other") == 1 })
	polls := queue.PausePolls(p)
	waitUntil(t, "a few more polls", func() bool { return queue.PausePolls(p) >= polls+2 })
	h.add("resumed")
	pgtest.Must(t, c.Resume(ctx, "emails", "pausable"))
	waitUntil(t, "every job completes", func() bool { return completed(t, pool, "other")+completed(t, pool, "pausable") == 4 })
	events := h.snapshot()
	want := []string{"start other 3", "resumed"}
	if len(events) < 3 || events[1] != want[0] || events[2] != want[1] {
		t.Fatalf("history %v: want only the keyless job of the other kind to run while paused", events)
	}
	if index(events, "start pausable 1") > index(events, "start other 2") {
		t.Fatalf("history %v: the key's jobs ran out of order", events)
	}
}

func TestPauseInput(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	_, c := setup(t)
	if err := c.Pause(ctx, "nope", "", ""); !errors.Is(err, queue.ErrUnknownGroup) {
		t.Fatalf("unknown group: %v; want ErrUnknownGroup", err)
	}
	if err := c.Resume(ctx, "nope", ""); !errors.Is(err, queue.ErrUnknownGroup) {
		t.Fatalf("unknown group: %v; want ErrUnknownGroup", err)
	}
	if err := c.Pause(ctx, "", "", ""); !errors.Is(err, queue.ErrInvalidPause) {
		t.Fatalf("empty group: %v; want ErrInvalidPause", err)
	}
	if err := c.Pause(ctx, "emails", string(make([]byte, 101)), ""); !errors.Is(err, queue.ErrInvalidPause) {
		t.Fatalf("long kind: %v; want ErrInvalidPause", err)
	}
}

// Jobs of another kind queued behind a paused kind's backlog longer than a
// fetch's capped walk are reached by walks that resume where the last one
// stopped, and run; no job of the paused kind runs. With BatchSize 5 a
// walk covers 40 rows per level; each partition has about 100 paused jobs
// ahead of the others. Without the resume positions the walk would never
// get past the first 40 and the test would time out.
func TestPauseKindBacklogWalkedInSteps(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	pgtest.Must(t, c.Pause(ctx, "emails", "pausable", ""))
	var ranPaused atomic.Int32
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[pausable]) error {
		ranPaused.Add(1)
		return nil
	})
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[other]) error { return nil })
	var jobs []queue.Job
	for i := range 800 {
		jobs = append(jobs, queue.Job{Group: "emails", Args: pausable{N: i}})
	}
	_, err := c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	jobs = jobs[:0]
	for i := range 40 {
		jobs = append(jobs, queue.Job{Group: "emails", Args: other{N: i}})
	}
	_, err = c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	pauseMember(t, pool, queue.ProcessorConfig{Workers: ws, BatchSize: 5, Window: 10, PollInterval: 20 * time.Millisecond}, false)
	waitUntil(t, "the other kind's jobs complete", func() bool { return completed(t, pool, "other") == 40 })
	if n := ranPaused.Load(); n != 0 {
		t.Fatalf("%d jobs of the paused kind ran", n)
	}
}

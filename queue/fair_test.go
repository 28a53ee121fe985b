package queue_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

type tenantJob struct{ Tenant string }

func (tenantJob) Kind() string { return "tenant" }

// A tenant's backlog does not hold up another tenant in the same
// partition: tenant a enqueues 3,000 jobs at once, tenant b one every 50
// ms while a's backlog drains (its jobs run one at a time, 2 ms each), and
// b's jobs start within a few fetches of their enqueue. Control: with fair
// turns off, b's jobs wait behind a's backlog (the window holds a's jobs
// only, fetched in run_at order).
func TestFairTurnsBetweenKeysOfAPartition(t *testing.T) {
	t.Parallel()
	for _, fair := range []bool{true, false} {
		t.Run(map[bool]string{true: "fair", false: "unfair control"}[fair], func(t *testing.T) {
			t.Parallel()
			waits := fairRun(t, fair)
			slices.Sort(waits)
			worst := waits[len(waits)-1]
			t.Logf("b's waits: median %v, worst %v (%d jobs)", waits[len(waits)/2], worst, len(waits))
			switch {
			case fair && worst > 500*time.Millisecond:
				t.Errorf("b's worst wait %v behind a's backlog; want under 500ms", worst)
			case !fair && worst < time.Second:
				t.Errorf("control: without fair turns b's worst wait was %v; want it behind a's backlog (over 1s)", worst)
			}
		})
	}
}

// fairRun runs the scenario and returns b's waits, from the return of its
// enqueue to its handler's call.
func fairRun(t *testing.T, fair bool) []time.Duration {
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	a := keysIn(0, 1, "tenant-a")[0]
	b := keysIn(0, 1, "tenant-b")[0]
	var mu sync.Mutex
	started := make(map[int]time.Time)
	enqueued := make(map[int]time.Time)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[tenantJob]) error {
		if w.Args.Tenant == "b" {
			mu.Lock()
			started[int(w.ID)] = time.Now()
			mu.Unlock()
			return nil
		}
		time.Sleep(2 * time.Millisecond)
		return nil
	})
	p, err := queue.NewProcessor(pgtest.Open(t, pool, leasehold.Config{Logger: quiet}), queue.ProcessorConfig{Workers: ws, PollInterval: 50 * time.Millisecond})
	pgtest.Must(t, err)
	if !fair {
		queue.Unfair(p)
	}
	for i := 0; i < 3000; i += 500 {
		jobs := make([]queue.Job, 500)
		for j := range jobs {
			jobs[j] = queue.Job{Group: "emails", Key: a, Args: tenantJob{Tenant: "a"}}
		}
		_, err := c.EnqueueMany(ctx, jobs...)
		pgtest.Must(t, err)
	}
	serveWith(t, pool, "emails", 8, p, false)
	time.Sleep(300 * time.Millisecond) // a's backlog is draining
	for range 30 {
		e, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: b, Args: tenantJob{Tenant: "b"}})
		pgtest.Must(t, err)
		mu.Lock()
		enqueued[int(e.ID)] = time.Now()
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	// Wait for b's jobs (behind a's backlog in the control: a few seconds).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := len(started)
		mu.Unlock()
		if n == len(enqueued) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of b's %d jobs started", n, len(enqueued))
		}
	}
	var waits []time.Duration
	for id, at := range enqueued {
		waits = append(waits, started[id].Sub(at))
	}
	return waits
}

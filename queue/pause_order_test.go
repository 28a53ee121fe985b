package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

type stepA struct {
	Name string `json:"name"`
}

func (stepA) Kind() string { return "order.a" }

type stepB struct {
	Name string `json:"name"`
}

func (stepB) Kind() string { return "order.b" }

// A key skipped because its next job's kind is paused, whose running job's
// commit then could not be recorded (the job cools, and the key is skipped
// for that), is still skipped when the kind is resumed: the job that cools
// is its key's first, and the resume must not let its later jobs through
// before it. (The resume dropped the key's skip while the job was still
// held, and the fetch, which leaves held jobs out, returned the later jobs.)
func TestResumeKeepsAKeyBehindItsCoolingJob(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	keys := keysIn(0, 2, "cool")
	var mu sync.Mutex
	var done []string // the runs that committed, in order
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	var once sync.Once
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[stepA]) error {
		if w.Args.Name == "first" {
			once.Do(func() {
				started <- struct{}{}
				<-release
			})
		}
		mu.Lock()
		done = append(done, w.Args.Name)
		mu.Unlock()
		return nil
	})
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[stepB]) error {
		mu.Lock()
		done = append(done, w.Args.Name)
		mu.Unlock()
		return nil
	})
	unrecorded := make(chan int64, 4)
	p, _ := groupMember(t, pool, "emails", 8, queue.ProcessorConfig{Workers: ws, PollInterval: 3 * time.Second,
		PauseInterval: 10 * time.Millisecond, Fence: lease.FenceConfig{LockTimeout: 20 * time.Millisecond},
		Hooks: queue.Hooks{OnJob: func(e queue.JobEvent) {
			if e.Outcome == queue.OutcomeUnrecorded {
				unrecorded <- e.ID
			}
		}}}, true)
	pgtest.Must(t, c.Pause(ctx, "emails", stepB{}.Kind(), "test"))
	waitUntil(t, "the pause seen", func() bool { return queue.PauseSeen(p, "emails", stepB{}.Kind()) })
	res, err := c.EnqueueMany(ctx, queue.Job{Group: "emails", Key: keys[0], Args: stepA{"first"}},
		queue.Job{Group: "emails", Key: keys[0], Args: stepB{"second"}},
		queue.Job{Group: "emails", Key: keys[0], Args: stepA{"third"}})
	pgtest.Must(t, err)
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the first job did not start")
	}
	// A fetch while the first job runs: the key's next job is of the
	// paused kind, so the key is skipped as paused.
	other, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: keys[1], Args: stepA{"other"}})
	pgtest.Must(t, err)
	waitJob(t, ctx, c, other.ID, queue.StateCompleted)
	// The first job's commit cannot lock the lease row for the fence check:
	// its outcome is unrecorded, and it cools.
	lock, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	_, err = lock.Exec(ctx, `SELECT FROM leasehold.leases WHERE name = $1 FOR UPDATE`, partition.LeaseName("emails", 0))
	pgtest.Must(t, err)
	close(release)
	select {
	case id := <-unrecorded:
		if id != res[0].ID {
			t.Fatalf("job %d unrecorded; want the first, %d", id, res[0].ID)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the first job's outcome was not unrecorded")
	}
	pgtest.Must(t, lock.Rollback(ctx))
	pgtest.Must(t, c.Resume(ctx, "emails", stepB{}.Kind()))
	for _, r := range res {
		waitJob(t, ctx, c, r.ID, queue.StateCompleted)
	}
	mu.Lock()
	defer mu.Unlock()
	var order []string
	for _, n := range done {
		if n != "other" {
			order = append(order, n)
		}
	}
	// "first" appears twice: its unrecorded run, then the one that
	// committed.
	want := []string{"first", "first", "second", "third"}
	if len(order) != len(want) {
		t.Fatalf("the key's runs were %v; want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("the key's runs were %v; want %v (its first job before its later ones)", order, want)
		}
	}
}

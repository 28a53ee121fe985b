package queue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// Keyless jobs are spread over the partitions round robin, and none waits
// for another: a keyless job that fails (retrying in an hour) or is
// scheduled for later holds up no other keyless job. The same jobs sharing
// one key wait behind the failing one: the control that the check catches
// a job held up.
func TestKeylessJobsSpreadAndNeverWait(t *testing.T) {
	t.Parallel()
	for _, keyed := range []bool{false, true} {
		t.Run(map[bool]string{false: "keyless", true: "one key (control)"}[keyed], func(t *testing.T) {
			t.Parallel()
			ctx := pgtest.Context(t)
			pool, c := setup(t)
			ws := queue.NewWorkers()
			queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
				if w.Args.Name == "fail" {
					return errors.New("down for an hour")
				}
				return nil
			})
			key := ""
			if keyed {
				key = "k"
			}
			first := []queue.Job{
				{Group: "emails", Key: key, Args: step{"fail"}},
				{Group: "emails", Key: key, Args: step{"later"}, RunAt: time.Now().Add(time.Hour)},
			}
			_, err := c.EnqueueMany(ctx, first...)
			pgtest.Must(t, err)
			var rest []queue.Job
			for range 64 {
				rest = append(rest, queue.Job{Group: "emails", Key: key, Args: step{"ok"}})
			}
			res, err := c.EnqueueMany(ctx, rest...)
			pgtest.Must(t, err)
			if !keyed {
				per := map[int]int{}
				for _, r := range res {
					per[r.Partition]++
				}
				for p := range 8 {
					if per[p] != 8 {
						t.Fatalf("64 keyless jobs per partition: %v; want 8 in each of the 8", per)
					}
				}
			}
			member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
				MinRetry: time.Hour, MaxRetry: time.Hour}, true)
			var done int
			within := 10 * time.Second
			if keyed {
				within = 2 * time.Second // the keyless case shows they would have finished by then
			}
			for start := time.Now(); time.Since(start) < within; time.Sleep(20 * time.Millisecond) {
				pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE state = 'completed'`).Scan(&done))
				if done == len(rest) {
					break
				}
			}
			switch {
			case !keyed && done != len(rest):
				t.Fatalf("%d of %d keyless jobs completed beside a failing and a scheduled one; want all", done, len(rest))
			case keyed && done != 0:
				t.Fatalf("%d jobs of one key completed behind a failing one; want none (strict order)", done)
			}
		})
	}
}

// A keyed job enqueued OrderNonBlocking steps out of line while it waits
// (here: snoozed), so the later jobs of its key run meanwhile; the same job
// OrderStrict keeps them waiting until it has run again.
func TestNonBlockingJobStepsAside(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var mu sync.Mutex
	var ran []string
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		mu.Lock()
		defer mu.Unlock()
		if w.Args.Name[1:] == "-first" && w.Attempt == 1 && !contains(ran, w.Args.Name+"-snoozed") {
			ran = append(ran, w.Args.Name+"-snoozed")
			return queue.Snooze(500 * time.Millisecond)
		}
		ran = append(ran, w.Args.Name)
		return nil
	})
	_, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: "n", Args: step{"n-first"}, Ordering: queue.OrderNonBlocking},
		queue.Job{Group: "emails", Key: "n", Args: step{"n-second"}},
		queue.Job{Group: "emails", Key: "s", Args: step{"s-first"}},
		queue.Job{Group: "emails", Key: "s", Args: step{"s-second"}},
	)
	pgtest.Must(t, err)
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond}, true)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if i, j := index(ran, "n-second"), index(ran, "n-first"); i < 0 || j < 0 || i > j {
		t.Errorf("ran %v; want n-second before the snoozed non-blocking n-first ran again", ran)
	}
	if i, j := index(ran, "s-first"), index(ran, "s-second"); i < 0 || j < 0 || i > j {
		t.Errorf("ran %v; want s-second after the snoozed strict s-first", ran)
	}
}

func contains(xs []string, x string) bool { return index(xs, x) >= 0 }

// JobInfo names the job a pending keyed job waits behind: the earlier
// pending job of its key that holds its place (a strict one, scheduled for
// later) or is due. A non-blocking job that waits holds nothing, and a
// keyless job never waits.
func TestJobInfoWaitingBehind(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	_, c := setup(t)
	later := time.Now().Add(time.Hour)
	res, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: "s", Args: step{"1"}, RunAt: later},
		queue.Job{Group: "emails", Key: "s", Args: step{"2"}},
		queue.Job{Group: "emails", Key: "n", Args: step{"1"}, RunAt: later, Ordering: queue.OrderNonBlocking},
		queue.Job{Group: "emails", Key: "n", Args: step{"2"}},
		queue.Job{Group: "emails", Key: "n", Args: step{"3"}},
		queue.Job{Group: "emails", Args: step{"keyless"}},
	)
	pgtest.Must(t, err)
	want := []int64{0, res[0].ID, 0, 0, res[3].ID, 0}
	for i, r := range res {
		info, err := c.JobInfo(ctx, r.ID)
		pgtest.Must(t, err)
		if info.WaitingBehind != want[i] {
			t.Errorf("job %d (%d of the batch): WaitingBehind %d; want %d", r.ID, i, info.WaitingBehind, want[i])
		}
	}
	info, err := c.JobInfo(ctx, res[2].ID)
	pgtest.Must(t, err)
	if info.Ordering != queue.OrderNonBlocking {
		t.Errorf("Ordering stored as %v; want non-blocking", info.Ordering)
	}
	if _, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "x", Args: step{"x"}, Ordering: 7}); !errors.Is(err, queue.ErrInvalidJob) {
		t.Errorf("an unknown Ordering: %v; want ErrInvalidJob", err)
	}
}

// Waits lists the keys held up by a job that is not due, with how many due
// jobs wait behind it; a non-blocking job and a key whose next job is due
// hold nothing.
func TestWaitsListsHeldUpKeys(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	_, c := setup(t)
	later := time.Now().Add(time.Hour)
	res, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: "s", Args: step{"1"}, RunAt: later},
		queue.Job{Group: "emails", Key: "s", Args: step{"2"}},
		queue.Job{Group: "emails", Key: "s", Args: step{"3"}},
		queue.Job{Group: "emails", Key: "t", Args: step{"1"}, RunAt: later},
		queue.Job{Group: "emails", Key: "t", Args: step{"2"}},
		queue.Job{Group: "emails", Key: "n", Args: step{"1"}, RunAt: later, Ordering: queue.OrderNonBlocking},
		queue.Job{Group: "emails", Key: "n", Args: step{"2"}},
		queue.Job{Group: "emails", Key: "d", Args: step{"1"}},
		queue.Job{Group: "emails", Key: "d", Args: step{"2"}},
	)
	pgtest.Must(t, err)
	ws, err := c.Waits(ctx, "emails", 0)
	pgtest.Must(t, err)
	if len(ws) != 2 || ws[0].Key != "s" || ws[0].JobID != res[0].ID || ws[0].Waiting != 2 ||
		ws[1].Key != "t" || ws[1].JobID != res[3].ID || ws[1].Waiting != 1 || !ws[0].RunAt.After(time.Now()) {
		t.Fatalf("Waits = %+v; want s behind job %d (2 waiting), t behind job %d (1 waiting)", ws, res[0].ID, res[3].ID)
	}
	if _, err := c.Waits(ctx, "emails", -1); !errors.Is(err, queue.ErrInvalidFilter) {
		t.Errorf("limit -1: %v; want ErrInvalidFilter", err)
	}
}

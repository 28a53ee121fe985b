package queue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// runLog records the runs of jobs, by job id, in the order they started.
type runLog struct {
	mu   sync.Mutex
	runs map[int64][]int // attempts of each run, by job id
	ends map[int64]int   // runs that returned nil
}

func newRunLog() *runLog { return &runLog{runs: map[int64][]int{}, ends: map[int64]int{}} }

func (l *runLog) start(id int64, attempt int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[id] = append(l.runs[id], attempt)
}

func (l *runLog) end(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ends[id]++
}

func (l *runLog) count(id int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.runs[id])
}

// onceEach checks the invariant of a handoff: each job in once ran exactly
// once; each job in twice ran twice, both as attempt 1 (the interrupted run
// spent nothing) and returned nil once.
func onceEach(l *runLog, once, twice []int64) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var bad []string
	for _, id := range once {
		if fmt.Sprint(l.runs[id]) != "[1]" || l.ends[id] != 1 {
			bad = append(bad, fmt.Sprintf("job %d: runs with attempts %v, %d successful; want one run", id, l.runs[id], l.ends[id]))
		}
	}
	for _, id := range twice {
		if fmt.Sprint(l.runs[id]) != "[1 1]" || l.ends[id] != 1 {
			bad = append(bad, fmt.Sprintf("job %d: runs with attempts %v, %d successful; want two runs as attempt 1, one successful", id, l.runs[id], l.ends[id]))
		}
	}
	return bad
}

// The checker of the handoff test catches a job run twice, and a job
// interrupted that was charged an attempt.
func TestOnceEachCatchesViolations(t *testing.T) {
	l := newRunLog()
	l.start(1, 1)
	l.end(1)
	l.start(1, 1) // a finished job run again
	l.end(1)
	l.start(2, 1)
	l.start(2, 2) // an interruption charged
	l.end(2)
	if bad := onceEach(l, []int64{1}, []int64{2}); len(bad) != 2 {
		t.Fatalf("violations %v; want 2", bad)
	}
}

// A handoff in the middle of a window records each job that finished
// once, and reruns only the unfinished ones: those running (interrupted,
// without spending an attempt) and those queued behind a running job of
// their key. The finished jobs' outcomes were recorded as they came, by the
// grant that ran them.
func TestHandoffMidWindowRecordsFinishedJobsOnce(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	keys := keysIn(0, 16, "window")
	l := newRunLog()
	slowRunning := make(chan int64, 16)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		l.start(w.ID, w.Attempt)
		if w.Args.Name == "slow" && l.count(w.ID) == 1 {
			slowRunning <- w.ID
			<-ctx.Done() // until the handoff
			return ctx.Err()
		}
		l.end(w.ID)
		return nil
	})
	// 10 keys with a fast job; 6 keys with a slow job and a fast one
	// behind it.
	var jobs []queue.Job
	for i, k := range keys {
		jobs = append(jobs, queue.Job{Group: "emails", Key: k, Args: step{"fast"}})
		if i >= 10 {
			jobs[len(jobs)-1].Args = step{"slow"}
			jobs = append(jobs, queue.Job{Group: "emails", Key: k, Args: step{"behind"}})
		}
	}
	res, err := c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	var fast, unfinished []int64
	for i, r := range res {
		if jobs[i].Args.(step).Name == "fast" {
			fast = append(fast, r.ID)
		}
	}
	a := newAfterCrash(t, ctx, pool, false)
	// The window holds every job, so all six slow jobs run at once whatever
	// the fetches return: with a smaller window, the refill rule (a window
	// pinned by running jobs refills once half of it is free) could leave a
	// slow job out until the others time out, on a loaded machine.
	handoff, done := a.run(ctx, queue.ProcessorConfig{Workers: ws, Window: len(jobs), StopGrace: time.Hour})
	for range 6 {
		unfinished = append(unfinished, <-slowRunning)
	}
	for _, id := range fast {
		waitJob(t, ctx, c, id, "completed") // recorded while the slow jobs still run
	}
	handoff(partition.ErrHandoff)
	a.wait(done)
	if n := mark(t, ctx, pool); n != 0 {
		t.Errorf("the handed-off run left its mark open (token %d): it did not end cleanly", n)
	}
	takeover(t, ctx, pool, ws)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	if bad := onceEach(l, fast, unfinished); len(bad) > 0 {
		t.Fatalf("after a handoff mid-window: %v", bad)
	}
	// The jobs behind the slow ones ran once, after them (the new owner's).
	for i, r := range res {
		if jobs[i].Args.(step).Name != "behind" {
			continue
		}
		if n := l.count(r.ID); n != 1 {
			t.Errorf("job %d behind a slow job ran %d times; want 1", r.ID, n)
		}
		info, err := c.JobInfo(ctx, r.ID)
		pgtest.Must(t, err)
		if info.FinishedToken == nil || *info.FinishedToken == a.lease.Token() {
			t.Errorf("job %d behind a slow job was finished by token %v; want the new owner's", r.ID, info.FinishedToken)
		}
	}
}

// A plain job that stalls past its lease voids only its own outcome: the
// jobs that finished beside it are recorded while it runs and do not run
// again under the next owner. (Batch-at-a-time processing recorded them
// with the stalled job, so all ran again.)
func TestStalledJobVoidsOnlyItsOwnOutcome(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	keys := keysIn(0, 5, "stall")
	l := newRunLog()
	stalled, resume := make(chan struct{}), make(chan struct{})
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		l.start(w.ID, w.Attempt)
		if w.Args.Name == "stall" && l.count(w.ID) == 1 {
			close(stalled)
			<-resume // ignores its context: a zombie
		}
		l.end(w.ID)
		return nil
	})
	var jobs []queue.Job
	for i, k := range keys {
		name := "fast"
		if i == 2 {
			name = "stall"
		}
		jobs = append(jobs, queue.Job{Group: "emails", Key: k, Args: step{name}})
	}
	res, err := c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	a := newAfterCrash(t, ctx, pool, false)
	_, done := a.run(ctx, queue.ProcessorConfig{Workers: ws})
	<-stalled
	var fast []int64
	for i, r := range res {
		if i != 2 {
			fast = append(fast, r.ID)
			waitJob(t, ctx, c, r.ID, "completed")
		}
	}
	takeover(t, ctx, pool, ws) // the lease expires under the stalled job
	waitJob(t, ctx, c, res[2].ID, "completed")
	close(resume)
	a.wait(done) // its late completion is refused, and the Run returns
	if bad := onceEach(l, fast, nil); len(bad) > 0 {
		t.Fatalf("%v", bad)
	}
	info, err := c.JobInfo(ctx, res[2].ID)
	pgtest.Must(t, err)
	if n := l.count(res[2].ID); n != 2 || info.FinishedToken == nil || *info.FinishedToken == a.lease.Token() {
		t.Errorf("the stalled job ran %d times and was finished by token %v; want 2 runs, finished by the new owner", n, info.FinishedToken)
	}
}

// A completion statement that fails (here: a lock timeout on the lease row,
// held by another transaction) is retried until it succeeds: the plain job's
// outcome is recorded once it can be, and the job does not run again. (Had
// the completer dropped the outcome, the job would stay pending and run a
// second time.)
func TestFailedCompletionIsRetried(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	l := newRunLog()
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		l.start(w.ID, w.Attempt)
		l.end(w.ID)
		return nil
	})
	a := newAfterCrash(t, ctx, pool, false)
	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(context.Background()) // on failure: frees the row and the connection
	_, err = tx.Exec(ctx, `SELECT FROM leasehold.leases WHERE name = $1 FOR UPDATE`, a.lease.Name())
	pgtest.Must(t, err)
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: keysIn(0, 1, "retry")[0], Args: step{"x"}})
	pgtest.Must(t, err)
	a.run(ctx, queue.ProcessorConfig{Workers: ws, Fence: lease.FenceConfig{LockTimeout: 20 * time.Millisecond}})
	for start := time.Now(); l.count(res.ID) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the job did not run")
		}
	}
	time.Sleep(300 * time.Millisecond) // several completion statements time out meanwhile
	if info, err := c.JobInfo(ctx, res.ID); err != nil || info.State != "pending" {
		t.Fatalf("job %+v, %v while its completion cannot lock the lease row; want pending", info, err)
	}
	pgtest.Must(t, tx.Rollback(ctx))
	if info := waitJob(t, ctx, c, res.ID, "completed"); info.Attempt != 1 || *info.FinishedToken != a.lease.Token() {
		t.Errorf("job completed on attempt %d by token %v; want attempt 1 by the running grant %d", info.Attempt, *info.FinishedToken, a.lease.Token())
	}
	if bad := onceEach(l, []int64{res.ID}, nil); len(bad) > 0 {
		t.Errorf("%v", bad)
	}
}

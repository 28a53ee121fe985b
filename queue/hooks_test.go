package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// The hook reports each outcome as recorded: a snooze spends no attempt and
// is reported snoozed; a failure is reported retried; a job whose kind has
// no handler is reported snoozed.
func TestHookReportsSnoozesAndRetries(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var calls atomic.Int32
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		switch calls.Add(1) {
		case 1:
			return queue.Snooze(time.Millisecond)
		case 2:
			return errors.New("boom")
		}
		return nil
	})
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: step{"x"}})
	pgtest.Must(t, err)
	orphanRes, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "o", Args: orphan{}})
	pgtest.Must(t, err)
	var mu sync.Mutex
	var events []queue.JobEvent
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		MinRetry: time.Millisecond, MaxRetry: time.Millisecond, UnknownKindDelay: time.Hour,
		Hooks: queue.Hooks{OnJob: func(e queue.JobEvent) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}}}, false)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		info, err := c.JobInfo(ctx, res.ID)
		pgtest.Must(t, err)
		mu.Lock()
		n := len(events)
		mu.Unlock()
		if info.State == "completed" && n == 4 {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("job %s, %d events", info.State, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var got []string
	for _, e := range events {
		if e.ID == orphanRes.ID {
			got = append([]string{fmt.Sprint("orphan ", e.Outcome, " ", e.Attempt)}, got...)
			continue
		}
		got = append(got, fmt.Sprint(e.Outcome, " ", e.Attempt))
	}
	if want := "[orphan snoozed 1 snoozed 1 retried 1 completed 2]"; fmt.Sprint(got) != want {
		t.Fatalf("events %v; want %s", got, want)
	}
}

// A handler's context is cancelled when its grant's lease ends (here:
// released), with the lease's cause, even while Run's context is not; the
// run, plain or transactional, is reported interrupted and spends no
// attempt.
func TestLeaseEndCancelsHandlers(t *testing.T) {
	t.Parallel()
	for _, tx := range []bool{false, true} {
		t.Run(fmt.Sprint("tx=", tx), func(t *testing.T) {
			t.Parallel()
			ctx := pgtest.Context(t)
			pool, c := setup(t)
			res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: keysIn(0, 1, "lease")[0], Args: step{"x"}})
			pgtest.Must(t, err)
			lc, err := lease.New(pgtest.DBOn(t, pool), lease.Config{Owner: "a"})
			pgtest.Must(t, err)
			t.Cleanup(func() { lc.Close(context.Background()) })
			l, err := lc.TryAcquire(ctx, "partition/emails/0")
			pgtest.Must(t, err)
			started, cause := make(chan struct{}), make(chan error, 1)
			wait := func(hctx context.Context) error {
				close(started)
				select {
				case <-hctx.Done():
					cause <- context.Cause(hctx)
					return hctx.Err()
				case <-ctx.Done():
					cause <- errors.New("not cancelled")
					return ctx.Err()
				}
			}
			ws := queue.NewWorkers()
			if tx {
				queue.HandleTx(ws, func(hctx context.Context, _ pgx.Tx, w *queue.Work[step]) error { return wait(hctx) })
			} else {
				queue.Handle(ws, func(hctx context.Context, w *queue.Work[step]) error { return wait(hctx) })
			}
			var mu sync.Mutex
			var events []queue.JobEvent
			p, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws, PollInterval: time.Hour,
				Hooks: queue.Hooks{OnJob: func(e queue.JobEvent) {
					mu.Lock()
					events = append(events, e)
					mu.Unlock()
				}}})
			pgtest.Must(t, err)
			rctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				p.Run(rctx, partition.Ownership{Group: "emails", Partition: 0, Token: l.Token(), Lease: l})
			}()
			<-started
			pgtest.Must(t, l.Release(ctx))
			if err := <-cause; !errors.Is(err, lease.ErrReleased) {
				t.Errorf("handler's context ended with %v; want lease.ErrReleased", err)
			}
			stop()
			<-done
			info, err := c.JobInfo(ctx, res.ID)
			pgtest.Must(t, err)
			if info.State != "pending" || info.Attempt != 0 {
				t.Errorf("job %s after %d attempts; want pending, no attempt spent", info.State, info.Attempt)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(events) != 1 || events[0].Outcome != queue.OutcomeInterrupted {
				t.Errorf("events %+v; want one, interrupted", events)
			} else if events[0].Token != l.Token() || l.Token() == 0 {
				t.Errorf("event's token %v; want the grant's, %v", events[0].Token, l.Token())
			}
		})
	}
}

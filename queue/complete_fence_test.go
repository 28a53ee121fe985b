package queue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// A plain handler's fenced completion under a grant whose lease expired on
// the database clock while the handler ran, with nobody taking over (the
// lease row still carries the grant's token): the liveness condition of
// the completion statement must refuse it. The job stays pending, no
// attempt spent, no finished_token, and the run is reported fenced, by the
// locking check, because the lease expired; the report and the row agree.
// (Without the condition the statement commits the completion under the
// expired grant while the worker reports the run fenced.)
func TestPlainCompletionUnderAnExpiredGrantIsRefused(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	stalled, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		once.Do(func() { close(stalled) })
		<-resume // ignores ctx: the stalled holder
		return nil
	})
	var mu sync.Mutex
	var events []queue.JobEvent
	p, err := queue.NewProcessor(pgtest.Open(t, pool, leasehold.Config{Logger: quiet}), queue.ProcessorConfig{Workers: ws,
		PollInterval: 20 * time.Millisecond, MinRetry: 20 * time.Millisecond, MaxRetry: 50 * time.Millisecond,
		StopGrace: 200 * time.Millisecond,
		Hooks: queue.Hooks{OnJob: func(e queue.JobEvent) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}}})
	pgtest.Must(t, err)
	clk := fakeclock.New(time.Now())
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "emails", Partitions: 8, ID: "a", Run: p.Run,
		PollInterval: 100 * time.Millisecond, Lease: lease.Config{TTL: time.Second, Clock: clk}})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Stop(sctx)
	})
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "acct-1", Args: step{"stalls"}})
	pgtest.Must(t, err)
	tickUntil(t, clk, stalled) // then a's clock stands still: it neither renews nor notices
	var grant partition.Ownership
	for _, o := range m.Owned() {
		if o.Partition == res.Partition {
			grant = o
		}
	}
	if !grant.Token.Valid() {
		t.Fatalf("a owns %v; want partition %d", m.Owned(), res.Partition)
	}
	name := partition.LeaseName("emails", res.Partition)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		var expired bool
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT expires_at <= clock_timestamp() FROM leasehold.leases WHERE name = $1`, name).Scan(&expired))
		if expired {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the stalled grant's lease did not expire on the database clock")
		}
	}
	close(resume) // the handler returns nil; its completion runs under the expired grant

	var ev queue.JobEvent
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := len(events)
		if n > 0 {
			ev = events[0]
		}
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the run's outcome was never reported")
		}
	}
	var state string
	var attempt int
	var finished *int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT state, attempt, finished_token FROM leasehold.jobs WHERE id = $1`, res.ID).Scan(&state, &attempt, &finished))
	if state != "pending" || attempt != 0 || finished != nil {
		t.Fatalf("job after a completion under an expired grant: %s, attempt %d, finished_token %v; want pending, 0, none (the completion committed)",
			state, attempt, finished)
	}
	var fe *fence.FencedError
	if ev.ID != res.ID || ev.Outcome != queue.OutcomeFenced || ev.Token != grant.Token || !errors.As(ev.Err, &fe) ||
		fe.Check != fence.CheckLocking || !strings.Contains(fe.Reason, "expired") || fe.Current != grant.Token {
		t.Fatalf("reported %+v; want job %d fenced under token %v by the locking check, its lease expired (current token unchanged)",
			ev, res.ID, grant.Token)
	}
	var token int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT token FROM leasehold.leases WHERE name = $1`, name).Scan(&token))
	if fence.Token(token) != grant.Token {
		t.Fatalf("the lease row carries token %d; want the expired grant's %v (nobody took over)", token, grant.Token)
	}
}

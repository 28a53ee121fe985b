package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// A queue worker listens on one session, for its partition member and its
// queue both (each listening session is woken by every notification of
// the database), and none once stopped. Its notifications still reach
// both: a job enqueued with polling set to an hour runs at once.
func TestWorkerListensOnOneSession(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	ran := make(chan struct{}, 1)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[deposit]) error {
		ran <- struct{}{}
		return nil
	})
	cfg := worker.Config{Workers: ws}
	cfg.Queue.PollInterval = time.Hour
	w := start(t, pool, cfg)
	listening := func() (n int) {
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&n))
		return n
	}
	eventually(t, "a listening session after Start", func() bool { return listening() > 0 })
	time.Sleep(200 * time.Millisecond) // a second session would be up by now
	if n := listening(); n != 1 {
		t.Fatalf("%d listening sessions for one worker; want 1", n)
	}
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	if _, err := c.Enqueue(ctx, queue.Job{Group: "g", Key: "k", Args: deposit{}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a job enqueued did not run within 10s (PollInterval 1h): its notification was not taken")
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	pgtest.Must(t, w.Stop(sctx))
	eventually(t, "no listening session after Stop", func() bool { return listening() == 0 })
}

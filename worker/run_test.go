package worker_test

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// TestRunSecondSignalStopsHard checks Run's shutdown: once its context ends
// it stops gracefully, waiting for a running handler, and a SIGTERM during
// that stop makes it return at once.
func TestRunSecondSignalStopsHard(t *testing.T) {
	// Keep SIGTERM from killing the test binary before (or besides) Run's
	// own handler.
	guard := make(chan os.Signal, 16)
	signal.Notify(guard, syscall.SIGTERM)
	defer signal.Stop(guard)

	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	group(t, pool, 8)
	running := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[deposit]) error {
		running <- struct{}{}
		<-release // ignores its context: a graceful stop waits for it
		return nil
	})
	cfg := worker.Config{Group: "g", Partitions: 8, ID: "w1", Workers: ws,
		StopGrace: 30 * time.Second, HandoffTimeout: time.Minute}
	cfg.Lease.TTL = 30 * time.Second
	cfg.Queue.PollInterval = 50 * time.Millisecond
	w, err := worker.New(pgtest.DBOn(t, pool), cfg)
	pgtest.Must(t, err)

	rctx, first := context.WithCancel(ctx) // the first signal, as signal.NotifyContext gives it
	ran := make(chan error, 1)
	go func() { ran <- w.Run(rctx) }()
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	_, err = c.Enqueue(ctx, queue.Job{Group: "g", Key: "k", Args: deposit{0}})
	pgtest.Must(t, err)
	select {
	case <-running:
	case err := <-ran:
		t.Fatalf("Run returned before the job ran: %v", err)
	case <-ctx.Done():
		t.Fatal("the job never ran")
	}

	first()
	select {
	case err := <-ran:
		t.Fatalf("Run returned %v while a handler was still running, before a second signal: the stop was not graceful", err)
	case <-time.After(time.Second):
	}

	// The second signal. Run installs its handler when its stop begins, so
	// signal until it returns.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		pgtest.Must(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
		select {
		case err := <-ran:
			t.Logf("Run returned after the second signal: %v", err)
			return
		case <-deadline:
			t.Fatal("Run did not return within 20s of a second SIGTERM (its StopGrace is 30s)")
		case <-tick.C:
		}
	}
}

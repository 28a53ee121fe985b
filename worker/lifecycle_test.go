package worker_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// A second Start returns ErrStarted, a Start after Stop ErrStopped (both
// matching the shared leasehold sentinels), and a second Stop returns the
// first one's result, here an error, without stopping again.
func TestSecondStartAndSecondStop(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	w := start(t, pool, worker.Config{Workers: queue.NewWorkers(), Partitions: 2})

	err := w.Start(pgtest.Context(t))
	if err != worker.ErrStarted || !errors.Is(err, leasehold.ErrStarted) || errors.Is(err, leasehold.ErrStopped) {
		t.Errorf("second Start = %v; want worker.ErrStarted", err)
	}

	// A Stop whose context has already ended cannot leave the group in
	// time: it fails. The second Stop, with all the time it needs, must
	// return that same failure rather than stop again (or report success).
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	first := w.Stop(dead)
	if first == nil {
		t.Fatal("Stop with an ended context = nil; want it to report that it could not leave in time")
	}
	if err := w.Stop(pgtest.Context(t)); err != first {
		t.Errorf("second Stop = %v; want the first one's result %v", err, first)
	}

	err = w.Start(pgtest.Context(t))
	if err != worker.ErrStopped || !errors.Is(err, leasehold.ErrStopped) || errors.Is(err, leasehold.ErrStarted) {
		t.Errorf("Start after Stop = %v; want worker.ErrStopped", err)
	}
	if err := w.Ready(pgtest.Context(t)); !errors.Is(err, worker.ErrStopped) {
		t.Errorf("Ready after Stop = %v; want ErrStopped", err)
	}
}

// After a failed Start, and after a Stop before any Start, the Worker is
// stopped: Start returns ErrStopped and every Stop the same result.
func TestStartAfterAFailedStartOrAStopBeforeStart(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	pgtest.Must(t, err)
	defer busy.Close()
	failed, err := worker.New(pgtest.DBOn(t, pool), worker.Config{Group: "g", Workers: queue.NewWorkers(),
		Registerer: prometheus.NewRegistry(), MetricsAddr: busy.Addr().String()})
	pgtest.Must(t, err)
	if err := failed.Start(pgtest.Context(t)); err == nil {
		t.Fatal("Start on a busy metrics address = nil; want an error")
	}
	first := failed.Stop(pgtest.Context(t))
	if first != nil {
		t.Errorf("Stop after a failed Start = %v; want the clean-up's result, nil", first)
	}
	if err := failed.Stop(pgtest.Context(t)); err != first {
		t.Errorf("second Stop after a failed Start = %v; want %v", err, first)
	}
	if err := failed.Start(pgtest.Context(t)); err != worker.ErrStopped {
		t.Errorf("Start after a failed Start = %v; want ErrStopped", err)
	}

	never, err := worker.New(pgtest.DBOn(t, pool), worker.Config{Group: "g", Workers: queue.NewWorkers(),
		Registerer: prometheus.NewRegistry()})
	pgtest.Must(t, err)
	pgtest.Must(t, never.Stop(pgtest.Context(t)))
	pgtest.Must(t, never.Stop(pgtest.Context(t)))
	if err := never.Start(pgtest.Context(t)); err != worker.ErrStopped {
		t.Errorf("Start after a Stop before any Start = %v; want ErrStopped", err)
	}
}

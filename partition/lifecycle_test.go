package partition_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// A second Start returns ErrStarted, a Start after Stop ErrStopped (both
// matching the shared leasehold sentinels), and a second Stop returns the
// first one's result, here an error, without stopping again.
func TestSecondStartAndSecondStop(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	causes := make(chan error, 4)
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{
		Group: "g", Partitions: 2, ID: "worker-1",
		Run: func(ctx context.Context, o partition.Ownership) {
			<-ctx.Done()
			causes <- context.Cause(ctx)
		},
		Lease: lease.Config{TTL: testTTL},
	})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(pgtest.Context(t)))
	converged(t, pool, []string{"worker-1"}, 15*time.Second)

	err = m.Start(pgtest.Context(t))
	if err != partition.ErrStarted || !errors.Is(err, leasehold.ErrStarted) || errors.Is(err, leasehold.ErrStopped) {
		t.Errorf("second Start = %v; want partition.ErrStarted", err)
	}

	// A Stop whose context has already ended cannot leave the group: it
	// fails. The second Stop, with all the time it needs, must return that
	// same failure rather than stop again (or report success).
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	first := m.Stop(dead)
	if first == nil {
		t.Fatal("Stop with an ended context = nil; want it to report that it could not leave in time")
	}
	if err := m.Stop(pgtest.Context(t)); err != first {
		t.Errorf("second Stop = %v; want the first one's result %v", err, first)
	}

	err = m.Start(pgtest.Context(t))
	if err != partition.ErrStopped || !errors.Is(err, leasehold.ErrStopped) || errors.Is(err, leasehold.ErrStarted) {
		t.Errorf("Start after Stop = %v; want partition.ErrStopped", err)
	}
	// ErrStopped is still the cause of the Runs that Stop cancelled.
	for range 2 {
		select {
		case cause := <-causes:
			if cause != partition.ErrStopped || !errors.Is(cause, leasehold.ErrStopped) {
				t.Errorf("Run cancelled by Stop with cause %v; want partition.ErrStopped", cause)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("a Run was not cancelled by Stop")
		}
	}
}

// A Member whose Start failed is stopped: Start again returns ErrStopped,
// and every Stop returns the same result. So does a Member stopped before
// it was started.
func TestStartAfterAFailedStartOrAStopBeforeStart(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	startMember(t, pool, "worker-1", 4, (&recorder{}).run("worker-1"))
	quiet := lease.Config{}

	failed, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "g", Partitions: 8, ID: "worker-2",
		Run: (&recorder{}).run(""), Lease: quiet})
	pgtest.Must(t, err)
	if err := failed.Start(pgtest.Context(t)); !errors.Is(err, partition.ErrPartitionCount) {
		t.Fatalf("Start with another partition count = %v; want ErrPartitionCount", err)
	}
	if err := failed.Start(pgtest.Context(t)); err != partition.ErrStopped {
		t.Errorf("Start after a failed Start = %v; want ErrStopped", err)
	}
	first := failed.Stop(pgtest.Context(t))
	if err := failed.Stop(pgtest.Context(t)); err != first {
		t.Errorf("second Stop after a failed Start = %v; want the first one's result %v", err, first)
	}

	never, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "g", Partitions: 4, ID: "worker-3",
		Run: (&recorder{}).run(""), Lease: quiet})
	pgtest.Must(t, err)
	first = never.Stop(pgtest.Context(t))
	if first != nil {
		t.Errorf("Stop of a member never started = %v; want nil", first)
	}
	if err := never.Stop(pgtest.Context(t)); err != first {
		t.Errorf("second Stop of a member never started = %v; want %v", err, first)
	}
	if err := never.Start(pgtest.Context(t)); err != partition.ErrStopped {
		t.Errorf("Start after Stop of a member never started = %v; want ErrStopped", err)
	}
}

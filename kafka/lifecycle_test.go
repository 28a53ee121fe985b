package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/lease"
)

// A second Start returns ErrStarted, a Start after Stop ErrStopped (both
// matching the shared leasehold sentinels), and a second Stop returns the
// first one's result, here an error, without stopping again.
func TestSecondStartAndSecondStop(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 2, "t")
	pool := newLedger(t)
	c, err := kafka.New(pgtest.DBOn(t, pool), kafka.Config{Group: "g", Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 2,
		ID: "a", Handler: ledgerHandler("a"), Lease: lease.Config{TTL: 2 * time.Second}})
	pgtest.Must(t, err)
	pgtest.Must(t, c.Start(ctxT(t, 30*time.Second)))

	err = c.Start(ctxT(t, 30*time.Second))
	if err != kafka.ErrStarted || !errors.Is(err, leasehold.ErrStarted) || errors.Is(err, leasehold.ErrStopped) {
		t.Errorf("second Start = %v; want kafka.ErrStarted", err)
	}

	// A Stop whose context has already ended cannot hand off in time: it
	// fails. The second Stop, with all the time it needs, must return that
	// same failure rather than stop again (or report success).
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	first := c.Stop(dead)
	if first == nil {
		t.Fatal("Stop with an ended context = nil; want it to report that it could not hand off in time")
	}
	if err := c.Stop(ctxT(t, 10*time.Second)); err != first {
		t.Errorf("second Stop = %v; want the first one's result %v", err, first)
	}

	err = c.Start(ctxT(t, 30*time.Second))
	if err != kafka.ErrStopped || !errors.Is(err, leasehold.ErrStopped) || errors.Is(err, kafka.ErrStarted) {
		t.Errorf("Start after Stop = %v; want kafka.ErrStopped", err)
	}
}

// After a failed Start, and after a Stop before any Start, the Consumer is
// stopped: Start returns ErrStopped and every Stop the same result.
func TestStartAfterAFailedStartOrAStopBeforeStart(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 2, "t")
	pool := pgtest.Pool(t)
	cfg := kafka.Config{Group: "g", Topics: []string{"missing"}, Brokers: brokers, PartitionsPerTopic: 2,
		Handler: ledgerHandler("x")}
	failed, err := kafka.New(pgtest.DBOn(t, pool), cfg)
	pgtest.Must(t, err)
	if err := failed.Start(ctxT(t, 20*time.Second)); !errors.Is(err, kafka.ErrTopicNotFound) {
		t.Fatalf("Start with a missing topic = %v; want ErrTopicNotFound", err)
	}
	if err := failed.Start(ctxT(t, 20*time.Second)); err != kafka.ErrStopped {
		t.Errorf("Start after a failed Start = %v; want ErrStopped", err)
	}
	first := failed.Stop(ctxT(t, 10*time.Second))
	if first != nil {
		t.Errorf("Stop after a failed Start = %v; want the clean-up's result, nil", first)
	}
	if err := failed.Stop(ctxT(t, 10*time.Second)); err != first {
		t.Errorf("second Stop after a failed Start = %v; want %v", err, first)
	}

	cfg.Topics = []string{"t"}
	never, err := kafka.New(pgtest.DBOn(t, pool), cfg)
	pgtest.Must(t, err)
	pgtest.Must(t, never.Stop(ctxT(t, 10*time.Second)))
	pgtest.Must(t, never.Stop(ctxT(t, 10*time.Second)))
	if err := never.Start(ctxT(t, 20*time.Second)); err != kafka.ErrStopped {
		t.Errorf("Start after a Stop before any Start = %v; want ErrStopped", err)
	}
}

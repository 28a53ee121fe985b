package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/worker"
)

// A Kafka worker's Start that fails (a missing topic) leaves the worker
// stopped, with the worker's lifecycle answers (ErrStopped, matching the
// shared sentinel; every Stop the same result), and the consumer closed.
func TestAFailedStartLeavesTheKafkaWorkerStoppedAndTheConsumerClosed(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 2, "t")
	pool := pgtest.Pool(t)
	n := newNode(t, pool, "g", "a", kafka.Config{Topics: []string{"missing"}, Brokers: brokers, PartitionsPerTopic: 2},
		testLogger(t))
	if err := n.w.Start(pgtest.ContextFor(t, 20*time.Second)); !errors.Is(err, kafka.ErrTopicNotFound) {
		t.Fatalf("Start with a missing topic = %v; want ErrTopicNotFound", err)
	}
	if err := n.w.Start(pgtest.ContextFor(t, 20*time.Second)); err != worker.ErrStopped || !errors.Is(err, leasehold.ErrStopped) {
		t.Errorf("Start after a failed Start = %v; want worker.ErrStopped", err)
	}
	first := n.w.Stop(pgtest.ContextFor(t, 10*time.Second))
	if first != nil {
		t.Errorf("Stop after a failed Start = %v; want the clean-up's result, nil", first)
	}
	if err := n.w.Stop(pgtest.ContextFor(t, 10*time.Second)); err != first {
		t.Errorf("second Stop after a failed Start = %v; want %v", err, first)
	}
	if err := n.Ready(); !errors.Is(err, kafka.ErrNotOpen) {
		t.Errorf("consumer Ready after the failed Start = %v; want ErrNotOpen", err)
	}
}

// A Consumer is run by one worker at a time: a second worker's Start on a
// consumer in use fails with ErrInUse and takes nothing from the first,
// which keeps consuming. Once the first worker stops, a new worker runs
// the same consumer: it continues from the stored offsets, and the
// consumer's Stats keep counting.
func TestAConsumerRunsInOneWorkerAtATime(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 2, "t")
	pool := newLedger(t)
	first := start(t, pool, "g", "a", kafka.Config{Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 2})
	if err := first.Ready(); err != nil {
		t.Fatalf("Ready while its worker runs = %v", err)
	}

	db := pgtest.DBOn(t, pool)
	second, err := worker.New(db, worker.Config{Group: "g", ID: "b", Kafka: first.Consumer})
	pgtest.Must(t, err)
	if err := second.Start(pgtest.ContextFor(t, 20*time.Second)); !errors.Is(err, kafka.ErrInUse) {
		t.Fatalf("a second worker's Start on a consumer in use = %v; want ErrInUse", err)
	}
	produced := produce(t, brokers, "t", 0, 100)
	waitOffsets(t, pool, "g", "t", logEnds(produced), 30*time.Second)
	if err := first.Ready(); err != nil {
		t.Fatalf("the second worker's failed Start closed the first one's consumer: Ready = %v", err)
	}

	stop(t, first)
	if err := first.Ready(); !errors.Is(err, kafka.ErrNotOpen) {
		t.Errorf("Ready after its worker stopped = %v; want ErrNotOpen", err)
	}
	again, err := worker.New(db, worker.Config{Group: "g", ID: "c", Kafka: first.Consumer})
	pgtest.Must(t, err)
	pgtest.Must(t, again.Start(pgtest.ContextFor(t, 20*time.Second)))
	t.Cleanup(func() { stop(t, &node{w: again, id: "c"}) })
	produced = append(produced, produce(t, brokers, "t", 100, 100)...)
	waitOffsets(t, pool, "g", "t", logEnds(produced), 30*time.Second)
	if bad := checkLedger("t", produced, ledger(t, pool)); len(bad) > 0 {
		t.Fatalf("ledger violations: %v", bad)
	}
	// The counters follow each commit: the last batch may be counted just
	// after its offset shows.
	eventually(t, 30*time.Second, "Stats().Records counting both workers' records", func() bool {
		return first.Stats().Records == int64(len(produced))
	})
}

// Run refuses, returning at once, a partition when the consumer is not
// open, or one of a group other than the one it is open for: a consumer
// never consumes for a group it did not Open.
func TestRunRefusesWithoutOpenOrForAnotherGroup(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 1, "t")
	pool := newLedger(t)
	produceTo(t, brokers, "t", 0, 5)
	closed := newNode(t, pool, "g", "x", kafka.Config{Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 1},
		testLogger(t))
	ctx := context.Background() // never cancelled: only a refusal returns
	closed.Run(ctx, partition.Ownership{Group: "g", Partition: 0, Token: 1})

	// Open it for "g2" directly, as its worker's Start would.
	open := newNode(t, pool, "g2", "y", kafka.Config{Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 1},
		testLogger(t))
	pgtest.Must(t, open.Open(pgtest.ContextFor(t, 20*time.Second), "g2"))
	defer open.Close(context.Background())
	open.Run(ctx, partition.Ownership{Group: "other", Partition: 0, Token: 1})
	open.Run(ctx, partition.Ownership{Group: "g2", Partition: 1, Token: 1}) // not a slot of the consumer
	if n := len(ledger(t, pool)); n != 0 {
		t.Fatalf("%d records applied by refused Runs", n)
	}
}

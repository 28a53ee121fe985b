package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/worker"
)

// statsPoll is how often a Kafka worker turns its consumer's counters into
// history events.
const statsPoll = 50 * time.Millisecond

// Work runs a worker.Worker with a kafka.Consumer of the topic whose
// handler appends one ledger row per record in the batch's transaction (or,
// unfenced, on its own autocommit statement before the batch commits).
func (w *kafkaWorkload) Work(ctx context.Context, db *pgxpool.Pool, we WorkerEnv) error {
	q, err := render(we.Schema)
	if err != nil {
		return err
	}
	apply := q.kafkaApply
	handler := func(ctx context.Context, tx pgx.Tx, b *kafka.Batch) error {
		if ok, d := we.Stall(); ok {
			time.Sleep(d) // ignoring the context: a stuck call, a GC pause
		}
		offs := make([]int64, len(b.Records))
		for i, r := range b.Records {
			offs[i] = r.Offset
		}
		if we.Unfenced {
			// The control: the effect commits on its own, before the
			// batch's fenced offset advance, as a Kafka consumer writing to
			// a database and committing offsets afterwards does.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if _, err := db.Exec(actx, apply, b.Topic, b.Partition, int64(b.Token), we.ID, offs); err != nil {
				return err
			}
		} else if _, err := tx.Exec(context.WithoutCancel(ctx), apply, b.Topic, b.Partition, int64(b.Token), we.ID, offs); err != nil {
			return err
		}
		if len(offs) > 0 {
			hold(we, HandlerRun{Partition: int(b.Partition), Token: int64(b.Token), First: offs[0], Last: offs[len(offs)-1]})
		}
		return nil
	}
	return runKafka(ctx, db, we, kafkaRun{handler: handler})
}

// kafkaRun is what a Kafka worker process runs besides the consumer: its
// batch handler and, for kafka-out, the outbox's relay.
type kafkaRun struct {
	handler kafka.Handler
	// relay, if set, is the worker's kafka.Relay (worker.Config.Relay),
	// whose fenced and failed publishes are recorded as relay events.
	relay *kafka.Relay
	// beside, if set, runs once the worker started, until its context ends
	// (the kafka-out control's unsafe relay); it is waited for before the
	// worker stops.
	beside func(ctx context.Context, wk *worker.Worker)
}

// runKafka runs a worker.Worker with a kafka.Consumer of the topic whose
// handler is r.handler (and r's relay), recording the consumer's (and
// the relay's) counters as history events, until ctx ends; then it stops
// the worker gracefully.
func runKafka(ctx context.Context, db *pgxpool.Pool, we WorkerEnv, r kafkaRun) error {
	ttl := we.Lease.TTL
	if ttl == 0 {
		ttl = lease.DefaultTTL
	}
	h, err := workerHandle(db, we)
	if err != nil {
		return err
	}
	c, err := kafka.New(h, kafka.Config{
		Topics: []string{kafkaTopic}, Brokers: we.Brokers, PartitionsPerTopic: we.Partitions,
		Handler: r.handler, MaxBatch: 100,
		RetryMin: 100 * time.Millisecond, RetryMax: 2 * time.Second,
		// A stalled or paused handler's transaction stays open past the
		// TTL: keep it open so that its commit reaches the fence check.
		Fence: lease.FenceConfig{IdleTimeout: 4 * ttl},
	})
	if err != nil {
		return err
	}
	var wk *worker.Worker
	for {
		// A worker whose Start failed is stopped (and closed the
		// consumer): a new one runs the same consumer.
		wk, err = worker.New(h, worker.Config{
			Group: we.Group, ID: we.ID, Kafka: c, Relay: r.relay, Lease: we.Lease,
			MembershipPollInterval: 200 * time.Millisecond,
		})
		if err != nil {
			return err
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = wk.Start(sctx)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, kafka.ErrInvalidConfig) || errors.Is(err, worker.ErrInvalidConfig) {
			return err
		}
		// The database restarts, or is cut off: try again.
		we.Logger.Warn("chaos: the Kafka worker did not start; trying again", "err", err)
		if !sleepFor(ctx, 500*time.Millisecond) {
			return nil
		}
	}
	var (
		last      kafka.Stats
		lastRelay kafka.RelayStats
	)
	record := func() {
		s := c.Stats()
		for _, o := range []struct {
			outcome string
			n       int64
		}{{"completed", s.Batches - last.Batches}, {"fenced", s.Fenced - last.Fenced}, {"failed", s.Failed - last.Failed}} {
			for range o.n {
				we.Recorder.Record(Event{Type: EventCommit, Outcome: o.outcome})
			}
		}
		last = s
		if r.relay == nil {
			return
		}
		// Its publishes are recorded by OnPublish, at once (a relay kill
		// follows one).
		rs := r.relay.Stats()
		for range rs.Fenced - lastRelay.Fenced {
			we.Recorder.Record(Event{Type: EventRelay, Outcome: RelayFenced})
		}
		for range rs.Failed - lastRelay.Failed {
			we.Recorder.Record(Event{Type: EventRelay, Outcome: RelayFailed})
		}
		lastRelay = rs
	}
	var beside sync.WaitGroup
	if r.beside != nil {
		beside.Go(func() { r.beside(ctx, wk) })
	}
	t := time.NewTicker(statsPoll)
	defer t.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-t.C:
			record()
		}
	}
	beside.Wait()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*ttl+2*time.Second)
	defer cancel()
	err = wk.Stop(sctx)
	record()
	if err != nil {
		return fmt.Errorf("chaos: stop the Kafka worker: %w", err)
	}
	return nil
}

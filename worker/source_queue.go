package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// queueSource runs the queue's jobs of the owned partitions: a
// queue.Processor, and its Listen goroutine for enqueue notifications
// between open and close.
type queueSource struct {
	proc    *queue.Processor
	metrics *queueMetrics

	cancel context.CancelFunc // ends Listen; set by open
	done   chan struct{}      // closed when Listen returns
}

// newQueueSource builds the processor of cfg, whose running jobs may
// finish for grace at Stop. owned reports the worker's partitions, for the
// backlog gauges.
func newQueueSource(db, memberDB *leasehold.DB, cfg Config, grace time.Duration, labels prometheus.Labels,
	owned func() map[int]partition.Ownership) (*queueSource, error) {
	stats, err := queue.New(db, queue.Config{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	m := newQueueMetrics(labels, stats, cfg.Group, cfg.Workers, owned)
	qc := cfg.Queue
	qc.Workers = cfg.Workers
	qc.Concurrency, qc.PartitionConcurrency, qc.JobTimeout, qc.StopGrace =
		cfg.Concurrency, cfg.PartitionConcurrency, cfg.JobTimeout, grace
	qc.Hooks = m.hooks(qc.Hooks)
	// The slots of the kinds with a GroupConcurrency are leased as the
	// worker's partitions are (a Rand is not shared between lease
	// Clients; the hooks observe the partitions' leases only), on the
	// member's DB: their lease clients share the member's pool.
	qc.SlotLease, qc.SlotHandoffTimeout, qc.SlotDB = cfg.Lease, cfg.HandoffTimeout, memberDB
	qc.SlotLease.Hooks, qc.SlotLease.Rand = lease.Hooks{}, nil
	proc, err := queue.NewProcessor(db, qc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	m.depth.limited = proc.Limited
	return &queueSource{proc: proc, metrics: m, done: make(chan struct{})}, nil
}

func (s *queueSource) open(context.Context) error {
	lctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		s.proc.Listen(lctx)
	}()
	return nil
}

// joined records the kinds the worker handles, so that batch items of
// those kinds are accepted as soon as Start returns (queue.KindError).
func (s *queueSource) joined(ctx context.Context, group string) error {
	return s.proc.RecordKinds(ctx, group)
}

func (s *queueSource) run(ctx context.Context, o partition.Ownership) { s.proc.Run(ctx, o) }

// close ends Listen, waiting for it until ctx ends.
func (s *queueSource) close(ctx context.Context) error {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	select {
	case <-s.done:
	case <-ctx.Done():
	}
	return nil
}

func (s *queueSource) ready() error { return nil }

func (s *queueSource) collectors() []prometheus.Collector { return s.metrics.collectors() }

package worker

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/periodic"
	"github.com/leasehold/leasehold/queue"
)

// ErrInvalidConfig is wrapped by every configuration error of New.
var ErrInvalidConfig = errors.New("worker: invalid config")

// Config configures a Worker. The zero value of every optional field means
// its default.
//
// A worker runs one source on the partitions it owns: the queue's jobs
// (Workers) or a Kafka consumer (Kafka). Exactly one of the two is
// required. The fields marked "queue only" must be left zero with Kafka:
// New refuses them rather than ignore them.
type Config struct {
	// Group names the partition group the worker joins: with Workers, the
	// group whose jobs it runs; with Kafka, the consumer group (the key of
	// its stored offsets). It is created by the first worker that starts.
	// Required; 1 to 100 bytes.
	Group string
	// Partitions is the group's partition count, fixed when the group is
	// created: every worker of the group must use the same count (another
	// count is refused with a *partition.CountError). Use several times the
	// largest number of workers you expect. Defaults to
	// queue.DefaultPartitions (64), the count a producer gives
	// queue.Client.EnsureGroup to create the group first; with Kafka, to
	// Kafka.Partitions() (len(Topics) × PartitionsPerTopic), and any other
	// value is refused.
	Partitions int
	// ID identifies this worker in the group; unique among live workers.
	// Defaults to lease.DefaultOwner() (host name, process id and a random
	// suffix).
	ID string
	// Workers holds the job handlers, by kind: the worker runs the queue's
	// jobs of the partitions it owns. Two handlers for one kind are an
	// error wrapping queue.ErrDuplicateHandler. Exactly one of Workers and
	// Kafka is required; defaults to none.
	Workers *queue.Workers
	// Schedules are the group's periodic jobs (package periodic): every
	// worker of the group runs a periodic.Scheduler of them, and the one
	// holding the group's periodic lease enqueues each slot once. Their
	// leader lease uses Lease's TTL, RenewInterval, SafetyMargin, backoff
	// and Clock; slots come due by Lease.Clock; their fenced transactions
	// use Queue.Fence, and their enqueues Queue.TracerProvider and
	// Queue.Propagator. Queue only. Defaults to none.
	Schedules []periodic.Schedule
	// Kafka is the Kafka consumer the worker runs: it consumes the Kafka
	// partitions whose group partitions it owns (see package kafka).
	// Exactly one of Workers and Kafka is required; defaults to none. A
	// Consumer is run by one worker at a time.
	Kafka *kafka.Consumer
	// Relay publishes the group's fenced outbox (package outbox) to Kafka:
	// the records that handlers of this group's partitions appended with
	// outbox.Add, exactly once, each partition's by the worker that owns
	// it. Set it on every worker of a group whose handlers call
	// outbox.Add, queue or Kafka. A Relay is run by one worker at a time.
	// Defaults to none (appended records wait, and a warning is logged).
	Relay *kafka.Relay
	// Concurrency is how many handlers run at once in this worker, across
	// all its partitions. Transactional handlers each hold a connection of
	// the pool: size the pool accordingly. Queue only. Defaults to 100.
	Concurrency int
	// PartitionConcurrency is how many jobs of one partition run at once.
	// They are jobs without a key or of different keys: a key's jobs always
	// run one at a time, in order. Queue only. Defaults to Concurrency (no
	// cap below it); a larger value is capped at Concurrency, with a
	// warning.
	PartitionConcurrency int
	// JobTimeout bounds each run of a handler; a run that times out is a
	// failed attempt. Queue only. Defaults to 1m; negative means no
	// timeout.
	JobTimeout time.Duration
	// StopGrace is how long running jobs may still take after Stop begins
	// before their contexts are cancelled. It must be shorter than
	// HandoffTimeout. Queue only (Stop cancels a Kafka handler's context at
	// once; the batch it returns still commits). Defaults to
	// HandoffTimeout / 2.
	StopGrace time.Duration
	// HandoffTimeout bounds how long a partition that is handed off, or
	// given up at Stop, waits for its running jobs (or Kafka batch) before
	// its lease is released anyway (their late writes are then refused by
	// the fence). Defaults to the lease TTL.
	HandoffTimeout time.Duration
	// ConnMaxIdleTime is how long the queue's pool (a clone of the DB's
	// pool, of the worker's own) keeps a connection nobody used before
	// closing it. Queue only. Defaults to 1m: an idle worker then holds
	// about 3 server connections (16 workers x 256 partitions: 3.3 after
	// 2 idle minutes; 4.2 with 5m after 6 idle minutes; 6.4 with pgx's
	// 30m; docs/partitions.md); the price is that a burst after an idle
	// minute waits for connections to open (there, p99 480 ms over its
	// first 10 s, 126 ms with 5m, 80 ms with 30m). Negative keeps the DB
	// pool's own setting (pgx's default: 30m).
	ConnMaxIdleTime time.Duration
	// Lease configures the partition leases: TTL (defaults to 15s),
	// RenewInterval, SafetyMargin, Clock, Rand and Hooks. Its Owner must
	// be empty (ID applies).
	Lease lease.Config
	// Queue holds further processing settings: BatchSize, Window,
	// CompleteInterval, PollInterval, retry delays, UnknownKindDelay,
	// PauseInterval and KeyWeight (docs/control.md), Retention, RetentionInterval,
	// PublishInterval (docs/running.md), Fence timeouts, Hooks, Rand, and
	// TracerProvider and Propagator (docs/tracing.md). Its Workers,
	// Concurrency, PartitionConcurrency, JobTimeout, StopGrace, SlotLease,
	// SlotHandoffTimeout and SlotDB must be zero: the fields above set them
	// (the slots of a kind's Policy.GroupConcurrency are leased with Lease
	// and HandoffTimeout, on the worker's DB). Queue only (a Kafka consumer's
	// settings are its kafka.Config). Defaults as in
	// queue.ProcessorConfig.
	Queue queue.ProcessorConfig
	// MembershipPollInterval is how often the worker re-reads the group's
	// membership while it cannot listen for notifications; while it
	// listens, it reads on notifications and expiries, and at least every
	// max(MembershipPollInterval, Lease.TTL) (partition.Config.PollInterval).
	// Defaults to 1s.
	MembershipPollInterval time.Duration
	// MetricsAddr, if set, is the address (such as ":9090") of an HTTP
	// server started by Start and stopped by Stop, serving Handler:
	// /metrics, /healthz and /readyz. Defaults to none.
	MetricsAddr string
	// Registerer receives the worker's Prometheus metrics. Defaults to a
	// registry of the worker's own, served by Handler. A Registerer that
	// also implements prometheus.Gatherer is served by Handler.
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() (Config, error) {
	bad := func(field, reason string) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, reason)
	}
	switch {
	case c.Workers == nil && c.Kafka == nil:
		return c, bad("Workers/Kafka", "one of the two is required")
	case c.Workers != nil && c.Kafka != nil:
		return c, bad("Workers/Kafka", "set one of the two: a worker runs one source")
	case c.Partitions < 0:
		return c, bad("Partitions", "negative")
	case c.Concurrency < 0 || c.PartitionConcurrency < 0:
		return c, bad("Concurrency/PartitionConcurrency", "negative")
	case c.StopGrace < 0 || c.HandoffTimeout < 0 || c.MembershipPollInterval < 0:
		return c, bad("StopGrace/HandoffTimeout/MembershipPollInterval", "negative duration")
	case c.Lease.Owner != "":
		return c, bad("Lease.Owner", "must be empty: ID applies")
	case c.Queue.Workers != nil || c.Queue.Concurrency != 0 || c.Queue.PartitionConcurrency != 0 ||
		c.Queue.JobTimeout != 0 || c.Queue.StopGrace != 0 || c.Queue.SlotHandoffTimeout != 0 || c.Queue.SlotLease.TTL != 0 || c.Queue.SlotDB != nil:
		return c, bad("Queue", "Workers, Concurrency, PartitionConcurrency, JobTimeout, StopGrace, SlotLease, "+
			"SlotHandoffTimeout and SlotDB must be zero: set them in Config (Lease, HandoffTimeout)")
	}
	if c.Kafka != nil {
		if err := c.kafkaOnly(); err != nil {
			return c, err
		}
		c.Partitions = c.Kafka.Partitions()
	}
	if c.Partitions == 0 {
		c.Partitions = queue.DefaultPartitions
	}
	if c.ConnMaxIdleTime == 0 {
		c.ConnMaxIdleTime = time.Minute
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c, nil
}

// kafkaOnly refuses, with a Kafka consumer, the settings that only the
// queue source has, and a partition count other than the consumer's.
func (c Config) kafkaOnly() error {
	bad := func(field, reason string) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, reason)
	}
	switch n := c.Kafka.Partitions(); {
	case c.Partitions != 0 && c.Partitions != n:
		return bad("Partitions", fmt.Sprintf("%d, but the Kafka consumer's group has %d partitions "+
			"(len(Topics) × PartitionsPerTopic): leave it 0", c.Partitions, n))
	case c.Concurrency != 0:
		return bad("Concurrency", "queue only: must be zero with Kafka")
	case c.PartitionConcurrency != 0:
		return bad("PartitionConcurrency", "queue only: must be zero with Kafka")
	case c.JobTimeout != 0:
		return bad("JobTimeout", "queue only: must be zero with Kafka")
	case c.StopGrace != 0:
		return bad("StopGrace", "queue only: must be zero with Kafka")
	case c.ConnMaxIdleTime != 0:
		return bad("ConnMaxIdleTime", "queue only: must be zero with Kafka")
	case len(c.Schedules) != 0:
		return bad("Schedules", "queue only: must be empty with Kafka")
	case !reflect.ValueOf(c.Queue).IsZero():
		return bad("Queue", "queue only: must be zero with Kafka (the consumer's settings are its kafka.Config)")
	}
	return nil
}

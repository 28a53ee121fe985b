package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/backoff"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// Consumer consumes the partitions of its topics that this worker owns.
// Create it with New, Start it, and Stop it to hand its partitions off
// gracefully. A stopped Consumer cannot be restarted.
type Consumer struct {
	cfg    Config
	pool   *pgxpool.Pool
	member *partition.Member
	fence  *lease.Fence
	q      store.KafkaSQL
	retry  *backoff.Backoff
	log    *slog.Logger
	opts   []kgo.Opt // base options of every Kafka client

	admin *kgo.Client // metadata and offset listing; set by Start

	life lifecycle.Service // Start and Stop: once each, serialised

	ctx    context.Context // lifecycle of the metadata loop
	cancel context.CancelFunc
	loops  sync.WaitGroup

	mu      sync.Mutex
	counts  map[string]int // partitions per topic, from the last metadata read
	changed chan struct{}  // closed when counts change
	stalled map[topicPartition]*OffsetError
	owned   map[topicPartition]fence.Token

	batches, records, fenced, failed, resets atomic.Int64
}

type topicPartition struct {
	topic     string
	partition int32
}

// New returns a Consumer whose handlers write through pool. It validates
// cfg and does no I/O.
func New(db *leasehold.DB, cfg Config) (*Consumer, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *leasehold.DB", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	f, err := lease.NewFence(db, cfg.Fence)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	c := &Consumer{
		cfg: cfg, pool: db.Pool(), fence: f, q: st.Kafka,
		retry:   backoff.New(cfg.RetryMin, cfg.RetryMax, nil),
		log:     db.Logger().With("group", cfg.Group),
		counts:  map[string]int{},
		changed: make(chan struct{}),
		stalled: map[topicPartition]*OffsetError{},
		owned:   map[topicPartition]fence.Token{},
	}
	// Clipped: every owned partition appends its consume options to
	// c.opts concurrently, and spare capacity would let them write into
	// one shared array (one partition's client consuming another's).
	// franz-go's warnings first, so that a WithLogger in ClientOptions wins.
	c.opts = slices.Clip(append(append([]kgo.Opt{kgo.WithLogger(kgoLogger{c.log})}, cfg.ClientOptions...),
		kgo.SeedBrokers(cfg.Brokers...)))
	m, err := partition.New(db, partition.Config{
		Group:          cfg.Group,
		Partitions:     len(cfg.Topics) * cfg.PartitionsPerTopic,
		ID:             cfg.ID,
		Run:            c.run,
		Lease:          cfg.Lease,
		PollInterval:   cfg.PollInterval,
		HandoffTimeout: cfg.HandoffTimeout,
	})
	if err != nil {
		return nil, err
	}
	c.member = m
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Start reads the topics' metadata (every topic must exist and have at most
// PartitionsPerTopic partitions), then joins the group: from then on the
// partitions this worker owns are consumed. ctx bounds the start-up only.
// If Start fails, the Consumer is stopped. A second Start returns
// ErrStarted; a Start on a stopped Consumer returns ErrStopped. A Stop
// during Start waits for it.
func (c *Consumer) Start(ctx context.Context) error {
	return c.life.Start(ctx, lifecycle.Refusals{Started: ErrStarted, Stopped: ErrStopped}, c.start, c.shutdown)
}

// start is Start's work, run once.
func (c *Consumer) start(ctx context.Context) error {
	admin, err := kgo.NewClient(c.opts...)
	if err != nil {
		return fmt.Errorf("%w: Kafka client: %v", ErrInvalidConfig, err)
	}
	c.admin = admin
	if err := consumingOption(admin); err != nil {
		return err
	}
	if err := c.refresh(ctx, true); err != nil {
		return err
	}
	if err := c.member.Start(ctx); err != nil {
		return err
	}
	c.loops.Add(1)
	go func() {
		defer c.loops.Done()
		c.metadataLoop()
	}()
	c.log.Info("kafka: consumer started", "member", c.member.ID(), "topics", c.cfg.Topics,
		"partitions_per_topic", c.cfg.PartitionsPerTopic)
	return nil
}

// Stop hands the owned partitions off gracefully, bounded by ctx: each
// partition's consumption stops, a batch being handled finishes (and
// commits, fenced) or rolls back, and the leases are released so other
// workers take over at once. Stop on a Consumer that was never started
// only releases its resources; Stop after a failed Start returns the error
// of the clean-up that Start ran. A second Stop returns the first one's
// result.
func (c *Consumer) Stop(ctx context.Context) error {
	return c.life.Stop(ctx, c.shutdown, func(ctx context.Context) error {
		c.cancel()
		return c.member.Stop(ctx)
	})
}

func (c *Consumer) shutdown(ctx context.Context) error {
	err := c.member.Stop(ctx)
	c.cancel()
	c.loops.Wait()
	if c.admin != nil {
		c.admin.Close()
	}
	return err
}

// ID returns the worker's member id.
func (c *Consumer) ID() string { return c.member.ID() }

// Stats is a snapshot of a Consumer's counters since New.
type Stats struct {
	// Batches and Records count committed batches and their records.
	Batches, Records int64
	// Fenced counts commits refused because a newer owner holds the
	// partition (the batch rolled back).
	Fenced int64
	// Failed counts batches rolled back for any other reason (handler
	// error, database error); they are handled again.
	Failed int64
	// Resets counts stored offsets outside the log that were reset to the
	// earliest or latest offset (OutOfRangeEarliest, OutOfRangeLatest).
	Resets int64
	// Owned maps each Kafka partition ("topic/partition") this worker
	// consumes now to its token.
	Owned map[string]fence.Token
	// Stalled lists the owned partitions whose stored offset is outside
	// the log under OutOfRangeFail: they are not consumed.
	Stalled []*OffsetError
}

// Stats returns the consumer's counters.
func (c *Consumer) Stats() Stats {
	s := Stats{Batches: c.batches.Load(), Records: c.records.Load(), Fenced: c.fenced.Load(),
		Failed: c.failed.Load(), Resets: c.resets.Load(), Owned: map[string]fence.Token{}}
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp, t := range c.owned {
		s.Owned[fmt.Sprintf("%s/%d", tp.topic, tp.partition)] = t
	}
	for _, e := range c.stalled {
		s.Stalled = append(s.Stalled, e)
	}
	return s
}

// slot maps a group partition to its Kafka topic and partition.
func (c *Consumer) slot(p int) (string, int32) {
	return c.cfg.Topics[p/c.cfg.PartitionsPerTopic], int32(p % c.cfg.PartitionsPerTopic)
}

// Slot returns the group partition that consumes Kafka partition p of
// topic, or -1 if the consumer does not consume it.
func (c *Consumer) Slot(topic string, p int32) int {
	for i, t := range c.cfg.Topics {
		if t == topic && p >= 0 && int(p) < c.cfg.PartitionsPerTopic {
			return i*c.cfg.PartitionsPerTopic + int(p)
		}
	}
	return -1
}

// consumingOption refuses ClientOptions that make a client consume by
// itself (a consumer or share group, topics, a regex, partitions): each
// owned partition's client consumes exactly that partition, which such an
// option would either make fail (franz-go refuses the mix) or widen, and the
// metadata client would consume as well.
func consumingOption(cl *kgo.Client) error {
	bad := func(name string) error {
		return fmt.Errorf("%w: ClientOptions: kgo.%s: the consumer decides what its clients consume", ErrInvalidConfig, name)
	}
	if g, _ := cl.OptValue(kgo.ConsumerGroup).(string); g != "" {
		return bad("ConsumerGroup")
	}
	if g, _ := cl.OptValue(kgo.ShareGroup).(string); g != "" {
		return bad("ShareGroup")
	}
	if r, _ := cl.OptValue(kgo.ConsumeRegex).(bool); r {
		return bad("ConsumeRegex")
	}
	if ts, _ := cl.OptValue(kgo.ConsumeTopics).([]string); len(ts) > 0 {
		return bad("ConsumeTopics")
	}
	if ps, _ := cl.OptValue(kgo.ConsumePartitions).(map[string]map[int32]kgo.Offset); len(ps) > 0 {
		return bad("ConsumePartitions")
	}
	return nil
}

package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/backoff"
	"github.com/leasehold/leasehold/internal/lograte"
	"github.com/leasehold/leasehold/internal/outboxtx"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/lease"
)

// Consumer consumes the Kafka partitions of its topics that its worker
// owns. Create it with New and run it with a worker:
//
//	c, err := kafka.New(db, kafka.Config{Topics: ..., Handler: ...})
//	w, err := worker.New(db, worker.Config{Group: "payments-ledger", Kafka: c})
//	err = w.Run(ctx) // or w.Start(ctx) ... w.Stop(ctx)
//
// The worker's group is the consumer group; it has Partitions() partitions,
// one per Kafka partition slot. Open, Run and Close are the worker's: it
// calls Open at Start, Run for each partition it is granted, and Close at
// Stop. A Consumer is run by one worker at a time (a second Open while it
// is open returns ErrInUse); after Close it can be opened again, by a new
// worker, and its Stats keep counting.
type Consumer struct {
	cfg   Config
	pool  *pgxpool.Pool
	fence *lease.Fence
	q     store.KafkaSQL
	st    *store.Statements // for the outbox's statements (outboxtx)
	place string            // the database's, for the outbox's wake-ups (outboxtx.Place)
	retry *backoff.Backoff
	log   *slog.Logger // the DB's logger

	mu      sync.Mutex
	busy    bool     // Open began and Close has not ended it
	sess    *session // set by a successful Open, cleared by Close
	stalled map[topicPartition]*OffsetError
	owned   map[topicPartition]fence.Token

	batches, records, fenced, failed, resets atomic.Int64
}

// session is one Open of a Consumer: what Open sets up and Close tears
// down. A partition's Run keeps the session it started in.
type session struct {
	group string
	log   *slog.Logger
	fails *lograte.Limiter // repeated failures of all partitions, by kind
	opts  []kgo.Opt        // base options of every Kafka client
	admin *kgo.Client      // metadata and offset listing

	cancel context.CancelFunc // stops the metadata loop
	done   chan struct{}      // closed when the metadata loop returns

	mu      sync.Mutex
	counts  map[string]int // partitions per topic, from the last metadata read
	changed chan struct{}  // closed when counts change
	metaErr error          // the last metadata read's error
}

type topicPartition struct {
	topic     string
	partition int32
}

// New returns a Consumer whose handlers write through db's pool. It
// validates cfg and does no I/O.
func New(db *leasehold.DB, cfg Config) (*Consumer, error) {
	if db.Pool() == nil {
		return nil, fmt.Errorf("%w: nil or zero *leasehold.DB (use leasehold.Open)", ErrInvalidConfig)
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
	return &Consumer{
		cfg: cfg, pool: db.Pool(), fence: f, q: st.Kafka, st: st, place: outboxtx.Place(db.Pool()),
		retry:   backoff.New(cfg.RetryMin, cfg.RetryMax, nil),
		log:     db.Logger(),
		stalled: map[topicPartition]*OffsetError{},
		owned:   map[topicPartition]fence.Token{},
	}, nil
}

// Partitions returns the consumer group's partition count: len(Topics) ×
// PartitionsPerTopic, one group partition per Kafka partition slot. The
// worker running the Consumer uses it as its group's partition count.
func (c *Consumer) Partitions() int { return len(c.cfg.Topics) * c.cfg.PartitionsPerTopic }

// Open prepares the Consumer to consume for group; the worker calls it at
// Start, before it joins the group. It checks ClientOptions (consuming
// options are refused with ErrInvalidConfig), reads the topics' metadata
// (every topic must exist, ErrTopicNotFound, and have at most
// PartitionsPerTopic partitions, *PartitionCountError) bounded by ctx,
// records Topics as the group's topic list if the group has none yet and
// refuses a list that differs from the recorded one (*TopicsError, wrapping
// ErrTopicsMismatch; order matters), and
// starts reading it again every MetadataInterval. It returns ErrInUse if
// the Consumer is open already. If Open fails, the Consumer is left closed.
func (c *Consumer) Open(ctx context.Context, group string) error {
	if group == "" {
		return fmt.Errorf("%w: Open: empty group", ErrInvalidConfig)
	}
	c.mu.Lock()
	if c.busy {
		c.mu.Unlock()
		return ErrInUse
	}
	c.busy = true
	c.mu.Unlock()
	s, err := c.open(ctx, group)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.busy = false
		return err
	}
	c.sess = s
	return nil
}

// open is Open's work.
func (c *Consumer) open(ctx context.Context, group string) (*session, error) {
	log := c.log.With("group", group)
	fails, err := lograte.New(log, lograte.Config{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	s := &session{group: group, log: log, fails: fails, counts: map[string]int{}, changed: make(chan struct{}),
		done: make(chan struct{})}
	// Clipped: every owned partition appends its consume options to
	// s.opts concurrently, and spare capacity would let them write into
	// one shared array (one partition's client consuming another's).
	// franz-go's warnings first, so that a WithLogger in ClientOptions wins.
	s.opts = slices.Clip(append(append([]kgo.Opt{kgo.WithLogger(kgoLogger{log, fails})}, c.cfg.ClientOptions...),
		kgo.SeedBrokers(c.cfg.Brokers...)))
	admin, err := kgo.NewClient(s.opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: Kafka client: %v", ErrInvalidConfig, err)
	}
	s.admin = admin
	if err := consumingOption(admin); err != nil {
		admin.Close()
		return nil, err
	}
	if err := c.refresh(ctx, s, true); err != nil {
		admin.Close()
		return nil, err
	}
	if err := c.checkTopics(ctx, group); err != nil {
		admin.Close()
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		c.metadataLoop(lctx, s)
	}()
	log.Info("kafka: consumer open", "topics", c.cfg.Topics, "partitions_per_topic", c.cfg.PartitionsPerTopic)
	return s, nil
}

// checkTopics records the consumer's topic list for group if the group has
// none yet, and refuses with a *TopicsError a list that differs from the
// recorded one. It runs after the metadata check, so a list naming a topic
// that does not exist is never recorded.
func (c *Consumer) checkTopics(ctx context.Context, group string) error {
	var recorded []string
	var err error
	for range 3 { // no row: a concurrent first record committed meanwhile
		err = c.pool.QueryRow(ctx, c.q.Topics, group, c.cfg.Topics).Scan(&recorded)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
	if err != nil {
		return store.Classify("kafka", "record topics", group, err)
	}
	if !slices.Equal(recorded, c.cfg.Topics) {
		return &TopicsError{Group: group, Configured: slices.Clone(c.cfg.Topics), Recorded: recorded}
	}
	return nil
}

// Close ends what Open started: it stops the metadata reads and closes
// the metadata client, waiting for the reads at most until ctx ends. The
// worker calls it at Stop, after its partitions were given up (their Runs
// returned). Close on a Consumer that is not open does nothing.
func (c *Consumer) Close(ctx context.Context) error {
	c.mu.Lock()
	s := c.sess
	c.sess = nil
	if s != nil {
		c.busy = false
	}
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	s.cancel()
	var err error
	select {
	case <-s.done:
	case <-ctx.Done():
		err = fmt.Errorf("kafka: close: the metadata read did not end: %w", context.Cause(ctx))
	}
	s.admin.Close()
	s.fails.Close()
	s.log.Info("kafka: consumer closed")
	return err
}

// current returns the open session, or nil.
func (c *Consumer) current() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess
}

// Ready returns nil while the Consumer is open and its last metadata read
// succeeded: ErrNotOpen before Open and after Close, else the read's
// error (a broker that cannot be reached, say). The worker's /readyz
// reports it.
func (c *Consumer) Ready() error {
	s := c.current()
	if s == nil {
		return ErrNotOpen
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.metaErr != nil {
		return fmt.Errorf("kafka: the last metadata read failed: %w", s.metaErr)
	}
	return nil
}

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
	// consumes now to its token (idle slots, whose partition does not
	// exist yet, are not listed).
	Owned map[string]fence.Token
	// Stalled lists the owned partitions whose stored offset is outside
	// the log under OutOfRangeFail: they are not consumed.
	Stalled []*OffsetError
}

// Stats returns the consumer's counters. The worker exports them as
// metrics (leasehold_kafka_*).
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

package kafka

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// EnvBrokers names the variable read for Config.Brokers when it is empty: a
// comma-separated list of host:port seed brokers.
const EnvBrokers = "KAFKA_BROKERS"

// Handler applies the effects of a batch of records inside tx. The
// effects, the advance of the partition's stored offset past the batch and
// the fence check commit together, or not at all. A nil return commits; an
// error rolls back, and the same records are handled again after a backoff
// (a partition is ordered: a record that always fails blocks its partition,
// so move poison records aside yourself, for example into a dead-letter
// table in the same tx, and return nil). Use ctx for the handler's
// statements: it is cancelled when the partition is handed off or lost.
// Do not commit or roll back tx (its Commit and Rollback return
// lease.ErrTxManaged): the consumer does, with the offset advance.
type Handler func(ctx context.Context, tx pgx.Tx, b *Batch) error

// Batch is the records a Handler applies in one transaction: consecutive
// records of one Kafka partition, in offset order (offsets need not be
// contiguous: transaction markers and compaction leave gaps).
type Batch struct {
	// Group is the consumer group: the Group of the worker running the
	// Consumer.
	Group string
	// Topic and Partition name the Kafka partition.
	Topic     string
	Partition int32
	// Token is the fencing token of this owner's grant of the partition.
	Token fence.Token
	// Granted is when this owner was granted the partition (local clock):
	// time.Since(b.Granted) in the grant's first batch is the handoff
	// latency, from grant to first record.
	Granted time.Time
	// Records are the records, in offset order; never empty.
	Records []*kgo.Record
}

// Next returns the offset stored when the batch commits: the last record's
// offset + 1.
func (b *Batch) Next() int64 { return b.Records[len(b.Records)-1].Offset + 1 }

// Start says where a partition with no stored offset starts.
type Start int

const (
	// StartEarliest starts at the log start: every record still in the
	// log is handled, also in partitions added to a topic later.
	StartEarliest Start = iota
	// StartLatest starts at the log end when the partition is first owned
	// (stored at once, so a later owner does not skip records produced in
	// between).
	StartLatest
)

// OutOfRange says what an owner does when the stored offset is outside the
// log (below its start after retention or deletion, above its end after the
// topic was recreated).
type OutOfRange int

const (
	// OutOfRangeFail stops consuming the partition: the owner logs the
	// *OffsetError at error level, reports it in Stats, and checks again
	// after a backoff (it picks up an offset corrected in the table).
	OutOfRangeFail OutOfRange = iota
	// OutOfRangeEarliest restarts at the log start, logged at warn level
	// and stored (fenced) at once.
	OutOfRangeEarliest
	// OutOfRangeLatest restarts at the log end, logged at warn level and
	// stored (fenced) at once.
	OutOfRangeLatest
)

// MaxTopicPartitions bounds Config.PartitionsPerTopic.
const MaxTopicPartitions = 16384

// Config configures a Consumer. The zero value of every optional field means
// its default.
//
// The consumer group, the member id, the leases and the membership settings
// are the worker's (worker.Config: Group, ID, Lease, HandoffTimeout,
// MembershipPollInterval): the Consumer is run by a worker.Worker.
type Config struct {
	// Topics are the topics consumed. Required; their order is part of the
	// group's layout (see PartitionsPerTopic): the first Open of a group
	// records the list, and Open refuses a consumer whose list differs,
	// reordered too, with a *TopicsError (ErrTopicsMismatch).
	Topics []string
	// Brokers are the seed brokers (host:port). Defaults to the
	// comma-separated list in $KAFKA_BROKERS; one of the two is required.
	Brokers []string
	// PartitionsPerTopic is how many Kafka partitions of each topic the
	// group can consume: topic i's partition p is the group's partition
	// i×PartitionsPerTopic + p, and the group has len(Topics) ×
	// PartitionsPerTopic partitions (Partitions). It is an upper bound on
	// each topic's partition count, fixed when the group is created;
	// partitions added up to it are picked up, and slots above a topic's
	// count are idle. A topic with more partitions is refused at Open
	// (ErrTooManyPartitions) and logged at error level when it grows past
	// it. Closer to the real count balances better (docs/kafka.md).
	// Defaults to 64.
	PartitionsPerTopic int
	// Handler applies each batch. Required.
	Handler Handler
	// MaxBatch is the largest number of records handed to one Handler
	// call. Defaults to 500.
	MaxBatch int
	// FetchMaxWait is how long the broker holds a fetch that has no new
	// data (kgo.FetchMaxWait). franz-go's default of 5s would delay a new
	// owner's first record by up to 5s; the cost of a short wait is one
	// empty fetch per idle owned partition per wait. Defaults to 100ms.
	FetchMaxWait time.Duration
	// MetadataInterval is how often the consumer reads the topics'
	// partition counts, to pick up added partitions. Defaults to 10s.
	MetadataInterval time.Duration
	// StartAt says where a partition without a stored offset starts.
	// Defaults to StartEarliest.
	StartAt Start
	// OutOfRange says what happens when the stored offset is outside the
	// log. Defaults to OutOfRangeFail.
	OutOfRange OutOfRange
	// RetryMin and RetryMax bound the backoff after a failed batch (handler
	// error, database error) or a failing offset: full jitter over
	// min(RetryMax, RetryMin × 2^attempt). Default to 100ms and 30s.
	RetryMin, RetryMax time.Duration
	// Fence sets the timeouts of the effect transactions. Defaults as in
	// lease.FenceConfig.
	Fence lease.FenceConfig
	// ClientOptions are extra franz-go options for every Kafka client
	// (TLS, SASL, client id, ...). Options that decide what and how is
	// consumed (ConsumePartitions, ConsumeResetOffset, FetchMaxWait,
	// FetchIsolationLevel) are set by the consumer after them; options
	// that make a client consume by itself (ConsumerGroup, ShareGroup,
	// ConsumeTopics, ConsumeRegex, ConsumePartitions) are refused by Open
	// (so by the worker's Start) with ErrInvalidConfig. Defaults to none.
	ClientOptions []kgo.Opt
}

func (c Config) withDefaults() (Config, error) {
	bad := func(field, reason string) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, reason)
	}
	if len(c.Brokers) == 0 {
		for _, b := range strings.Split(os.Getenv(EnvBrokers), ",") {
			if b = strings.TrimSpace(b); b != "" {
				c.Brokers = append(c.Brokers, b)
			}
		}
	}
	if c.PartitionsPerTopic == 0 {
		c.PartitionsPerTopic = 64
	}
	switch {
	case len(c.Topics) == 0:
		return c, bad("Topics", "required")
	case len(c.Brokers) == 0:
		return c, bad("Brokers", "required (or set $"+EnvBrokers+")")
	case c.Handler == nil:
		return c, bad("Handler", "required")
	case c.PartitionsPerTopic < 1 || c.PartitionsPerTopic > MaxTopicPartitions:
		return c, bad("PartitionsPerTopic", fmt.Sprintf("%d is not in 1..%d", c.PartitionsPerTopic, MaxTopicPartitions))
	case len(c.Topics)*c.PartitionsPerTopic > partition.MaxPartitions:
		return c, bad("PartitionsPerTopic", fmt.Sprintf("%d topics × %d exceeds %d group partitions",
			len(c.Topics), c.PartitionsPerTopic, partition.MaxPartitions))
	case c.MaxBatch < 0 || c.FetchMaxWait < 0 || c.MetadataInterval < 0 || c.RetryMin < 0 || c.RetryMax < 0:
		return c, bad("durations/MaxBatch", "negative value")
	case c.StartAt != StartEarliest && c.StartAt != StartLatest:
		return c, bad("StartAt", fmt.Sprintf("unknown value %d", c.StartAt))
	case c.OutOfRange < OutOfRangeFail || c.OutOfRange > OutOfRangeLatest:
		return c, bad("OutOfRange", fmt.Sprintf("unknown value %d", c.OutOfRange))
	}
	seen := map[string]bool{}
	for _, t := range c.Topics {
		if t == "" || len(t) > 249 {
			return c, bad("Topics", fmt.Sprintf("topic %q must be 1 to 249 bytes", t))
		}
		if seen[t] {
			return c, bad("Topics", fmt.Sprintf("topic %q listed twice", t))
		}
		seen[t] = true
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 500
	}
	def(&c.FetchMaxWait, 100*time.Millisecond)
	def(&c.MetadataInterval, 10*time.Second)
	def(&c.RetryMin, 100*time.Millisecond)
	def(&c.RetryMax, 30*time.Second)
	if c.RetryMax < c.RetryMin {
		return c, bad("RetryMax", "below RetryMin")
	}
	return c, nil
}

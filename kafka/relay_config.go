package kafka

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/fence"
)

// RelayConfig configures a Relay. The zero value of every optional field
// means its default.
type RelayConfig struct {
	// Brokers are the seed brokers (host:port). Defaults to the
	// comma-separated list in $KAFKA_BROKERS; one of the two is required.
	Brokers []string
	// TransactionalIDPrefix starts the transactional id of each
	// partition's producer, "<prefix>.<group>.<partition>", which is also
	// the Kafka consumer group under which the partition's progress is
	// committed (see ProgressTopic). Two deployments publishing into the
	// same Kafka cluster from groups of the same name need different
	// prefixes. Defaults to "leasehold-outbox".
	TransactionalIDPrefix string
	// ProgressTopic is the topic against which each partition's progress
	// (the last outbox segment published) is committed as a consumer
	// group offset, in the Kafka transaction that publishes the segment
	// (as Kafka Streams commits its input offsets). No record is ever
	// written to it. The first producer that finds it missing creates it,
	// with one partition. Defaults to "leasehold-outbox-progress".
	ProgressTopic string
	// MaxRecords is how many records a Kafka transaction publishes at
	// most: the relay reads up to that many, segment after segment, and
	// publishes them in one transaction (a segment, the records of one
	// handler transaction, is never split: a larger one is published
	// alone). Defaults to 1000.
	MaxRecords int
	// DeleteChunk is how many published segments one statement deletes
	// at most. Defaults to 1000.
	DeleteChunk int
	// RetryMin and RetryMax bound the backoff after a failed publish
	// (Kafka or database error): full jitter over min(RetryMax, RetryMin ×
	// 2^attempt). Default to 100ms and 10s.
	RetryMin, RetryMax time.Duration
	// OnPublish, if set, is called after each Kafka transaction of the
	// relay commits, before the segments it published are deleted from the
	// outbox; it must not block. Defaults to none.
	OnPublish func(Publish)
	// ClientOptions are extra franz-go options for the producers (TLS,
	// SASL, client id, TransactionTimeout, ...). They come after the
	// relay's defaults (franz-go's warnings logged, ProducerBatchMaxBytes
	// 1048588 so that a record of outbox.MaxRecordBytes fits,
	// TxnOffsetCommit at version 4 at most: the classic transaction
	// protocol) and before TransactionalID and SeedBrokers, which the relay
	// sets. Defaults to none.
	ClientOptions []kgo.Opt
}

// Publish describes a Kafka transaction a Relay committed (OnPublish).
type Publish struct {
	// Group and Partition name the group partition whose outbox it
	// published; Token is the grant's fencing token.
	Group     string
	Partition int
	Token     fence.Token
	// First and Last are the first and last outbox segments published;
	// Records is how many records they held.
	First, Last int64
	Records     int
	// Took is how long the transaction took, from its first record
	// produced to its commit.
	Took time.Duration
}

func (c RelayConfig) withDefaults() (RelayConfig, error) {
	bad := func(field, reason string) error {
		return fmt.Errorf("%w: Relay %s: %s", ErrInvalidConfig, field, reason)
	}
	if len(c.Brokers) == 0 {
		for _, b := range strings.Split(os.Getenv(EnvBrokers), ",") {
			if b = strings.TrimSpace(b); b != "" {
				c.Brokers = append(c.Brokers, b)
			}
		}
	}
	if c.TransactionalIDPrefix == "" {
		c.TransactionalIDPrefix = "leasehold-outbox"
	}
	if c.ProgressTopic == "" {
		c.ProgressTopic = "leasehold-outbox-progress"
	}
	if c.MaxRecords == 0 {
		c.MaxRecords = 1000
	}
	if c.DeleteChunk == 0 {
		c.DeleteChunk = 1000
	}
	if c.RetryMin == 0 {
		c.RetryMin = 100 * time.Millisecond
	}
	if c.RetryMax == 0 {
		c.RetryMax = 10 * time.Second
	}
	switch {
	case len(c.Brokers) == 0:
		return c, bad("Brokers", "required (or set $"+EnvBrokers+")")
	case c.MaxRecords < 0 || c.DeleteChunk < 0 || c.RetryMin < 0 || c.RetryMax < 0:
		return c, bad("MaxRecords/DeleteChunk/RetryMin/RetryMax", "negative value")
	case c.RetryMax < c.RetryMin:
		return c, bad("RetryMax", "below RetryMin")
	case len(c.ProgressTopic) > 249 || !topicName(c.ProgressTopic):
		return c, bad("ProgressTopic", fmt.Sprintf("%q is not a valid topic name", c.ProgressTopic))
	case len(c.TransactionalIDPrefix) > 200:
		return c, bad("TransactionalIDPrefix", "longer than 200 bytes")
	}
	return c, nil
}

func topicName(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

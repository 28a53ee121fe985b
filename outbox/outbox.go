package outbox

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/outboxtx"
)

// Record is a Kafka record to publish.
type Record struct {
	// Topic is the topic the record is published to. Required: a Kafka
	// topic name (letters, digits, '.', '_', '-'; at most 249 bytes).
	// The topic must exist (or the brokers create topics on first use):
	// a record the brokers refuse stops its partition's relay, which
	// retries, until the topic is created (docs/kafka.md).
	Topic string
	// Key is the record's key; records of one key go to one Kafka
	// partition (the producer's default partitioner), in the order they
	// committed. Nil for none.
	Key []byte
	// Value is the record's value; nil publishes a tombstone (a null
	// value).
	Value []byte
	// Headers are the record's headers, in order.
	Headers []Header
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// MaxRecordBytes bounds a record's key, value and headers together: about
// the brokers' default largest message (message.max.bytes, 1 MiB), so that
// a record Add accepts is not one the brokers refuse forever.
const MaxRecordBytes = 1000000

// ErrNoTransaction is returned by Add called outside a handler that runs in
// a fenced transaction (a queue HandleTx handler, a Kafka batch handler),
// or with a transaction other than the handler's (or a savepoint of it).
var ErrNoTransaction = errors.New("outbox: Add needs the fenced transaction of a HandleTx or Kafka handler, with its context")

// ErrInvalidRecord is wrapped by the *RecordError Add returns for a record
// that cannot be published.
var ErrInvalidRecord = errors.New("outbox: invalid record")

// RecordError says which record Add refused and why. It wraps
// ErrInvalidRecord.
type RecordError struct {
	// Index is the record's index in Add's arguments.
	Index int
	// Topic is its topic.
	Topic string
	// Reason says what is wrong.
	Reason string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("outbox: record %d (topic %q): %s", e.Index, e.Topic, e.Reason)
}

// Unwrap returns ErrInvalidRecord.
func (e *RecordError) Unwrap() error { return ErrInvalidRecord }

var topicRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Add appends recs to the outbox in tx, the handler's fenced transaction
// (or a savepoint of it), with ctx the handler's context. They are
// published to Kafka, in order, once tx commits; if tx rolls back (the
// handler failed, the fence refused a stale owner), or the savepoint they
// were added in does, they are not. One statement whatever the number of
// records. A record that cannot be published is refused with a
// *RecordError (ErrInvalidRecord) and nothing is appended; outside a
// fenced handler Add returns ErrNoTransaction.
func Add(ctx context.Context, tx pgx.Tx, recs ...Record) error {
	s := outboxtx.From(ctx)
	if s == nil {
		return ErrNoTransaction
	}
	if len(recs) == 0 {
		return nil
	}
	topics := make([]string, len(recs))
	keys := make([][]byte, len(recs))
	values := make([][]byte, len(recs))
	headers := make([][]byte, len(recs))
	for i, r := range recs {
		if !topicRE.MatchString(r.Topic) || r.Topic == "." || r.Topic == ".." {
			return &RecordError{Index: i, Topic: r.Topic, Reason: "not a valid Kafka topic name (letters, digits, '.', '_', '-'; 1 to 249 bytes)"}
		}
		size := len(r.Key) + len(r.Value)
		hk := make([]string, len(r.Headers))
		hv := make([][]byte, len(r.Headers))
		for j, h := range r.Headers {
			hk[j], hv[j] = h.Key, h.Value
			size += len(h.Key) + len(h.Value)
		}
		if size > MaxRecordBytes {
			return &RecordError{Index: i, Topic: r.Topic, Reason: fmt.Sprintf("%d bytes of key, value and headers: more than MaxRecordBytes (%d)", size, MaxRecordBytes)}
		}
		topics[i], keys[i], values[i], headers[i] = r.Topic, r.Key, r.Value, outboxtx.EncodeHeaders(hk, hv)
	}
	err := s.Append(ctx, tx, topics, keys, values, headers)
	if errors.Is(err, outboxtx.ErrOtherTx) || errors.Is(err, outboxtx.ErrSealed) {
		return fmt.Errorf("%w: %w", ErrNoTransaction, err)
	}
	return err
}

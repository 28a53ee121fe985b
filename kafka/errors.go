package kafka

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig is wrapped by every configuration error.
	ErrInvalidConfig = errors.New("kafka: invalid config")
	// ErrOffsetOutOfRange is wrapped by *OffsetError: a stored offset
	// outside the partition's log.
	ErrOffsetOutOfRange = errors.New("kafka: stored offset outside the log")
	// ErrTooManyPartitions means a topic has more partitions than
	// Config.PartitionsPerTopic: the ones above it cannot be consumed.
	ErrTooManyPartitions = errors.New("kafka: topic has more partitions than the group can consume")
	// ErrOffsetMoved means a partition's stored offset changed under its
	// owner (an operator reset it, or a row appeared). The batch rolled
	// back; the owner reads the stored offset again and continues from it.
	ErrOffsetMoved = errors.New("kafka: stored offset moved under the owner")
	// ErrTopicNotFound means a configured topic does not exist.
	ErrTopicNotFound = errors.New("kafka: topic not found")
	// ErrInUse is returned by Open on a Consumer that is open: a
	// Consumer is run by one worker at a time. The worker's Start returns
	// it wrapped.
	ErrInUse = errors.New("kafka: consumer in use by another worker")
	// ErrTopicsMismatch is wrapped by *TopicsError: the consumer's topic
	// list differs from the one recorded for its group.
	ErrTopicsMismatch = errors.New("kafka: topic list differs from the group's")
	// ErrNotOpen is returned by Ready on a Consumer that is not open
	// (before its worker's Start, after its Stop).
	ErrNotOpen = errors.New("kafka: consumer not open")
)

// OffsetError reports a stored offset outside the partition's log: below
// its start (retention or deletion ran past records never processed) or
// above its end (the topic was recreated).
type OffsetError struct {
	Group     string
	Topic     string
	Partition int32
	// Stored is the stored offset (the next record to process).
	Stored int64
	// LogStart and LogEnd are the partition's first offset and the offset
	// after its last stable record, as listed when the error was found.
	LogStart, LogEnd int64
}

// Error returns the error message.
func (e *OffsetError) Error() string {
	return fmt.Sprintf("kafka: group %q: %s/%d: stored offset %d is outside the log [%d, %d]",
		e.Group, e.Topic, e.Partition, e.Stored, e.LogStart, e.LogEnd)
}

// Unwrap returns ErrOffsetOutOfRange.
func (e *OffsetError) Unwrap() error { return ErrOffsetOutOfRange }

// PartitionCountError reports a topic with more partitions than the group
// can consume.
type PartitionCountError struct {
	Topic      string
	Partitions int
	PerTopic   int
}

// Error returns the error message.
func (e *PartitionCountError) Error() string {
	return fmt.Sprintf("kafka: topic %q has %d partitions, the group consumes at most %d per topic "+
		"(PartitionsPerTopic is fixed when the group is created): partitions %d.. are not consumed",
		e.Topic, e.Partitions, e.PerTopic, e.PerTopic)
}

// Unwrap returns ErrTooManyPartitions.
func (e *PartitionCountError) Unwrap() error { return ErrTooManyPartitions }

// TopicsError reports a consumer whose topic list differs from the one
// recorded for its group when the group was first opened. The list, in
// order, is part of the group's layout: topic i's Kafka partition p is the
// group's partition i×PartitionsPerTopic + p, so consumers with different
// lists (even the same topics reordered) would consume one Kafka partition
// under two leases.
type TopicsError struct {
	Group string
	// Configured is the consumer's Config.Topics; Recorded is the group's.
	Configured, Recorded []string
}

// Error returns the error message.
func (e *TopicsError) Error() string {
	return fmt.Sprintf("kafka: group %q consumes topics %q (in this order), this consumer is configured with %q: "+
		"the topic list of a group is fixed when it is first opened (docs/kafka.md)", e.Group, e.Recorded, e.Configured)
}

// Unwrap returns ErrTopicsMismatch.
func (e *TopicsError) Unwrap() error { return ErrTopicsMismatch }

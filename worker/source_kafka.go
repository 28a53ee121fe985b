package worker

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/partition"
)

// kafkaSource runs a Kafka consumer: each owned group partition consumes
// its Kafka partition slot (kafka.Consumer.Run), between the consumer's
// Open (its metadata client and reads) and Close.
type kafkaSource struct {
	c       *kafka.Consumer
	group   string
	metrics *kafkaCollector
}

func newKafkaSource(c *kafka.Consumer, group string, labels prometheus.Labels) *kafkaSource {
	return &kafkaSource{c: c, group: group, metrics: &kafkaCollector{c: c, labels: labels}}
}

func (s *kafkaSource) open(ctx context.Context) error {
	if err := s.c.Open(ctx, s.group); err != nil {
		return fmt.Errorf("worker: open the Kafka consumer: %w", err)
	}
	return nil
}

func (s *kafkaSource) joined(context.Context, string) error { return nil }

func (s *kafkaSource) run(ctx context.Context, o partition.Ownership) { s.c.Run(ctx, o) }

func (s *kafkaSource) close(ctx context.Context) error { return s.c.Close(ctx) }

func (s *kafkaSource) ready() error { return s.c.Ready() }

func (s *kafkaSource) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.metrics}
}

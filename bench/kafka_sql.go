package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/leasehold/leasehold/internal/store"
)

// kafkaBegin is lease.Fence.Begin's BEGIN with the default timeouts
// (lock 1s, idle 5s, statement 5s), as the consumer sends it.
const kafkaBegin = "BEGIN; SET LOCAL lock_timeout = 1000; SET LOCAL idle_in_transaction_session_timeout = 5000; " +
	"SET LOCAL statement_timeout = 5000"

// kafkaSQL holds the statements rendered for the schema the suite uses.
type kafkaSQL struct {
	check, advance, createGroup string
}

// renderKafkaSQL renders the statements for schema ("" for the default):
// the offset advance comes from internal/store, as in kafka.
func renderKafkaSQL(schema string) (kafkaSQL, error) {
	q, err := store.Quote(schema)
	if err != nil {
		return kafkaSQL{}, err
	}
	st, err := store.For(schema)
	if err != nil {
		return kafkaSQL{}, err
	}
	return kafkaSQL{
		check:       st.Lease.Check,
		advance:     st.Kafka.Advance,
		createGroup: store.Render(`INSERT INTO {{schema}}.groups (name, partitions) VALUES ($1, $2)`, q),
	}, nil
}

// createTopic creates topic on a real cluster.
func createTopic(ctx context.Context, brokers []string, topic string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, -1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	return nil
}

// deleteTopic deletes topic from a real cluster, best effort.
func deleteTopic(brokers []string, topic string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.TopicNames = []string{topic}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req.RequestWith(ctx, cl)
}

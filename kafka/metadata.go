package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// refresh reads the topics' partition counts into s. At Open (strict) a
// missing topic or one with too many partitions is an error; later they are
// logged and the last known counts kept. It records whether the read
// succeeded (Ready).
func (c *Consumer) refresh(ctx context.Context, s *session, strict bool) (err error) {
	defer func() {
		s.mu.Lock()
		s.metaErr = err
		s.mu.Unlock()
	}()
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range c.cfg.Topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, s.admin)
	if err != nil {
		return fmt.Errorf("kafka: read metadata of %v: %w", c.cfg.Topics, err)
	}
	counts := map[string]int{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if strict {
				if err == kerr.UnknownTopicOrPartition {
					return fmt.Errorf("%w: %q", ErrTopicNotFound, *t.Topic)
				}
				return fmt.Errorf("kafka: metadata of topic %q: %w", *t.Topic, err)
			}
			s.log.Error("kafka: reading the topic's metadata failed; keeping its last partition count",
				"topic", *t.Topic, "err", err)
			continue
		}
		n := len(t.Partitions)
		if n > c.cfg.PartitionsPerTopic {
			pe := &PartitionCountError{Topic: *t.Topic, Partitions: n, PerTopic: c.cfg.PartitionsPerTopic}
			if strict {
				return pe
			}
			s.log.Error("kafka: partitions above PartitionsPerTopic are not consumed", "err", pe)
			n = c.cfg.PartitionsPerTopic
		}
		counts[*t.Topic] = n
	}
	for _, t := range c.cfg.Topics {
		if _, ok := counts[t]; !ok && strict {
			return fmt.Errorf("%w: %q (not in the metadata response)", ErrTopicNotFound, t)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	grew := false
	for t, n := range counts {
		if n > s.counts[t] {
			if s.counts[t] > 0 {
				s.log.Info("kafka: partitions added", "topic", t, "from", s.counts[t], "to", n)
			}
			s.counts[t] = n
			grew = true
		}
	}
	if grew {
		close(s.changed)
		s.changed = make(chan struct{})
	}
	return nil
}

// metadataTimeout is the least time a metadata read may take before it
// counts as failed (Ready): each read is bounded by the longer of it and
// MetadataInterval. Bounded by a short interval alone (100 ms, say), a
// read on a loaded machine failed for no fault of the brokers, and the
// consumer reported itself not ready (TestKafkaWorkerServesKafkaAndPartitionMetrics
// under the full race suite).
const metadataTimeout = 10 * time.Second

// metadataLoop reads the partition counts every MetadataInterval (a read
// that takes longer delays the next) until ctx ends (Close).
func (c *Consumer) metadataLoop(ctx context.Context, s *session) {
	t := time.NewTicker(c.cfg.MetadataInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, max(c.cfg.MetadataInterval, metadataTimeout))
		if err := c.refresh(rctx, s, false); err != nil && ctx.Err() == nil {
			s.fails.Fail("metadata", "kafka: reading metadata failed", "err", err)
		} else if err == nil {
			s.fails.Recovered("metadata", "kafka: reading metadata recovered")
		}
		cancel()
	}
}

// waitPartition waits until partition p of topic exists. It returns false
// when ctx ends first.
func (s *session) waitPartition(ctx context.Context, topic string, p int32) bool {
	for {
		s.mu.Lock()
		n, ch := s.counts[topic], s.changed
		s.mu.Unlock()
		if int(p) < n {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

// logRange returns the partition's log start and end offsets (the end of
// its stable, read-committed part).
func (s *session) logRange(ctx context.Context, topic string, p int32) (start, end int64, err error) {
	list := func(ts int64) (int64, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		req.IsolationLevel = 1 // read committed
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.CurrentLeaderEpoch = -1
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, s.admin)
		if err != nil {
			return 0, err
		}
		for _, t := range resp.Topics {
			for _, rp := range t.Partitions {
				if t.Topic == topic && rp.Partition == p {
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
						return 0, err
					}
					return rp.Offset, nil
				}
			}
		}
		return 0, fmt.Errorf("partition missing from the response")
	}
	if start, err = list(-2); err != nil {
		return 0, 0, fmt.Errorf("kafka: list the log start of %s/%d: %w", topic, p, err)
	}
	if end, err = list(-1); err != nil {
		return 0, 0, fmt.Errorf("kafka: list the log end of %s/%d: %w", topic, p, err)
	}
	return start, end, nil
}

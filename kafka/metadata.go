package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// refresh reads the topics' partition counts. At start (strict) a missing
// topic or one with too many partitions is an error; later they are logged
// and the last known counts kept.
func (c *Consumer) refresh(ctx context.Context, strict bool) error {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range c.cfg.Topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, c.admin)
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
			c.log.Error("kafka: reading the topic's metadata failed; keeping its last partition count",
				"topic", *t.Topic, "err", err)
			continue
		}
		n := len(t.Partitions)
		if n > c.cfg.PartitionsPerTopic {
			pe := &PartitionCountError{Topic: *t.Topic, Partitions: n, PerTopic: c.cfg.PartitionsPerTopic}
			if strict {
				return pe
			}
			c.log.Error("kafka: partitions above PartitionsPerTopic are not consumed", "err", pe)
			n = c.cfg.PartitionsPerTopic
		}
		counts[*t.Topic] = n
	}
	for _, t := range c.cfg.Topics {
		if _, ok := counts[t]; !ok && strict {
			return fmt.Errorf("%w: %q (not in the metadata response)", ErrTopicNotFound, t)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	grew := false
	for t, n := range counts {
		if n > c.counts[t] {
			if c.counts[t] > 0 {
				c.log.Info("kafka: partitions added", "topic", t, "from", c.counts[t], "to", n)
			}
			c.counts[t] = n
			grew = true
		}
	}
	if grew {
		close(c.changed)
		c.changed = make(chan struct{})
	}
	return nil
}

// metadataLoop reads the partition counts every MetadataInterval.
func (c *Consumer) metadataLoop() {
	t := time.NewTicker(c.cfg.MetadataInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.MetadataInterval)
		if err := c.refresh(ctx, false); err != nil && c.ctx.Err() == nil {
			c.log.Warn("kafka: reading metadata failed", "err", err)
		}
		cancel()
	}
}

// waitPartition waits until partition p of topic exists. It returns false
// when ctx ends first.
func (c *Consumer) waitPartition(ctx context.Context, topic string, p int32) bool {
	for {
		c.mu.Lock()
		n, ch := c.counts[topic], c.changed
		c.mu.Unlock()
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
func (c *Consumer) logRange(ctx context.Context, topic string, p int32) (start, end int64, err error) {
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
		resp, err := req.RequestWith(ctx, c.admin)
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

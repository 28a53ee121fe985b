package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/partition"
)

// handoff measures the time from grant to first record: worker a owns
// every partition; worker b joins and leaves handoffs times. A slow handler
// (50ms per 1-record batch) keeps a backlog in every partition.
func (b *kafkaBench) handoff(ctx context.Context, group string, wait time.Duration) (sample, error) {
	var mu sync.Mutex
	seen := map[int64]bool{} // tokens whose first batch arrived
	var lat []time.Duration
	h := func(ctx context.Context, tx pgx.Tx, bt *kafka.Batch) error {
		mu.Lock()
		if !seen[int64(bt.Token)] {
			seen[int64(bt.Token)] = true
			lat = append(lat, time.Since(bt.Granted))
		}
		mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		return nil
	}
	// settled waits until every partition is owned by its desired owner
	// among cs (partition.Assign over their ids) and each grant delivered
	// its first record.
	settled := func(cs ...*kafkaWorker) error {
		ids := make([]string, len(cs))
		for i, c := range cs {
			ids[i] = c.ID()
		}
		owners, err := partition.Assign(ids, b.f.partitions)
		if err != nil {
			return err
		}
		want := map[string]int{}
		for _, o := range owners {
			want[o]++
		}
		for {
			ok := true
			for _, c := range cs {
				owned := c.Stats().Owned
				ok = ok && len(owned) == want[c.ID()]
				for _, tok := range owned {
					mu.Lock()
					ok = ok && seen[int64(tok)]
					mu.Unlock()
				}
			}
			if ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("not settled on %v: %w", want, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	a, err := b.consumer(ctx, group, "a", h, wait, 1)
	if err != nil {
		return sample{}, err
	}
	defer stopConsumer(a)
	if err := settled(a); err != nil {
		return sample{}, err
	}
	mu.Lock()
	lat = lat[:0] // the initial claims are not handoffs
	mu.Unlock()
	for i := range b.f.handoffs {
		c, err := b.consumer(ctx, group, fmt.Sprintf("b%d", i), h, wait, 1)
		if err != nil {
			return sample{}, err
		}
		if err := settled(a, c); err != nil {
			stopConsumer(c)
			return sample{}, err
		}
		stopConsumer(c)
		if err := settled(a); err != nil {
			return sample{}, err
		}
	}
	mu.Lock()
	defer mu.Unlock()
	s := sample{ops: len(lat), lat: slices.Clone(lat)}
	slices.Sort(s.lat)
	return s, nil
}

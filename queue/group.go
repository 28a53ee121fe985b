package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// DefaultPartitions is the partition count of a group whose workers leave
// worker.Config.Partitions zero (the queue's workers, not Kafka's): the
// count a producer deployed before them gives EnsureGroup.
const DefaultPartitions = 64

// EnsureGroup creates group with the given partition count unless it
// exists, so that jobs can be enqueued into it before any worker of it has
// started (a producer deployed first). It is idempotent: it reports
// whether this call created the group, and an existing group with the same
// count is fine. An existing group with another count is a
// *partition.CountError (the count is fixed when a group is created; the
// workers must be configured with it too: DefaultPartitions for workers
// that leave worker.Config.Partitions zero). A group name that is not 1 to
// 100 bytes, or a count not in 1..partition.MaxPartitions, wraps
// ErrInvalidGroup.
func (c *Client) EnsureGroup(ctx context.Context, group string, partitions int) (created bool, err error) {
	switch {
	case group == "" || len(group) > 100:
		return false, fmt.Errorf("%w: name %q must be 1 to 100 bytes", ErrInvalidGroup, group)
	case partitions < 1 || partitions > partition.MaxPartitions:
		return false, fmt.Errorf("%w: %q: partition count %d is not in 1..%d", ErrInvalidGroup, group, partitions, partition.MaxPartitions)
	}
	err = c.pool.QueryRow(ctx, c.q.CreateGroup, group, partitions).Scan(&created)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, store.Classify("queue", "ensure group", group, err)
	}
	var name string
	var stored int
	if err := c.pool.QueryRow(ctx, c.q.Groups, []string{group}).Scan(&name, &stored); err != nil {
		if errors.Is(err, pgx.ErrNoRows) { // deleted since
			return false, fmt.Errorf("%w: %q was deleted while it was being created", ErrUnknownGroup, group)
		}
		return false, store.ClassifyRead("queue", "ensure group", group, err)
	}
	if stored != partitions {
		return false, &partition.CountError{Group: group, Configured: partitions, Stored: stored}
	}
	c.mu.Lock()
	c.counts[group] = stored
	c.mu.Unlock()
	return created, nil
}

package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PartitionStats counts the pending jobs of one partition, as the database
// saw them at one instant of its clock.
type PartitionStats struct {
	Partition int
	// Pending counts the jobs due now (run_at has passed), waiting for the
	// partition's owner.
	Pending int64
	// Scheduled counts the pending jobs due later (run_at in the future):
	// scheduled jobs, and failed ones waiting for their retry.
	Scheduled int64
	// Retrying counts the pending jobs that failed before (attempt > 0),
	// due or not: a subset of Pending + Scheduled.
	Retrying int64
	// OldestDue is how long the oldest due job has been due (now minus its
	// run_at, on the database clock); 0 when no job is due.
	OldestDue time.Duration
}

// Stats counts the pending jobs of every partition of group, in partition
// order, idle partitions included, in one statement. It reads only pending
// jobs (through the index the owners fetch with), so its cost follows the
// backlog, not the finished jobs kept for retention; finished jobs are not
// counted. An unknown group gives an error wrapping ErrUnknownGroup.
func (c *Client) Stats(ctx context.Context, group string) ([]PartitionStats, error) {
	rows, err := c.pool.Query(ctx, c.q.stats, group)
	if err != nil {
		return nil, fmt.Errorf("queue: stats %q: %w", group, err)
	}
	stats, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PartitionStats, error) {
		var s PartitionStats
		var oldest int64
		err := r.Scan(&s.Partition, &s.Pending, &s.Scheduled, &s.Retrying, &oldest)
		s.OldestDue = time.Duration(oldest) * time.Microsecond
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("queue: stats %q: %w", group, err)
	}
	if len(stats) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrUnknownGroup, group)
	}
	return stats, nil
}

package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/store"
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
	rows, err := c.pool.Query(ctx, c.q.Stats, group)
	if err != nil {
		return nil, store.ClassifyRead("queue", "stats", group, err)
	}
	stats, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PartitionStats, error) {
		var s PartitionStats
		var oldest int64
		err := r.Scan(&s.Partition, &s.Pending, &s.Scheduled, &s.Retrying, &oldest)
		s.OldestDue = time.Duration(oldest) * time.Microsecond
		return s, err
	})
	if err != nil {
		return nil, store.ClassifyRead("queue", "stats", group, err)
	}
	if len(stats) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrUnknownGroup, group)
	}
	return stats, nil
}

// Wait is a key of a group whose later jobs wait behind a job that is not
// due: a job that holds its place (OrderStrict) and is scheduled for later,
// retrying after a failure, or snoozed.
type Wait struct {
	Partition int
	Key       string
	// JobID is the job the key's later jobs wait behind.
	JobID int64
	// RunAt is when that job is due (the database's clock).
	RunAt time.Time
	// Attempt is how many attempts that job has spent: more than 0 when it
	// is retrying after a failure.
	Attempt int
	// Waiting counts the key's due jobs waiting behind it.
	Waiting int64
}

// Waits returns the keys of group whose due jobs wait behind a job that is
// not due, the most held up first, at most limit (0 means 10; at most
// 1000). It reads the group's pending keyed jobs once. An unknown group has
// none.
func (c *Client) Waits(ctx context.Context, group string, limit int) ([]Wait, error) {
	switch {
	case limit == 0:
		limit = 10
	case limit < 0 || limit > 1000:
		return nil, fmt.Errorf("%w: limit %d is not in 1..1000", ErrInvalidFilter, limit)
	}
	rows, err := c.pool.Query(ctx, c.q.Waits, group, limit)
	if err != nil {
		return nil, store.ClassifyRead("queue", "waits", group, err)
	}
	ws, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Wait, error) {
		var w Wait
		err := r.Scan(&w.JobID, &w.Partition, &w.Key, &w.RunAt, &w.Attempt, &w.Waiting)
		return w, err
	})
	if err != nil {
		return nil, store.ClassifyRead("queue", "waits", group, err)
	}
	return ws, nil
}

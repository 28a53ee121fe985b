package admin

import (
	"context"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/queue"
)

// Backlog is a group's pending jobs as one read counted them.
type Backlog struct {
	// ReadAt is the database time just before the read.
	ReadAt time.Time
	// Stats are the counts of every partition (queue.Client.Stats).
	Stats []queue.PartitionStats
	// HasWaits reports whether Waits were read.
	HasWaits bool
	// Waits are the keys whose due jobs wait behind a job that is not
	// due, at most WaitsLimit (queue.Client.Waits); nil unless HasWaits.
	Waits []queue.Wait
}

// ReadBacklog counts group's pending jobs, and reads its waiting keys when
// waits is true. Both read every pending job of the group: their cost
// follows its backlog, never the finished jobs kept (see
// queue.Client.Stats and Waits).
func ReadBacklog(ctx context.Context, db *leasehold.DB, q *queue.Client, group string, waits bool) (Backlog, error) {
	now, err := dbNow(ctx, db)
	if err != nil {
		return Backlog{}, err
	}
	return readBacklog(ctx, q, group, waits, now)
}

// readBacklog is ReadBacklog at database time now, read just before.
func readBacklog(ctx context.Context, q *queue.Client, group string, waits bool, now time.Time) (Backlog, error) {
	b := Backlog{ReadAt: now, HasWaits: waits}
	var err error
	if b.Stats, err = q.Stats(ctx, group); err != nil {
		return Backlog{}, err
	}
	if waits {
		if b.Waits, err = q.Waits(ctx, group, WaitsLimit); err != nil {
			return Backlog{}, err
		}
	}
	return b, nil
}

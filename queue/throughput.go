package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/store"
)

// Outcomes per minute, for operators (see docs/ui.md): each Processor
// counts its runs' outcomes in memory and adds them to the job_stats table
// every PublishInterval (see record.go); Throughput sums them.

// Throughput counts one minute of a group's job outcomes, as its
// Processors recorded them. Counts are approximate: a Processor records
// them every ProcessorConfig.PublishInterval, and the counts of a
// Processor that crashed since are lost.
type Throughput struct {
	// Minute is the minute's start, on the database clock.
	Minute time.Time
	// The outcomes of the runs that ended in the minute (see Outcome).
	Completed, Retried, Discarded, Cancelled, Snoozed, Fenced int64
}

// Failed returns the runs that failed: retried or discarded.
func (t Throughput) Failed() int64 { return t.Retried + t.Discarded }

// MaxThroughputMinutes is the most minutes Throughput returns: the counts
// are kept an hour.
const MaxThroughputMinutes = 60

// Throughput returns the last minutes of group's outcomes, oldest first,
// one per minute up to and including the current one (minutes without runs
// are zero), summing its Processors' counts. minutes is 1 to
// MaxThroughputMinutes; 0 means 15; another value gives an error wrapping
// ErrInvalidFilter. An unknown group gives an error wrapping
// ErrUnknownGroup. It reads at most minutes × workers rows, by primary
// key.
func (c *Client) Throughput(ctx context.Context, group string, minutes int) ([]Throughput, error) {
	if minutes < 0 || minutes > MaxThroughputMinutes {
		return nil, fmt.Errorf("%w: minutes %d is not in 0..%d", ErrInvalidFilter, minutes, MaxThroughputMinutes)
	}
	if minutes == 0 {
		minutes = 15
	}
	rows, err := c.pool.Query(ctx, c.in.Throughput, group, minutes)
	if err != nil {
		return nil, store.ClassifyRead("queue", "throughput", group, err)
	}
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Throughput, error) {
		var t Throughput
		err := r.Scan(&t.Minute, &t.Completed, &t.Retried, &t.Discarded, &t.Cancelled, &t.Snoozed, &t.Fenced)
		return t, err
	})
	if err != nil {
		return nil, store.ClassifyRead("queue", "throughput", group, err)
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrUnknownGroup, group)
	}
	return ts, nil
}

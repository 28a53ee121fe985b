package queue

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
)

// poll wakes the partitions the Processor runs that have jobs due now: one
// statement per group (queuePoll) for all of them. Notifications (Listen)
// wake a partition when a job is enqueued for it; the poll finds what no
// notification announces: jobs scheduled for later or retried after a
// backoff that came due, and jobs whose notification was lost. A woken
// partition fetches (with the others woken, in one statement: see
// fetcher.go); a partition that has its due jobs in hand already fetches
// nothing new. A group paused as a whole is not polled.
func (p *Processor) poll(ctx context.Context) {
	for group, parts := range p.owned() {
		if ps := p.pauses.of(group); ps != nil && ps.all {
			p.pauses.skips.Add(1)
			continue
		}
		slices.Sort(parts)
		rows, err := p.pool.Query(ctx, p.q.Poll, group, parts)
		var due []int32
		if err == nil {
			due, err = pgx.CollectRows(rows, pgx.RowTo[int32])
		}
		if err != nil {
			if ctx.Err() == nil {
				p.fails.Fail("poll", "queue: polling for due jobs failed", "group", group, "err", err)
			}
			continue
		}
		p.fails.Recovered("poll", "queue: polling for due jobs recovered")
		p.polls.Add(1)
		for _, part := range due {
			p.wake(wakeKey{group, int(part)}, false)
		}
	}
}

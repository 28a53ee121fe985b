package queue

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
)

// poll is the member's poll, every PollInterval: in one round trip (one
// read-only transaction without JIT or sequential scans: see memberTx), it reads the pauses of its groups and, per group,
// which of the partitions it runs have jobs due now (queuePoll), and wakes
// those. Notifications (Listen) wake a partition when a job is enqueued
// for it; the poll finds what no notification announces: jobs scheduled
// for later or retried after a backoff that came due, and jobs whose
// notification was lost. A woken partition fetches (with the others
// woken, in one statement: see fetcher.go); a partition that has its due
// jobs in hand already fetches nothing new. The partitions of a group
// paused as a whole are not woken.
func (p *Processor) poll(ctx context.Context) {
	owned := p.owned()
	groups := make([]string, 0, len(owned))
	for g := range owned {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	due := make([][]int32, len(groups))
	err := p.pauses.loadWith(ctx, nil, func(watched []string) (pgx.Rows, func() error, error) {
		b := &pgx.Batch{}
		memberTx(b, true, func() {
			b.Queue(p.pz.Kinds, watched) // read first, by loadWith
			for i, g := range groups {
				parts := owned[g]
				slices.Sort(parts)
				b.Queue(p.q.Poll, g, parts).Query(func(rows pgx.Rows) (err error) {
					due[i], err = pgx.CollectRows(rows, pgx.RowTo[int32])
					return err
				})
			}
		})
		br := p.pool.SendBatch(ctx, b)
		_, err := br.Exec() // BEGIN
		if err == nil {
			_, err = br.Exec() // SET
		}
		var rows pgx.Rows
		if err == nil {
			rows, err = br.Query()
		}
		if err != nil {
			br.Close()
			return nil, nil, err
		}
		return rows, br.Close, nil // Close runs the polls' callbacks
	})
	if err != nil {
		if ctx.Err() == nil {
			p.fails.Fail("poll", "queue: polling for due jobs failed", "err", err)
		}
		return
	}
	p.fails.Recovered("poll", "queue: polling for due jobs recovered")
	p.polls.Add(1)
	for i, g := range groups {
		if ps := p.pauses.of(g); ps != nil && ps.all {
			p.pauses.skips.Add(1)
			continue
		}
		for _, part := range due[i] {
			p.wake(wakeKey{g, int(part)}, false)
		}
	}
}

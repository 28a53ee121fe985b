package queue

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// minPollGap is the shortest wait between two polls: jobs coming due
// closer together than that are found together.
const minPollGap = 20 * time.Millisecond

// poll is the member's poll: in one round trip (one read-only transaction
// without JIT or sequential scans, on generic plans: see genericFetch), it reads the pauses of
// its groups and, per group, which of the partitions it runs have jobs due
// now or within PollInterval (queuePoll), and wakes those with jobs due
// now. It returns when to poll next: PollInterval after it started, or
// sooner when a job comes due before (at least minPollGap after it ended). Notifications (Listen) wake a
// partition when a job is enqueued for it; the poll finds what no
// notification announces: jobs scheduled for later or retried after a
// backoff, as they come due, and jobs whose notification was lost. A woken
// partition fetches (with the others woken, in one statement: see
// fetcher.go); a partition that has its due jobs in hand already fetches
// nothing new. The partitions of a group paused as a whole are not woken.
func (p *Processor) poll(ctx context.Context) (next time.Time) {
	next = time.Now().Add(p.cfg.PollInterval)
	owned := p.owned()
	groups := make([]string, 0, len(owned))
	for g := range owned {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	type soon struct {
		Partition int32
		WaitUs    int64
	}
	due := make([][]soon, len(groups))
	err := p.pauses.loadWith(ctx, nil, func(watched []string) (pgx.Rows, func() error, error) {
		b := &pgx.Batch{}
		genericFetch(b, func() { // planned once per connection, as the fetch
			b.Queue(p.pz.Kinds, watched) // read first, by loadWith
			for i, g := range groups {
				parts := owned[g]
				slices.Sort(parts)
				b.Queue(p.q.Poll, g, parts, p.cfg.PollInterval.Microseconds()).Query(func(rows pgx.Rows) (err error) {
					due[i], err = pgx.CollectRows(rows, pgx.RowToStructByPos[soon])
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
		return next
	}
	p.fails.Recovered("poll", "queue: polling for due jobs recovered")
	p.polls.Add(1)
	now := time.Now()
	for i, g := range groups {
		if ps := p.pauses.of(g); ps != nil && ps.all {
			p.pauses.skips.Add(1)
			continue // a resume wakes the partitions
		}
		for _, s := range due[i] {
			if s.WaitUs == 0 {
				p.wake(wakeKey{g, int(s.Partition)}, false)
			} else {
				if at := now.Add(max(time.Duration(s.WaitUs)*time.Microsecond, minPollGap)); at.Before(next) {
					next = at
				}
			}
		}
	}
	return next
}

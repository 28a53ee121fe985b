package queue

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// RetainChunk is the most finished jobs one retention statement deletes:
// a member deletes its partitions' old finished jobs in statements of at
// most this many rows, one after the other, until one deletes fewer.
const RetainChunk = 1000

// retainChunks bounds the statements of one round of retention per group,
// so that a large deletion does not hold up the member's loop (its polls):
// a round cut short goes on at the next poll.
const retainChunks = 10

// DefaultBatchRetention is ProcessorConfig.BatchRetention's default: 30
// days.
const DefaultBatchRetention = 30 * 24 * time.Hour

// RetainBatches bounds the finished batches one retention round looks at
// per group: the batches whose items it deletes (probing each once per
// partition), those it finds without items, and those it deletes. So a
// round's cost does not grow with the number of batches ever run.
const RetainBatches = 100

// retain runs one round of retention for all the partitions the Processor
// runs (see the member's loop): per group, of plain jobs then of the items
// of finished batches, chunk after chunk until one comes back short, ctx
// ends or a statement fails (logged; the next round tries again). It
// reports whether the round finished: false when it was cut short with
// more to delete. Its deletes are not fenced: jobs finished that long ago
// are nobody's any more.
func (p *Processor) retain(ctx context.Context) bool {
	finished := true
	for group, parts := range p.owned() {
		slices.Sort(parts)
		budget := retainChunks
		done := p.retainWith(ctx, group, parts, p.q.Retain, &budget) &&
			p.retainWith(ctx, group, parts, p.q.RetainItems, &budget)
		more := false
		if done {
			more = p.retainBatches(ctx, group)
		}
		finished = finished && (done || budget > 0) && !more
	}
	return finished
}

// retainWith runs stmt (Retain or RetainItems) chunk after chunk, at most
// *budget of them (counted down), and reports whether it ended with a
// short chunk.
func (p *Processor) retainWith(ctx context.Context, group string, parts []int32, stmt string, budget *int) bool {
	for ctx.Err() == nil && *budget > 0 {
		*budget--
		var tag pgconn.CommandTag
		b := &pgx.Batch{}
		memberTx(b, false, func() {
			args := []any{group, parts, p.cfg.Retention.Microseconds(), RetainChunk}
			if stmt == p.q.RetainItems {
				args = append(args, RetainBatches)
			}
			b.Queue(stmt, args...).Exec(func(t pgconn.CommandTag) error {
				tag = t
				return nil
			})
		})
		if err := p.pool.SendBatch(ctx, b).Close(); err != nil {
			if ctx.Err() == nil {
				p.fails.Fail("retain", "queue: deleting old finished jobs failed", "group", group, "err", err)
			}
			return false
		}
		p.fails.Recovered("retain", "queue: deleting old finished jobs recovered")
		if n := tag.RowsAffected(); n > 0 {
			p.log.Debug("queue: deleted old finished jobs", "group", group, "partitions", len(parts), "jobs", n)
		}
		if tag.RowsAffected() < RetainChunk {
			return true
		}
	}
	return false
}

// retainBatches marks the finished batches of group whose items are all
// gone, then deletes those finished longer ago than BatchRetention: at
// most RetainBatches of each, in one round trip. It reports whether either
// hit that bound (more may be left: the round counts as cut short, and the
// next comes sooner, so a backlog drains at RetainBatches per round rather
// than per RetentionInterval: after migration 0016 every finished batch
// starts unmarked). A failure is logged, and the next round tries again.
func (p *Processor) retainBatches(ctx context.Context, group string) (more bool) {
	var marked, deleted pgconn.CommandTag
	b := &pgx.Batch{}
	memberTx(b, false, func() {
		b.Queue(p.batches.q.MarkGone, group, p.cfg.Retention.Microseconds(), RetainBatches).Exec(func(t pgconn.CommandTag) error {
			marked = t
			return nil
		})
		b.Queue(p.batches.q.Retain, group, p.cfg.BatchRetention.Microseconds(), RetainBatches).Exec(func(t pgconn.CommandTag) error {
			deleted = t
			return nil
		})
	})
	if err := p.pool.SendBatch(ctx, b).Close(); err != nil {
		if ctx.Err() == nil {
			p.fails.Fail("retain-batches", "queue: deleting old finished batches failed", "group", group, "err", err)
		}
		return false
	}
	p.fails.Recovered("retain-batches", "queue: deleting old finished batches recovered")
	if marked.RowsAffected() > 0 || deleted.RowsAffected() > 0 {
		p.log.Debug("queue: retention of finished batches", "group", group, "items_gone", marked.RowsAffected(),
			"deleted", deleted.RowsAffected())
	}
	return marked.RowsAffected() >= RetainBatches || deleted.RowsAffected() >= RetainBatches
}

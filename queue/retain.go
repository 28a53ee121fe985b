package queue

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/partition"
)

// RetainChunk is the most finished jobs one retention statement deletes:
// an owner deletes its partition's old finished jobs in statements of at
// most this many rows, one after the other, until one deletes fewer.
const RetainChunk = 1000

// retainer deletes o's partition's finished jobs older than Retention, on
// its own goroutine: at once, then every RetentionInterval, whether the
// partition is idle or busy, in chunks of RetainChunk rows. It stops when
// ctx ends or stop is called (stop waits for it). Its deletes are not
// fenced: jobs finished that long ago are nobody's any more.
func (p *Processor) retainer(ctx context.Context, o partition.Ownership, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			p.retain(ctx, o, log)
			t.Reset(p.cfg.RetentionInterval)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// retain runs one round of retention, of plain jobs then of the items of
// finished batches: chunk after chunk until one comes back short, ctx ends
// or a statement fails (logged; the next round tries again).
func (p *Processor) retain(ctx context.Context, o partition.Ownership, log *slog.Logger) {
	if p.retainWith(ctx, o, log, p.q.Retain) {
		p.retainWith(ctx, o, log, p.q.RetainItems)
	}
}

// retainWith runs stmt (Retain or RetainItems) chunk after chunk, and
// reports whether it ended with a short chunk.
func (p *Processor) retainWith(ctx context.Context, o partition.Ownership, log *slog.Logger, stmt string) bool {
	for ctx.Err() == nil {
		tag, err := p.pool.Exec(ctx, stmt, o.Group, o.Partition, p.cfg.Retention.Microseconds(), RetainChunk)
		if err != nil {
			if ctx.Err() == nil {
				p.fail("retain", o, "queue: deleting old finished jobs failed", "err", err)
			}
			return false
		}
		p.fails.Recovered("retain", "queue: deleting old finished jobs recovered")
		if n := tag.RowsAffected(); n > 0 {
			log.Debug("queue: deleted old finished jobs", "jobs", n)
		}
		if tag.RowsAffected() < RetainChunk {
			return true
		}
	}
	return false
}

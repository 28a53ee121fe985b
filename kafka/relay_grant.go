package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/outboxtx"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// relayGrant is one grant's relay of one partition.
type relayGrant struct {
	r   *Relay
	s   *relaySession
	o   partition.Ownership
	st  *relayPartition
	p   *producer // nil until there is something to publish, and after a failure
	log *slog.Logger
}

// ProgressError is returned when the progress committed in Kafka for a
// partition is past the last segment its outbox ever numbered: the outbox
// tables were reset or restored from an older backup, or another
// deployment publishes under the same TransactionalIDPrefix. The relay
// does not publish the partition (what it would publish is numbered below
// the progress and would be skipped silently) until it is resolved; see
// docs/kafka.md. It wraps ErrProgressAhead.
type ProgressError struct {
	Group     string
	Partition int
	// Progress is the last segment Kafka says was published; Head the last
	// segment the outbox numbered.
	Progress, Head int64
}

func (e *ProgressError) Error() string {
	return fmt.Sprintf("kafka: relay %s/%d: the progress committed in Kafka (segment %d) is past the outbox's last segment (%d): outbox tables reset or restored, or another deployment uses the same TransactionalIDPrefix",
		e.Group, e.Partition, e.Progress, e.Head)
}

// Unwrap returns ErrProgressAhead.
func (e *ProgressError) Unwrap() error { return ErrProgressAhead }

// ErrProgressAhead is wrapped by *ProgressError.
var ErrProgressAhead = errors.New("kafka: relay progress ahead of the outbox")

// drain publishes the partition's outbox until none is left. With no
// producer yet, it first reads whether anything is left at all (one
// statement): an idle partition never opens a producer.
func (g *relayGrant) drain(ctx context.Context) error {
	if g.p == nil {
		var head int64
		var pending bool
		if err := g.r.pool.QueryRow(ctx, g.r.q.Head, g.o.Group, g.o.Partition).Scan(&head, &pending); err != nil {
			return store.ClassifyRead("outbox", "head", g.name(), err)
		}
		if !pending {
			g.st.pending.Store(0)
			g.st.oldest.Store(0)
			return nil
		}
		p, err := g.r.newProducer(ctx, g)
		if err != nil {
			return err
		}
		if p.progress > head {
			p.close()
			return &ProgressError{Group: g.o.Group, Partition: g.o.Partition, Progress: p.progress, Head: head}
		}
		g.p = p
		g.st.progress.Store(p.progress)
		g.log.Debug("kafka: relay producer initialised", "progress", p.progress, "head", head)
		if err := g.prune(ctx, p.progress); err != nil {
			return err
		}
	}
	for ctx.Err() == nil {
		b, err := g.read(ctx, g.p.progress)
		if err != nil {
			return err
		}
		if b.last == 0 {
			g.st.pending.Store(0)
			g.st.oldest.Store(0)
			return nil
		}
		if recs := b.records(); len(recs) > 0 {
			start := time.Now()
			if err := g.p.publish(ctx, recs, b.last); err != nil {
				return err
			}
			g.r.transactions.Add(1)
			g.r.records.Add(int64(len(recs)))
			if h := g.r.cfg.OnPublish; h != nil {
				h(Publish{Group: g.o.Group, Partition: g.o.Partition, Token: g.o.Token,
					First: b.rows[0].seq, Last: b.last, Records: len(recs), Took: time.Since(start)})
			}
		}
		// Segments without records (their records were appended in a
		// savepoint rolled back) publish nothing: deleting them is their
		// whole publication.
		g.p.progress = b.last
		g.st.progress.Store(b.last)
		if err := g.prune(ctx, b.last); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (g *relayGrant) name() string { return fmt.Sprintf("%s/%d", g.o.Group, g.o.Partition) }

// relayBatch is what one Kafka transaction publishes: the records of
// consecutive segments, up to last.
type relayBatch struct {
	rows []relayRow
	last int64 // the last segment (0: nothing to publish)
}

// relayRow is a row read: a record of segment seq, or an empty segment
// (rec nil).
type relayRow struct {
	seq int64
	rec *kgo.Record
}

// records returns the batch's records, in order.
func (b relayBatch) records() []*kgo.Record {
	recs := make([]*kgo.Record, 0, len(b.rows))
	for _, r := range b.rows {
		if r.rec != nil {
			recs = append(recs, r.rec)
		}
	}
	return recs
}

// read returns the records of the segments after progress, whole segments
// only, at most MaxRecords unless the first segment alone has more.
func (g *relayGrant) read(ctx context.Context, progress int64) (relayBatch, error) {
	b, segs, full, err := g.query(ctx, g.r.q.Read, progress, g.r.cfg.MaxRecords)
	if err != nil || !full {
		return b, err
	}
	// The last segment may be cut by the limit: leave it to the next
	// transaction, unless it is the only one; then read it whole.
	if segs > 1 {
		for b.rows[len(b.rows)-1].seq == b.last {
			b.rows = b.rows[:len(b.rows)-1]
		}
		b.last = b.rows[len(b.rows)-1].seq
		return b, nil
	}
	b, _, _, err = g.query(ctx, g.r.q.ReadSegment, b.last, -1)
	return b, err
}

// query runs Read (limit >= 0) or ReadSegment and returns its rows, the
// number of segments, and whether the limit was reached.
func (g *relayGrant) query(ctx context.Context, q string, from int64, limit int) (b relayBatch, segs int, full bool, err error) {
	var rows pgx.Rows
	if limit >= 0 {
		rows, err = g.r.pool.Query(ctx, q, g.o.Group, g.o.Partition, from, limit)
	} else {
		rows, err = g.r.pool.Query(ctx, q, g.o.Group, g.o.Partition, from)
	}
	if err != nil {
		return b, 0, false, store.ClassifyRead("outbox", "read", g.name(), err)
	}
	defer rows.Close()
	var oldest int64
	for rows.Next() {
		var seq, ageUS int64
		var topic *string
		var key, value, headers []byte
		if err := rows.Scan(&seq, &ageUS, &topic, &key, &value, &headers); err != nil {
			return b, 0, false, store.ClassifyRead("outbox", "read", g.name(), err)
		}
		if seq != b.last {
			segs++
			b.last = seq
			if segs == 1 {
				oldest = time.Now().Add(-time.Duration(ageUS) * time.Microsecond).UnixNano()
			}
		}
		row := relayRow{seq: seq}
		if topic != nil {
			row.rec = &kgo.Record{Topic: *topic, Key: key, Value: value}
			if err := outboxtx.DecodeHeaders(headers, func(k string, v []byte) {
				row.rec.Headers = append(row.rec.Headers, kgo.RecordHeader{Key: k, Value: v})
			}); err != nil {
				return b, 0, false, fmt.Errorf("kafka: relay %s segment %d: %w", g.name(), seq, err)
			}
		}
		b.rows = append(b.rows, row)
	}
	if err := rows.Err(); err != nil {
		return b, 0, false, store.ClassifyRead("outbox", "read", g.name(), err)
	}
	if limit >= 0 {
		g.st.pending.Store(int64(segs))
		g.st.oldest.Store(oldest)
	}
	return b, segs, limit >= 0 && len(b.rows) >= limit, nil
}

// prune deletes the published segments (up to progress) with their
// records, DeleteChunk segments per statement.
func (g *relayGrant) prune(ctx context.Context, progress int64) error {
	for {
		var n int
		if err := g.r.pool.QueryRow(ctx, g.r.q.Delete, g.o.Group, g.o.Partition, progress, g.r.cfg.DeleteChunk).Scan(&n); err != nil {
			return store.Classify("outbox", "delete published", g.name(), err)
		}
		if n < g.r.cfg.DeleteChunk {
			return nil
		}
	}
}

// closeProducer closes the grant's producer, if any.
func (g *relayGrant) closeProducer() {
	if g.p != nil {
		g.p.close()
		g.p = nil
	}
}

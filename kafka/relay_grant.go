package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
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
// partition does not belong to its outbox: it was written for another
// outbox (the outbox tables were reset, or another deployment publishes
// under the same TransactionalIDPrefix), it is past the last segment the
// outbox numbered, or the segment it names took other contents (the
// database was restored from an older backup, or failed over to a replica
// that lost commits). Publishing would skip records silently, so the relay refuses:
// it records the refusal in the outbox and does not publish the
// partition, whichever worker owns it, until an operator clears it
// (ClearRefusal, `leasehold outbox clear`; docs/kafka.md). It wraps
// ErrProgressMismatch.
type ProgressError struct {
	Group     string
	Partition int
	// Reason says what does not match.
	Reason string
}

func (e *ProgressError) Error() string {
	return fmt.Sprintf("kafka: relay %s/%d refuses to publish: %s (docs/kafka.md, \"Progress that does not belong to the outbox\")",
		e.Group, e.Partition, e.Reason)
}

// Unwrap returns ErrProgressMismatch.
func (e *ProgressError) Unwrap() error { return ErrProgressMismatch }

// ErrProgressMismatch is wrapped by *ProgressError.
var ErrProgressMismatch = errors.New("kafka: relay progress does not belong to the outbox")

// head is what the Head statement reads of a partition's outbox.
type head struct {
	last     int64   // the last segment numbered (0: none)
	id       *string // the outbox's identity (nil: no segment ever sealed)
	refused  *string // why the relay refused, if it did
	adopt    bool    // a refusal was cleared: progress not this outbox's is ignored
	oldestUS *int64  // age of the oldest segment left; nil: none
}

func (g *relayGrant) head(ctx context.Context) (head, error) {
	var h head
	if err := g.r.pool.QueryRow(ctx, g.r.q.Head, g.o.Group, g.o.Partition).Scan(&h.last, &h.id, &h.refused, &h.adopt, &h.oldestUS); err != nil {
		return h, store.ClassifyRead("outbox", "head", g.name(), err)
	}
	if h.oldestUS == nil {
		g.st.pending.Store(0)
		g.st.oldest.Store(0)
	} else {
		g.st.pending.Store(max(g.st.pending.Load(), 1))
		g.st.oldest.Store(time.Now().Add(-time.Duration(*h.oldestUS) * time.Microsecond).UnixNano())
	}
	return h, nil
}

// drain publishes the partition's outbox until none is left. With no
// producer yet, it first reads whether anything is left at all (one
// statement): an idle partition never opens a producer.
func (g *relayGrant) drain(ctx context.Context) error {
	if g.p == nil {
		p, err := g.open(ctx)
		if err != nil || p == nil {
			return err
		}
		g.p = p
		if err := g.prune(ctx, p.progress); err != nil {
			return err
		}
	}
	for ctx.Err() == nil {
		b, full, err := g.read(ctx, g.p.progress)
		if err != nil {
			return err
		}
		if b.last == 0 {
			return nil
		}
		if recs := b.records(); len(recs) > 0 {
			start := time.Now()
			if err := g.p.publish(ctx, recs, b.last, b.lastScope()); err != nil {
				return err
			}
			g.r.transactions.Add(1)
			g.r.records.Add(int64(len(recs)))
			if h := g.r.cfg.OnPublish; h != nil {
				g.onPublish(h, Publish{Group: g.o.Group, Partition: g.o.Partition, Token: g.o.Token,
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
		if !full {
			// All that was committed when the read began is published;
			// a commit since has woken the relay (the wake-up channel was
			// registered before the first read, and keeps one wake-up).
			g.st.pending.Store(0)
			g.st.oldest.Store(0)
			return nil
		}
	}
	return ctx.Err()
}

// open returns the grant's producer, initialised, with the progress it
// read from Kafka checked against the outbox; nil if nothing waits.
func (g *relayGrant) open(ctx context.Context) (*producer, error) {
	h, err := g.head(ctx)
	switch {
	case err != nil:
		return nil, err
	case h.refused != nil:
		return nil, &ProgressError{Group: g.o.Group, Partition: g.o.Partition, Reason: *h.refused}
	case h.oldestUS == nil:
		return nil, nil // nothing to publish
	case h.id == nil:
		return nil, &ProgressError{Group: g.o.Group, Partition: g.o.Partition,
			Reason: "the outbox's head row is missing while segments are left (deleted by hand?): the segments' numbers cannot be trusted"}
	}
	p, err := g.r.newProducer(ctx, g)
	if err != nil {
		return nil, err
	}
	// Read again, after the producer's initialisation: from now on only
	// this producer publishes, so the head read now is at least the
	// progress, unless the progress is not this outbox's.
	if h, err = g.head(ctx); err != nil {
		p.close()
		return nil, err
	}
	if h.refused != nil || h.id == nil {
		p.close()
		return nil, &ProgressError{Group: g.o.Group, Partition: g.o.Partition, Reason: deref(h.refused)}
	}
	reason, err := g.mismatch(ctx, p, h)
	if err != nil {
		p.close()
		return nil, err
	}
	switch {
	case reason != "" && h.adopt:
		// An operator cleared the refusal: publish every segment left,
		// from here on under this outbox's identity.
		g.log.Warn("kafka: relay ignores progress that is not this outbox's, as an operator cleared its refusal: publishing every segment left",
			"reason", reason, "progress", p.progress)
		p.progress = 0
	case reason != "":
		p.close()
		if _, err := g.r.pool.Exec(ctx, g.r.q.Refuse, g.o.Group, g.o.Partition, reason); err != nil {
			return nil, store.Classify("outbox", "refuse", g.name(), err)
		}
		g.log.Error("kafka: relay refuses to publish the partition: the progress in Kafka does not belong to this outbox; cleared by an operator only",
			"reason", reason, "progress", p.progress)
		return nil, &ProgressError{Group: g.o.Group, Partition: g.o.Partition, Reason: reason}
	case h.adopt && p.progress > 0:
		// The progress is this outbox's own again.
		if _, err := g.r.pool.Exec(ctx, g.r.q.Adopted, g.o.Group, g.o.Partition); err != nil {
			p.close()
			return nil, store.Classify("outbox", "adopted", g.name(), err)
		}
	}
	p.outbox = *h.id
	g.st.progress.Store(p.progress)
	g.log.Debug("kafka: relay producer initialised", "progress", p.progress, "head", h.last)
	return p, nil
}

// onPublish calls the OnPublish hook, logging a panic of it.
func (g *relayGrant) onPublish(h func(Publish), p Publish) {
	defer func() {
		if r := recover(); r != nil {
			g.log.Error("kafka: RelayConfig.OnPublish panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	h(p)
}

func (g *relayGrant) name() string { return fmt.Sprintf("%s/%d", g.o.Group, g.o.Partition) }

// relayBatch is what one Kafka transaction publishes: the records of
// consecutive segments, up to last.
type relayBatch struct {
	rows []relayRow
	last int64 // the last segment (0: nothing to publish)
}

// lastScope returns the scope of the batch's last segment.
func (b relayBatch) lastScope() int64 { return b.rows[len(b.rows)-1].scope }

// relayRow is a row read: a record of segment seq (of scope), or an empty
// segment (rec nil).
type relayRow struct {
	seq, scope int64
	rec        *kgo.Record
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
// only, at most MaxRecords unless the first segment alone has more, and
// whether the read reached its limit (more may follow).
func (g *relayGrant) read(ctx context.Context, progress int64) (relayBatch, bool, error) {
	b, segs, full, err := g.query(ctx, g.r.q.Read, progress, g.r.cfg.MaxRecords)
	if err != nil || !full {
		return b, false, err
	}
	// The last segment may be cut by the limit: leave it to the next
	// transaction, unless it is the only one; then read it whole.
	if segs > 1 {
		for b.rows[len(b.rows)-1].seq == b.last {
			b.rows = b.rows[:len(b.rows)-1]
		}
		b.last = b.rows[len(b.rows)-1].seq
		return b, true, nil
	}
	b, _, _, err = g.query(ctx, g.r.q.ReadSegment, b.last, -1)
	return b, true, err
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
		var id, refused, topic *string
		var lo, seqp, scope, ageUS *int64
		var key, value, headers []byte
		if err := rows.Scan(&id, &refused, &lo, &seqp, &scope, &ageUS, &topic, &key, &value, &headers); err != nil {
			return b, 0, false, store.ClassifyRead("outbox", "read", g.name(), err)
		}
		if err := g.recheck(id, refused, lo); err != nil {
			return b, 0, false, err
		}
		if seqp == nil {
			break // no segment
		}
		seq := *seqp
		if seq != b.last {
			segs++
			b.last = seq
			if segs == 1 {
				oldest = time.Now().Add(-time.Duration(*ageUS) * time.Microsecond).UnixNano()
			}
		}
		row := relayRow{seq: seq, scope: *scope}
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

// errOutboxChanged is returned by a read whose head check shows the outbox
// changed under the grant's live producer; the producer is closed and the
// next attempt opens a new one, which checks the progress again.
var errOutboxChanged = errors.New("kafka: relay: the outbox changed under a live producer (its identity, a refusal recorded, or a segment at or below the progress): checking the progress again")

// recheck returns errOutboxChanged when a read's head check (id, refused,
// lo: the smallest segment left) does not fit the live producer: the
// outbox's tables were reset, the database failed over to a copy that had
// lost commits, or a refusal was recorded. (A producer's published
// segments are deleted before the next read, so none at or below its
// progress is left.)
func (g *relayGrant) recheck(id, refused *string, lo *int64) error {
	if g.p == nil {
		return nil
	}
	if refused != nil || id == nil || *id != g.p.outbox || lo != nil && *lo <= g.p.progress {
		return errOutboxChanged
	}
	return nil
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

package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/outboxtx"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// grant is one owner's hold on one Kafka partition.
type grant struct {
	s       *session
	o       partition.Ownership
	topic   string
	p       int32
	tp      topicPartition
	granted time.Time
	first   bool // the first batch of the grant is not handled yet
	log     *slog.Logger
}

// Run consumes the Kafka partition of group partition o.Partition (topic
// o.Partition / PartitionsPerTopic, partition o.Partition %
// PartitionsPerTopic) until ctx is cancelled (handoff, lost lease, Stop),
// or until a commit is refused by the fence. It is the partition member's
// Run: the worker calls it for each grant, between Open and Close. An idle
// slot (a partition the topic does not have yet) waits until the
// partition is added. Run returns at once, with an error logged, if the
// Consumer is not open or o is of another group than Open's.
func (c *Consumer) Run(ctx context.Context, o partition.Ownership) {
	s := c.current()
	switch {
	case s == nil:
		c.log.Error("kafka: Run refused", "group", o.Group, "partition", o.Partition, "err", ErrNotOpen)
		return
	case s.group != o.Group || o.Partition < 0 || o.Partition >= c.Partitions():
		s.log.Error("kafka: Run refused: not a partition of the group the consumer is open for",
			"run_group", o.Group, "partition", o.Partition, "partitions", c.Partitions())
		return
	}
	topic, p := c.slot(o.Partition)
	g := &grant{s: s, o: o, topic: topic, p: p, tp: topicPartition{topic, p}, granted: time.Now(), first: true,
		log: s.log.With("topic", topic, "partition", p, "token", int64(o.Token))}
	if !s.waitPartition(ctx, topic, p) {
		return // an idle slot: the partition does not exist (yet)
	}
	c.mu.Lock()
	c.owned[g.tp] = o.Token
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.owned, g.tp)
		delete(c.stalled, g.tp)
		c.mu.Unlock()
	}()
	g.log.Debug("kafka: partition granted")
	attempt := 0
	verify := false // the first attempt trusts the stored offset: the broker refuses one outside the log
	for ctx.Err() == nil {
		progressed, err := c.consume(ctx, g, verify)
		verify = true
		if progressed {
			attempt = 0
			s.fails.Recovered("consume", "kafka: consuming recovered")
		}
		var oe *OffsetError
		switch {
		case errors.Is(err, fence.ErrFenced):
			s.fails.Fail("fenced", "kafka: fenced: a newer owner has the partition; the batch rolled back",
				"topic", topic, "partition", p, "token", int64(o.Token), "err", err)
			return
		case ctx.Err() != nil:
			g.log.Debug("kafka: partition released", "cause", context.Cause(ctx))
			return
		case errors.As(err, &oe):
			g.log.Error("kafka: stored offset outside the log; the partition is not consumed until it is corrected",
				"err", err, "stored", oe.Stored, "log_start", oe.LogStart, "log_end", oe.LogEnd)
		case err != nil:
			s.fails.Fail("consume", "kafka: consuming failed; continuing from the stored offset after a backoff",
				"topic", topic, "partition", p, "token", int64(o.Token), "err", err, "attempt", attempt+1)
		}
		d := c.retry.Delay(attempt)
		attempt++
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
}

// errRefetch means the fetch position must be re-resolved from the stored
// offset (the broker answered OFFSET_OUT_OF_RANGE while consuming).
var errRefetch = errors.New("kafka: broker reported the fetch offset out of range")

// consume reads the stored offset, consumes from it and commits batch
// after batch until ctx ends or something fails.
func (c *Consumer) consume(ctx context.Context, g *grant, verify bool) (progressed bool, err error) {
	next, prev, err := c.position(ctx, g, verify)
	if err != nil {
		return false, err
	}
	at := kgo.NewOffset().At(next)
	if next < 0 {
		at, next = kgo.NewOffset().AtStart(), 0
	}
	cl, err := kgo.NewClient(append(g.s.opts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{g.topic: {g.p: at}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxWait(c.cfg.FetchMaxWait),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return false, fmt.Errorf("kafka: client: %w", err)
	}
	defer cl.Close()
	for {
		fs := cl.PollRecords(ctx, c.cfg.MaxBatch)
		if ctx.Err() != nil {
			return progressed, ctx.Err()
		}
		var recs []*kgo.Record
		var ferr error
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if fp.Err != nil && ferr == nil {
				ferr = fp.Err
			}
			for _, r := range fp.Records {
				// Only this partition, in order, never twice (a fetch is
				// at or after next; the filter is defensive).
				if r.Topic == g.topic && r.Partition == g.p && r.Offset >= next {
					recs = append(recs, r)
					next = r.Offset + 1
				}
			}
		})
		if len(recs) > 0 {
			b := &Batch{Group: g.s.group, Topic: g.topic, Partition: g.p, Token: g.o.Token, Granted: g.granted, Records: recs}
			if err := c.apply(ctx, g, b, prev); err != nil {
				return progressed, err
			}
			n := b.Next()
			prev, progressed = &n, true
			c.batches.Add(1)
			c.records.Add(int64(len(recs)))
			if g.first {
				g.first = false
				g.log.Debug("kafka: first batch committed", "since_grant", time.Since(g.granted), "records", len(recs))
			}
		}
		if ferr != nil {
			if errors.Is(ferr, kerr.OffsetOutOfRange) {
				return progressed, errRefetch
			}
			return progressed, fmt.Errorf("kafka: fetch %s/%d: %w", g.topic, g.p, ferr)
		}
	}
}

// position returns where the owner starts (-1: the log start): the stored
// offset when it is in the log, else what StartAt or OutOfRange say. prev
// is the stored offset the next commit must find (nil: none stored).
// Unless verify is set, a stored offset is used without listing the log's
// range (two round trips fewer at a grant): the fetch, which never resets,
// reports an offset outside the log, and the next attempt verifies.
func (c *Consumer) position(ctx context.Context, g *grant, verify bool) (next int64, prev *int64, err error) {
	stored, _, ok, err := c.stored(ctx, c.pool, g.s.group, g.topic, g.p)
	if err != nil {
		return 0, nil, err
	}
	if !ok && c.cfg.StartAt == StartEarliest {
		g.log.Debug("kafka: no stored offset; starting at the log start")
		return -1, nil, nil
	}
	if ok && !verify {
		return stored, &stored, nil
	}
	start, end, err := g.s.logRange(ctx, g.topic, g.p)
	if err != nil {
		return 0, nil, err
	}
	if !ok {
		g.log.Debug("kafka: no stored offset; starting at the log end", "offset", end)
		if err := c.store(ctx, g, nil, end); err != nil {
			return 0, nil, err
		}
		return end, &end, nil
	}
	if stored >= start && stored <= end {
		c.mu.Lock()
		delete(c.stalled, g.tp)
		c.mu.Unlock()
		return stored, &stored, nil
	}
	oe := &OffsetError{Group: g.s.group, Topic: g.topic, Partition: g.p, Stored: stored, LogStart: start, LogEnd: end}
	to, where := start, "earliest"
	switch c.cfg.OutOfRange {
	case OutOfRangeFail:
		c.mu.Lock()
		c.stalled[g.tp] = oe
		c.mu.Unlock()
		return 0, nil, oe
	case OutOfRangeLatest:
		to, where = end, "latest"
	}
	g.log.Warn("kafka: stored offset outside the log; restarting at the "+where+" offset (OutOfRange policy)",
		"stored", stored, "log_start", start, "log_end", end, "offset", to, "skipped", max(0, to-stored))
	if err := c.store(ctx, g, &stored, to); err != nil {
		return 0, nil, err
	}
	c.resets.Add(1)
	return to, &to, nil
}

// store moves the stored offset from prev to next with no effects, fenced.
func (c *Consumer) store(ctx context.Context, g *grant, prev *int64, next int64) error {
	name := g.o.Lease.Name()
	return c.fence.Tx(ctx, name, g.o.Token, func(tx pgx.Tx) error {
		return c.advance(ctx, tx, g.s.group, g.topic, g.p, g.o.Token, prev, next)
	})
}

// apply runs the handler and commits its effects with the offset advance,
// fenced. The fence is checked after the handler, so the lease row is
// locked (against takeovers and renewals) only for the advance and the
// commit. Once the handler has returned, the commit goes ahead even if ctx
// was just cancelled: the lease is held until Run returns, and the fence
// refuses a stale owner.
func (c *Consumer) apply(ctx context.Context, g *grant, b *Batch, prev *int64) error {
	tx, err := c.fence.Begin(ctx)
	if err != nil {
		c.failed.Add(1)
		return fmt.Errorf("kafka: begin: %w", err)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	defer tx.Rollback(cctx) // after a commit: a no-op
	box := outboxtx.New(c.place, c.st, g.o.Group, g.o.Partition, g.o.Token, tx)
	herr := call(outboxtx.With(ctx, box), c.cfg.Handler, lease.Managed(tx), b)
	box.Close()
	if tx.Conn().PgConn().TxStatus() == 'I' {
		// The handler ended the transaction itself (a raw COMMIT or
		// ROLLBACK through Exec): its effects may have committed without
		// the fence check and the offset advance, which must not now run
		// in autocommit. The batch fails; it runs again, as after a
		// handler error.
		c.failed.Add(1)
		err := fmt.Errorf("kafka: handler, %s/%d offsets %d..%d: %w", b.Topic, b.Partition,
			b.Records[0].Offset, b.Records[len(b.Records)-1].Offset, lease.ErrTxEnded)
		if herr != nil {
			err = fmt.Errorf("%w; the handler's error: %w", err, herr)
		}
		g.log.Error("kafka: the handler ended its transaction itself; its effects may have committed unfenced, without the offset advance", "err", err)
		return err
	}
	if herr != nil {
		c.failed.Add(1)
		return fmt.Errorf("kafka: handler, %s/%d offsets %d..%d: %w", b.Topic, b.Partition,
			b.Records[0].Offset, b.Records[len(b.Records)-1].Offset, herr)
	}
	// The records the handler appended to the outbox become one segment
	// (the partition's head row stays locked until the commit), then the
	// fence check and the offset advance.
	err = box.Seal(cctx, tx)
	if err == nil {
		err = c.fence.Check(cctx, tx, g.o.Lease.Name(), g.o.Token)
	}
	if err == nil {
		err = c.advance(cctx, tx, b.Group, b.Topic, b.Partition, g.o.Token, prev, b.Next())
	}
	if err == nil {
		err = store.Commit(cctx, tx, "kafka: commit", fmt.Sprintf("%s/%d", b.Topic, b.Partition))
		box.Committed(g.log)
		if err != nil {
			err = fmt.Errorf("kafka: commit %s/%d up to %d (outcome read back from the stored offset): %w",
				b.Topic, b.Partition, b.Next(), err)
		}
	}
	switch {
	case errors.Is(err, fence.ErrFenced):
		c.fenced.Add(1)
	case err != nil:
		c.failed.Add(1)
	}
	return err
}

// commitTimeout bounds the fence check, the advance and the commit of a
// batch whose handler returned (they run even when the partition's context
// was just cancelled).
const commitTimeout = 30 * time.Second

// call runs the handler, turning a panic into an error with the stack.
func call(ctx context.Context, h Handler, tx pgx.Tx, b *Batch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return h(ctx, tx, b)
}

package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// A completer records the outcomes of one grant's runs, many at a time, in
// the fenced statement of completeFenced, while the pipeline goes on running
// jobs: a slow job delays no other job's completion, and a run that stalls
// past the lease voids only its own outcome. Outcomes are recorded in the
// order they were added. A statement that fails (other than by the fence)
// is tried again with the outcomes added since, until it succeeds or the
// grant ends, so a key's outcomes are never recorded out of order.

// record is one outcome handed to the completer.
type record struct {
	rec outcome
	ev  event
	key string // the job's key ("" for none), for the pipeline's bookkeeping
}

// recorded is the completer's answer for records it is done with: recorded,
// or refused (err, fenced or not).
type recorded struct {
	recs []record
	err  error
}

type completer struct {
	p     *Processor
	o     partition.Ownership
	log   *slog.Logger
	lease context.Context // done when the grant's lease ends: stop retrying

	mu      sync.Mutex
	buf     []record
	first   time.Time // when the oldest record in buf was added
	closing bool
	done    []recorded // answers not yet taken by the pipeline

	kick  chan struct{} // cap 1: records added, or closing
	ready chan struct{} // cap 1: answers to take
	ended chan struct{} // closed when the completer has stopped
}

func newCompleter(p *Processor, o partition.Ownership, log *slog.Logger, lease context.Context) *completer {
	c := &completer{p: p, o: o, log: log, lease: lease,
		kick: make(chan struct{}, 1), ready: make(chan struct{}, 1), ended: make(chan struct{})}
	go c.loop()
	return c
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// add hands records to the completer.
func (c *completer) add(rs ...record) {
	if len(rs) == 0 {
		return
	}
	c.mu.Lock()
	if len(c.buf) == 0 {
		c.first = time.Now()
	}
	c.buf = append(c.buf, rs...)
	c.mu.Unlock()
	signal(c.kick)
}

// answers takes the answers ready so far.
func (c *completer) answers() []recorded {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.done
	c.done = nil
	return a
}

// close records what is left, once, and stops; ended is closed then.
func (c *completer) close() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	signal(c.kick)
}

func (c *completer) answer(a recorded) {
	c.mu.Lock()
	c.done = append(c.done, a)
	c.mu.Unlock()
	signal(c.ready)
}

func (c *completer) loop() {
	defer close(c.ended)
	interval, size := c.p.cfg.CompleteInterval, c.p.cfg.BatchSize
	retry := time.Duration(0)
	for {
		c.mu.Lock()
		n, closing, wait := len(c.buf), c.closing, time.Until(c.first.Add(interval))
		c.mu.Unlock()
		switch {
		case n == 0 && closing:
			return
		case n == 0 || !closing && n < size && wait > 0:
			t := time.NewTimer(max(wait, time.Millisecond))
			if n == 0 {
				t.Stop()
			}
			select {
			case <-c.kick:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		c.mu.Lock()
		recs := c.buf[:min(len(c.buf), 10*size)]
		c.mu.Unlock()
		err := c.flush(recs)
		var fe *fence.FencedError
		switch {
		case err == nil, errors.As(err, &fe), c.lease.Err() != nil, closing:
			// Done with them: recorded, refused by the fence, or not
			// recordable any more (the grant ended).
			c.mu.Lock()
			c.buf = c.buf[len(recs):]
			if len(c.buf) > 0 {
				c.first = time.Now()
			}
			c.mu.Unlock()
			c.answer(recorded{recs: recs, err: err})
			retry = 0
			switch {
			case err == nil:
				c.p.fails.Recovered("record", "queue: recording outcomes recovered")
			case !errors.As(err, &fe):
				c.p.fail("unrecorded", c.o, "queue: outcomes not recorded; their jobs run again", "jobs", len(recs), "err", err)
			}
		default:
			// A database error: try again, with the records added since.
			retry = min(max(2*retry, 50*time.Millisecond), time.Second)
			c.p.fail("record", c.o, "queue: recording outcomes failed; retrying", "jobs", len(recs), "retry_in", retry, "err", err)
			t := time.NewTimer(retry)
			select {
			case <-t.C:
			case <-c.lease.Done():
			}
			t.Stop()
		}
	}
}

// flush records recs, fenced (see record).
func (c *completer) flush(recs []record) error {
	outs := make([]outcome, len(recs))
	for i, r := range recs {
		outs[i] = r.rec
	}
	ctx, cancel := recordContext(c.lease)
	defer cancel()
	_, err := c.p.record(ctx, c.o, outs)
	return err
}

// record records outcomes, fenced, and returns how many jobs changed. When
// none of the jobs is a batch item, that is one statement committing on
// its own. Otherwise it is a transaction that also finishes the batches
// whose partitions' last items it finished (see batches.finish), so that
// a batch's follow-ups are enqueued by the commit that finishes its last
// item, or not at all.
func (p *Processor) record(ctx context.Context, o partition.Ownership, outs []outcome) (int, error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("queue: record %d outcome(s): %w", len(outs), err)
	}
	defer conn.Release()
	if !slices.ContainsFunc(outs, func(o outcome) bool { return o.item }) {
		// The statement commits on its own: watch for a commit the
		// synchronous standby did not confirm (the outcomes are then tried
		// again).
		done := store.Watch(conn.Conn().PgConn())
		n, _, err := p.completeFenced(ctx, conn, o, outs) // no batch item: nothing drained
		if nr := done(); err == nil && nr != nil {
			return 0, &fence.IndeterminateError{Op: "queue: record outcomes", Resource: o.Lease.Name(), Err: nr}
		}
		return n, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("queue: record %d outcome(s): %w", len(outs), err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // after the commit: a no-op
	n, err := p.recordIn(ctx, tx, o, outs)
	if err != nil {
		return 0, err
	}
	if err := store.Commit(ctx, tx, "queue: record outcomes", o.Lease.Name()); err != nil {
		return 0, store.ClassifyCommit("queue", fmt.Sprintf("record %d outcome(s)", len(outs)), o.Lease.Name(), err)
	}
	return n, nil
}

// recordIn is record in tx, up to the commit, which is the caller's: the
// fenced statement, and the batches whose last items it finished.
func (p *Processor) recordIn(ctx context.Context, tx pgx.Tx, o partition.Ownership, outs []outcome) (int, error) {
	n, drained, err := p.completeFenced(ctx, tx, o, outs)
	if err != nil {
		return 0, err
	}
	if err := p.batches.finish(ctx, tx, drained, p.log); err != nil {
		return 0, err
	}
	return n, nil
}

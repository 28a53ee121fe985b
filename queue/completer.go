package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// The completer records the outcomes of all the member's grants, many at a
// time, in one fenced statement per flush (completeGrants), while the
// pipelines go on running jobs: a slow job delays no other job's
// completion, and a grant whose lease ended voids only its own outcomes.
// Each grant's outcomes are recorded in the order they were added. A
// statement that fails (other than by the fence) is tried again with the
// outcomes added since, for every grant whose lease is live and whose
// pipeline is not closing, so a key's outcomes are never recorded out of
// order.
//
// One goroutine runs while outcomes wait, and returns when none does: an
// idle member has no completer goroutine.

// record is one outcome handed to the completer.
type record struct {
	rec outcome
	ev  event
	key string // the job's key ("" for none), for the pipeline's bookkeeping
	to  *inbox // the grant's pipeline, which takes the answer
}

// recorded is the completer's answer for records it is done with: recorded,
// or refused (err, fenced or not).
type recorded struct {
	recs []record
	err  error
}

// inbox is one grant's side of the completer: the answers for its
// pipeline, and whether it is closing (its records are flushed at once and
// not retried).
type inbox struct {
	o     partition.Ownership
	ready chan struct{} // cap 1: answers to take

	mu      sync.Mutex
	done    []recorded
	closing bool
}

func newInbox(o partition.Ownership) *inbox {
	return &inbox{o: o, ready: make(chan struct{}, 1)}
}

// answers takes the answers ready so far.
func (in *inbox) answers() []recorded {
	in.mu.Lock()
	defer in.mu.Unlock()
	a := in.done
	in.done = nil
	return a
}

func (in *inbox) answer(a recorded) {
	in.mu.Lock()
	in.done = append(in.done, a)
	in.mu.Unlock()
	signal(in.ready)
}

func (in *inbox) isClosing() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.closing
}

// gone reports whether the grant's outcomes can no longer be retried: its
// lease ended, or its pipeline is closing.
func (in *inbox) gone() bool {
	return in.o.Lease.Context().Err() != nil || in.isClosing()
}

type completer struct {
	p *Processor

	mu      sync.Mutex
	buf     []record
	first   time.Time // when the oldest record in buf was added
	running bool      // the loop's goroutine runs
	// hurried: a job waits for outcomes in buf (a transactional job
	// behind its key's earlier outcomes): the next flush runs at once.
	hurried bool
	kick    chan struct{}
}

func newCompleter(p *Processor) *completer {
	return &completer{p: p, kick: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// add hands records of one grant to the completer.
func (c *completer) add(rs ...record) {
	if len(rs) == 0 {
		return
	}
	c.mu.Lock()
	if len(c.buf) == 0 {
		c.first = time.Now()
	}
	c.buf = append(c.buf, rs...)
	if !c.running {
		c.running = true
		go c.loop()
	}
	c.mu.Unlock()
	signal(c.kick)
}

// hurry flushes what waits at once, without waiting CompleteInterval: a
// job waits for it.
func (c *completer) hurry() {
	c.mu.Lock()
	c.hurried = len(c.buf) > 0
	c.mu.Unlock()
	signal(c.kick)
}

// close marks in closing: what it has in the completer is recorded at
// once, and not retried after a failure. Its pipeline then waits for the
// answers to everything it added.
func (c *completer) close(in *inbox) {
	in.mu.Lock()
	in.closing = true
	in.mu.Unlock()
	signal(c.kick)
}

func (c *completer) loop() {
	interval, size := c.p.cfg.CompleteInterval, c.p.cfg.BatchSize
	retry := time.Duration(0)
	for {
		c.mu.Lock()
		n, wait := len(c.buf), time.Until(c.first.Add(interval))
		if n == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		// A closing pipeline waits for its answers, a hurried job for
		// outcomes in buf: no waiting for more.
		urgent := c.hurried || c.closing()
		c.mu.Unlock()
		if !urgent && n < size && wait > 0 {
			t := time.NewTimer(max(wait, time.Millisecond))
			select {
			case <-c.kick:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		c.mu.Lock()
		recs := slices.Clone(c.buf[:min(len(c.buf), 10*size)])
		c.hurried = false
		c.mu.Unlock()
		kept := c.flush(recs)
		c.mu.Lock()
		rest := c.buf[len(recs):]
		c.buf = append(kept, rest...)
		if len(c.buf) > 0 {
			c.first = time.Now()
		}
		c.mu.Unlock()
		if len(kept) == 0 {
			retry = 0
			continue
		}
		// A database error: try again, with the records added since.
		retry = min(max(2*retry, 50*time.Millisecond), time.Second)
		c.backoff(retry)
	}
}

// closing reports whether a record in buf is of a closing pipeline, which
// waits for its answers. The caller holds c.mu.
func (c *completer) closing() bool {
	return slices.ContainsFunc(c.buf, func(r record) bool { return r.to.isClosing() })
}

// backoff waits d after a failed flush, less only when a pipeline with
// records in buf closes (they are then flushed once, not retried): new
// records and hurries wait for it, so a database that is down gets one
// statement per backoff, however busy the member.
func (c *completer) backoff(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return
		case <-c.kick:
			c.mu.Lock()
			closing := c.closing()
			c.mu.Unlock()
			if closing {
				return
			}
		}
	}
}

// flush records recs in one fenced statement and answers each grant; it
// returns the records to try again (a database error, their grants' leases
// live and their pipelines not closing), in order.
func (c *completer) flush(recs []record) (kept []record) {
	var gs []grantOutcomes
	var ins []*inbox
	at := make(map[*inbox]int)
	for _, r := range recs {
		i, ok := at[r.to]
		if !ok {
			i = len(gs)
			at[r.to] = i
			gs, ins = append(gs, grantOutcomes{o: r.to.o}), append(ins, r.to)
		}
		gs[i].outs = append(gs[i].outs, r.rec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	refused := make([]error, len(gs))
	_, err := c.p.record(ctx, gs, refused)
	if err == nil {
		c.p.fails.Recovered("record", "queue: recording outcomes recovered")
	}
	byInbox := make(map[*inbox][]record, len(ins))
	for _, r := range recs {
		byInbox[r.to] = append(byInbox[r.to], r)
	}
	var due time.Time // the earliest retry or snooze recorded
	for i, in := range ins {
		rs := byInbox[in]
		switch {
		case err == nil:
			if refused[i] == nil {
				for _, r := range rs {
					if r.rec.state == "pending" && r.rec.delay != nil {
						if at := time.Now().Add(time.Duration(*r.rec.delay) * time.Microsecond); due.IsZero() || at.Before(due) {
							due = at
						}
					}
				}
			}
			in.answer(recorded{recs: rs, err: refused[i]})
		case in.gone():
			// Not recordable any more: the grant ended, or its pipeline is
			// closing and waits for this answer.
			c.p.fail("unrecorded", in.o, "queue: outcomes not recorded; their jobs run again", "jobs", len(rs), "err", err)
			in.answer(recorded{recs: rs, err: err})
		default:
			c.p.fail("record", in.o, "queue: recording outcomes failed; retrying", "jobs", len(rs), "err", err)
			kept = append(kept, rs...)
		}
	}
	if !due.IsZero() {
		c.p.comesDue(due) // the member polls then, to wake its partition
	}
	// kept is in recs' order: a grant's records stay in the order added.
	if len(kept) > 0 {
		keep := make(map[*inbox]bool)
		for _, r := range kept {
			keep[r.to] = true
		}
		kept = kept[:0]
		for _, r := range recs {
			if keep[r.to] {
				kept = append(kept, r)
			}
		}
	}
	return kept
}

// recordTimeout bounds a statement that records outcomes: it must not be
// cut short by a handoff, only bounded.
const recordTimeout = 30 * time.Second

// record records the outcomes of grants gs, fenced (see completeGrants:
// refused[i] is grant i's refusal), and returns how many jobs changed. When
// none of the jobs is a batch item, that is one statement committing on
// its own. Otherwise it is a transaction that also finishes the batches
// whose partitions' last items it finished (see batches.finish), so that
// a batch's follow-ups are enqueued by the commit that finishes its last
// item, or not at all.
func (p *Processor) record(ctx context.Context, gs []grantOutcomes, refused []error) (int, error) {
	n, item := 0, false
	for _, g := range gs {
		n += len(g.outs)
		item = item || slices.ContainsFunc(g.outs, func(o outcome) bool { return o.item })
	}
	resource := gs[0].o.Lease.Name()
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("queue: record %d outcome(s): %w", n, err)
	}
	defer conn.Release()
	if !item {
		// The statement commits on its own: watch for a commit the
		// synchronous standby did not confirm (the outcomes are then tried
		// again).
		done := store.Watch(conn.Conn().PgConn())
		changed, _, err := p.completeGrants(ctx, standalone(conn), gs, refused) // no batch item: nothing drained
		var ua *unappliedError
		if nr := done(); (err == nil || errors.As(err, &ua)) && nr != nil {
			return 0, &fence.IndeterminateError{Op: "queue: record outcomes", Resource: resource, Err: nr}
		}
		if ua == nil {
			return changed, err
		}
		// Outcomes of batch items without their item flag (logged as the
		// bug it is): the rest committed; these, left pending, are applied
		// now, as items. Should that fail, they stay pending and run
		// again: the rest committed, so the error is logged, not returned
		// (returned, the completer would record the rest twice).
		more, err := p.recordItems(ctx, conn, gs, refused, ua.ids)
		if err != nil {
			p.log.Error("queue: applying batch item outcomes as items failed; they run again", "jobs", ua.ids, "err", err)
		}
		return changed + more, nil
	}
	return p.recordTx(ctx, conn, gs, refused, n, resource)
}

// recordItems applies, as batch items (in a transaction, see recordTx),
// the outcomes of gs whose jobs are ids, and merges their grants'
// refusals into refused.
func (p *Processor) recordItems(ctx context.Context, conn *pgxpool.Conn, gs []grantOutcomes, refused []error, ids []int64) (int, error) {
	var sub []grantOutcomes
	var at []int // sub[j] is gs[at[j]]
	n := 0
	for i, g := range gs {
		var outs []outcome
		for _, o := range g.outs {
			if slices.Contains(ids, o.id) {
				o.item = true
				outs = append(outs, o)
			}
		}
		if len(outs) > 0 {
			sub, at = append(sub, grantOutcomes{g.o, outs}), append(at, i)
			n += len(outs)
		}
	}
	if len(sub) == 0 {
		return 0, nil
	}
	subRefused := make([]error, len(sub))
	changed, err := p.recordTx(ctx, conn, sub, subRefused, n, sub[0].o.Lease.Name())
	for j, r := range subRefused {
		if r != nil {
			refused[at[j]] = r
		}
	}
	return changed, err
}

// recordTx is record in a transaction of its own on conn.
func (p *Processor) recordTx(ctx context.Context, conn *pgxpool.Conn, gs []grantOutcomes, refused []error, n int, resource string) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("queue: record %d outcome(s): %w", n, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // after the commit: a no-op
	changed, err := p.recordIn(ctx, tx, gs, refused)
	if err != nil {
		return 0, err
	}
	if err := store.Commit(ctx, tx, "queue: record outcomes", resource); err != nil {
		return 0, store.ClassifyCommit("queue", fmt.Sprintf("record %d outcome(s)", n), resource, err)
	}
	return changed, nil
}

// recordIn is record in tx, up to the commit, which is the caller's: the
// fenced statement, and the batches whose last items it finished.
func (p *Processor) recordIn(ctx context.Context, tx pgx.Tx, gs []grantOutcomes, refused []error) (int, error) {
	n, drained, err := p.completeGrants(ctx, on(tx), gs, refused)
	if err != nil {
		return 0, err
	}
	if err := p.batches.finish(ctx, tx, drained, p.log); err != nil {
		return 0, err
	}
	return n, nil
}

// recordOne is record for the outcomes of one grant, its refusal as the
// error.
func (p *Processor) recordOne(ctx context.Context, o partition.Ownership, outs []outcome) (int, error) {
	refused := make([]error, 1)
	n, err := p.record(ctx, []grantOutcomes{{o, outs}}, refused)
	if err == nil {
		err = refused[0]
	}
	return n, err
}

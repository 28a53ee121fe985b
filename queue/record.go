package queue

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// What a Processor records for operators (docs/ui.md): the outcomes of its
// runs, counted per group in memory (a few atomic adds per run, on
// counters found without a lock or an allocation), and the outcomes the
// fence refused, kept as events. The publisher (running.go) writes both
// every PublishInterval, in one statement and only when there is something
// to write, and once more when the Processor's last run ends; the jobs'
// path never waits for it. A write that fails keeps what it held for the
// next one.

// maxFencedEvents bounds the fenced events a Processor keeps between two
// writes: a fenced run refuses a window's outcomes at once, and the first
// ones say what happened.
const maxFencedEvents = 100

// pruneEvery is how often a Processor deletes old counts and events.
const pruneEvery = time.Minute

// pruneEvents is how many of the oldest events one prune looks at.
const pruneEvents = 10_000

// tally counts one group's outcomes since the last write.
type tally struct {
	group                                                     string
	worker                                                    string // the member id the counts are written under
	completed, retried, discarded, cancelled, snoozed, fenced atomic.Int64
}

// fencedEvent is an outcome refused by the fence, to be recorded.
type fencedEvent struct {
	group, owner string
	partition    int32
	token, job   int64
}

// tallies are a Processor's counts, by group, and its fenced events.
type tallies struct {
	list atomic.Pointer[[]*tally] // copied on a group's first run: read without a lock

	mu        sync.Mutex
	fenced    []fencedEvent
	dropped   int       // fenced events not kept (over maxFencedEvents)
	lastPrune time.Time // zero: never pruned
}

// of returns group's tally, made on its first use.
func (ts *tallies) of(group string) *tally {
	if l := ts.list.Load(); l != nil {
		for _, t := range *l {
			if t.group == group {
				return t
			}
		}
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var l []*tally
	if old := ts.list.Load(); old != nil {
		for _, t := range *old {
			if t.group == group {
				return t
			}
		}
		l = slices.Clone(*old)
	}
	t := &tally{group: group}
	l = append(l, t)
	ts.list.Store(&l)
	return t
}

// serve notes that the Processor runs o's partition: its group's counts
// are written under o's member id.
func (ts *tallies) serve(o partition.Ownership) {
	t := ts.of(o.Group)
	if w := ownerOf(o); w != "" {
		ts.mu.Lock()
		t.worker = w
		ts.mu.Unlock()
	}
}

// count counts ev's outcome; a fenced one is kept as an event too.
func (ts *tallies) count(ev *event) {
	t := ts.of(ev.Group)
	switch ev.Outcome {
	case OutcomeCompleted:
		t.completed.Add(1)
	case OutcomeRetried:
		t.retried.Add(1)
	case OutcomeDiscarded:
		t.discarded.Add(1)
	case OutcomeCancelled:
		t.cancelled.Add(1)
	case OutcomeSnoozed:
		t.snoozed.Add(1)
	case OutcomeFenced:
		t.fenced.Add(1)
		ts.mu.Lock()
		if len(ts.fenced) < maxFencedEvents {
			ts.fenced = append(ts.fenced, fencedEvent{group: ev.Group, owner: t.worker, partition: int32(ev.Partition),
				token: int64(ev.token), job: ev.ID})
		} else {
			ts.dropped++
		}
		ts.mu.Unlock()
	}
}

// counts is one group's counts taken for a write.
type counts struct {
	t                                                         *tally
	completed, retried, discarded, cancelled, snoozed, fenced int64
}

// take takes the counts and events since the last write, resetting them.
func (ts *tallies) take() ([]counts, []fencedEvent, int) {
	var cs []counts
	if l := ts.list.Load(); l != nil {
		for _, t := range *l {
			c := counts{t: t, completed: t.completed.Swap(0), retried: t.retried.Swap(0), discarded: t.discarded.Swap(0),
				cancelled: t.cancelled.Swap(0), snoozed: t.snoozed.Swap(0), fenced: t.fenced.Swap(0)}
			if c.completed|c.retried|c.discarded|c.cancelled|c.snoozed|c.fenced != 0 {
				cs = append(cs, c)
			}
		}
	}
	ts.mu.Lock()
	evs, dropped := ts.fenced, ts.dropped
	ts.fenced, ts.dropped = nil, 0
	ts.mu.Unlock()
	return cs, evs, dropped
}

// giveBack adds back what a failed write took: the events kept first, up
// to maxFencedEvents.
func (ts *tallies) giveBack(cs []counts, evs []fencedEvent) {
	for _, c := range cs {
		c.t.completed.Add(c.completed)
		c.t.retried.Add(c.retried)
		c.t.discarded.Add(c.discarded)
		c.t.cancelled.Add(c.cancelled)
		c.t.snoozed.Add(c.snoozed)
		c.t.fenced.Add(c.fenced)
	}
	ts.mu.Lock()
	ts.fenced = append(evs, ts.fenced...)
	if len(ts.fenced) > maxFencedEvents {
		ts.dropped += len(ts.fenced) - maxFencedEvents
		ts.fenced = ts.fenced[:maxFencedEvents]
	}
	ts.mu.Unlock()
}

// writeTallies writes the counts and fenced events taken since the last write,
// in one statement (none when there is nothing to write), and, at most
// once per pruneEvery, deletes the old ones. It returns how many
// statements it ran.
func (p *Processor) writeTallies(ctx context.Context) (statements int) {
	ts := &p.tallies
	cs, evs, dropped := ts.take()
	if len(cs) == 0 && len(evs) == 0 {
		return 0
	}
	if dropped > 0 {
		p.log.Warn("queue: fenced outcomes not recorded as events (too many at once)", "dropped", dropped)
	}
	n := len(cs)
	groups, workers := make([]string, n), make([]string, n)
	comp, retr, disc, canc, snoo, fenc := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	ts.mu.Lock()
	for i, c := range cs {
		groups[i], workers[i] = c.t.group, c.t.worker
		comp[i], retr[i], disc[i], canc[i], snoo[i], fenc[i] = c.completed, c.retried, c.discarded, c.cancelled, c.snoozed, c.fenced
	}
	ts.mu.Unlock()
	m := len(evs)
	eg, eo := make([]string, m), make([]string, m)
	ep := make([]int32, m)
	et, ej := make([]int64, m), make([]int64, m)
	for i, e := range evs {
		eg[i], eo[i], ep[i], et[i], ej[i] = e.group, e.owner, e.partition, e.token, e.job
	}
	qctx, cancel := context.WithTimeout(ctx, max(p.cfg.PublishInterval, 5*time.Second))
	defer cancel()
	_, err := p.pool.Exec(qctx, p.in.Record, groups, workers, comp, retr, disc, canc, snoo, fenc, eg, ep, eo, et, ej)
	statements = 1
	switch err = store.Classify("queue", "record outcome counts", "", err); {
	case err != nil:
		ts.giveBack(cs, evs)
		if !errors.Is(err, store.ErrClosed) && ctx.Err() == nil {
			p.fails.Fail("record", "queue: recording the outcome counts failed; they are kept for the next try", "err", err)
		}
		return statements
	default:
		p.fails.Recovered("record", "queue: recording the outcome counts recovered")
	}
	ts.mu.Lock()
	prune := ts.lastPrune.IsZero() || time.Since(ts.lastPrune) >= pruneEvery
	if prune {
		ts.lastPrune = time.Now()
	}
	ts.mu.Unlock()
	if prune {
		statements++
		if _, err := p.pool.Exec(qctx, p.in.Prune, groups, pruneEvents); err != nil && ctx.Err() == nil {
			p.fails.Fail("prune", "queue: deleting old outcome counts and events failed", "err", store.Classify("queue", "prune", "", err))
		}
	}
	return statements
}

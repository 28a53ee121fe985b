package queue

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/partition"
)

// The pipeline runs one grant's jobs. It keeps fetching while jobs run, up
// to Window jobs held (fetched and not yet settled: waiting for their key's
// earlier job, waiting for a handler slot, running, or waiting for their
// outcome to be recorded), and never fetches a job it holds. Keyless jobs
// run as soon as a slot is free. A key's jobs form a line: they run one at
// a time, in id order, the next starting when the one before it ended (for
// a transactional job, once the outcomes of the key's earlier jobs are
// recorded too). A job of a key that fails or snoozes and holds its place
// stalls its line: the key's later jobs are dropped from memory (they stay
// pending) and the key is skipped by fetches until that outcome is
// recorded; the database then makes them wait behind it. Outcomes go to a
// completer that records them in batches while jobs go on running.

// maxSkip bounds how long a key found waiting is skipped by fetches, in
// PollIntervals: a job that waits for an hour may be cancelled meanwhile.
const maxSkip = 10

// maxSkipKeys bounds the keys a fetch is asked to skip.
const maxSkipKeys = 1000

// line is the pipeline's state of one key.
type line struct {
	key        string
	queue      []fetched // fetched jobs of the key waiting their turn, in id order
	busy       bool      // a job of the key is ready or running
	unrecorded int       // outcomes of the key's jobs handed to the completer, not yet recorded
	stalled    bool      // a job of the key waits: the later ones are not run
}

type pipeline struct {
	p         *Processor
	o         partition.Ownership
	log       *slog.Logger
	ctx, hctx context.Context
	in        *inbox // the grant's answers from the member's completer
	window    int
	set       *runningSet // the jobs running, for cancels and publishing

	held    map[int64]bool       // fetched, not settled: never fetched again
	cool    map[int64]time.Time  // held jobs whose run could not be recorded: fetched again after
	lines   map[string]*line     // by key
	skip    map[string]time.Time // keys that wait: skipped by fetches until then
	ready   []fetched            // jobs whose turn it is, waiting for a slot
	running int                  // units running
	done    chan *run            // units that ended

	fenced error
	lost   bool // an outcome could not be recorded: the run did not end cleanly
	// unanswered counts the records handed to the completer whose answer
	// the pipeline has not taken.
	unanswered int
	more       bool      // the last fetch saw a full window: fetch again when there is room
	poke       bool      // woken, or polled: fetch when there is room
	thawAt     time.Time // the earliest end of a wait in cool or skip (zero: none)
	// pauseGen is the generation of the Processor's pauses this pipeline
	// last saw (see pause.go).
	pauseGen uint64
	// pausedKeys are the keys in skip whose next job's kind is paused:
	// skipped no longer once the pauses change.
	pausedKeys map[string]bool
	// walk is where the fetches' walks resume while kinds of the group are
	// paused (see fetchFrom).
	walk walkPos
	// cancelled are held jobs cancelled before they started (see
	// takeCancels): start drops them.
	cancelled map[int64]bool
}

// pipeline runs o's jobs until ctx or hctx ends or the fence refuses a
// write, then waits for the running jobs and records their outcomes. It
// reports whether it ended cleanly: every job it started has its outcome
// recorded, or was interrupted without one; and the fence's refusal if a
// newer owner has the partition.
func (p *Processor) pipeline(ctx, hctx context.Context, o partition.Ownership, log *slog.Logger, wake <-chan struct{}, set *runningSet) (bool, error) {
	pl := &pipeline{p: p, o: o, log: log, ctx: ctx, hctx: hctx, window: p.cfg.Window, set: set,
		in:   newInbox(o), // Serve refuses a nil Lease
		held: make(map[int64]bool), cool: make(map[int64]time.Time), lines: make(map[string]*line),
		skip: make(map[string]time.Time), done: make(chan *run, p.cfg.Window+1), poke: true,
		pauseGen: p.pauses.gen.Load(), pausedKeys: make(map[string]bool)}
	timer := time.NewTimer(p.cfg.PollInterval)
	defer timer.Stop()
	for {
		stopping := ctx.Err() != nil || hctx.Err() != nil || pl.fenced != nil
		if stopping && pl.running == 0 {
			break
		}
		if !stopping {
			if g := p.pauses.gen.Load(); g != pl.pauseGen {
				pl.pausesChanged(g)
			}
			if pl.set != nil && pl.set.noted.Load() {
				pl.takeCancels() // (also at least every PollInterval: bounds the notes kept)
			}
			pl.thaw()
			if pl.wantsFetch() {
				pl.fetch()
				timer.Reset(p.cfg.PollInterval)
				continue
			}
			if pl.starved() {
				p.completer.hurry()
			}
		}
		var slots chan struct{}
		var ctxDone, hctxDone <-chan struct{}
		if !stopping {
			ctxDone, hctxDone = ctx.Done(), hctx.Done()
			if len(pl.ready) > 0 && pl.running < p.cfg.PartitionConcurrency {
				slots = p.slots
			}
		}
		select {
		case slots <- struct{}{}:
			if pl.set != nil && pl.set.noted.Load() {
				pl.takeCancels()
			}
			pl.start()
		case r := <-pl.done:
			pl.finish(r)
		case <-pl.in.ready:
			pl.answers()
		case <-wake:
			pl.poke = true
		case <-timer.C: // housekeeping (thaw, cancels); the member polls for due jobs
			timer.Reset(p.cfg.PollInterval)
		case <-ctxDone:
		case <-hctxDone:
		}
	}
	if pl.unanswered > 0 {
		p.completer.close(pl.in)
	}
	for pl.unanswered > 0 {
		<-pl.in.ready
		pl.answers()
	}
	return pl.fenced == nil && !pl.lost, pl.fenced
}

// room is how many more jobs the pipeline may hold.
func (pl *pipeline) room() int { return pl.window - len(pl.held) }

// wantsFetch reports whether to fetch now: when woken or polled, or when
// the last fetch saw more due jobs than it could take, and the window has
// room for a good batch (half the window, or BatchSize if smaller); any
// room will do when nothing runs or waits for a slot. (Refilling the window
// one job at a time, as each job settles, would cost a fetch per job.)
func (pl *pipeline) wantsFetch() bool {
	room := pl.room()
	if room <= 0 || !pl.poke && !pl.more {
		return false
	}
	if ps := pl.p.pauses.of(pl.o.Group); ps != nil && ps.all {
		pl.p.pauses.skips.Add(1)
		pl.poke, pl.more = false, false // a resume wakes the partition
		return false
	}
	return room >= min(pl.p.cfg.BatchSize, (pl.window+1)/2) || pl.running == 0 && len(pl.ready) == 0
}

// starved reports whether the pipeline has due jobs to fetch (woken, or
// its last fetch saw more) but too little room for them, and outcomes of
// its own waiting to be recorded, which would make room: in a backlog,
// the completer then records them at once instead of after
// CompleteInterval, so that the window never waits on it.
func (pl *pipeline) starved() bool {
	return (pl.poke || pl.more) && pl.unanswered > 0 && pl.room() < min(pl.p.cfg.BatchSize, (pl.window+1)/2)
}

// later notes that a cooling job or a skipped key waits until t.
func (pl *pipeline) later(t time.Time) {
	if pl.thawAt.IsZero() || t.Before(pl.thawAt) {
		pl.thawAt = t
	}
}

// thaw lets go of the jobs and keys whose wait is over. It looks at them
// only once the earliest wait is over.
func (pl *pipeline) thaw() {
	now := time.Now()
	if pl.thawAt.IsZero() || now.Before(pl.thawAt) {
		return
	}
	pl.thawAt = time.Time{}
	for id, t := range pl.cool {
		if !now.After(t) {
			pl.later(t)
			continue
		}
		delete(pl.cool, id)
		delete(pl.held, id)
		pl.poke = true
	}
	for k, t := range pl.skip {
		if !now.After(t) {
			pl.later(t)
			continue
		}
		delete(pl.skip, k)
		delete(pl.pausedKeys, k)
		pl.poke = true
	}
}

// fetch reads more due jobs and hands them out.
func (pl *pipeline) fetch() {
	n := min(pl.p.cfg.BatchSize, pl.room())
	ids := make([]int64, 0, len(pl.held))
	for id := range pl.held {
		ids = append(ids, id)
	}
	// The stalled keys first: if the list is cut, a stalled key's jobs
	// would be fetched only to be dropped.
	skip := make([]string, 0, len(pl.skip))
	for k, ln := range pl.lines {
		if ln.stalled {
			skip = append(skip, k)
		}
	}
	for k := range pl.skip {
		skip = append(skip, k)
	}
	pl.poke = false
	res, err := pl.p.fetchFrom(pl.ctx, pl.o, n, ids, skip[:min(len(skip), maxSkipKeys)], &pl.walk)
	if err != nil {
		pl.more = false
		if pl.ctx.Err() == nil {
			pl.p.fail("fetch", pl.o, "queue: fetch failed", "err", err)
		}
		return
	}
	pl.p.fails.Recovered("fetch", "queue: fetch recovered")
	now := time.Now()
	fresh := 0 // waiting keys not skipped before
	for _, w := range res.waiting {
		if _, ok := pl.skip[w.key]; !ok {
			fresh++
		}
		wait := w.wait
		if wait <= 0 { // due, but its kind is paused
			wait = pl.p.cfg.PollInterval
			pl.pausedKeys[w.key] = true
		}
		t := now.Add(min(wait, maxSkip*pl.p.cfg.PollInterval))
		pl.skip[w.key] = t
		pl.later(t)
	}
	// Every job into its line first, then the lines advance: a key's jobs
	// come in (run_at, id) order but run in id order.
	var touched []*line
	before := len(pl.held)
	for _, f := range res.jobs {
		if ln := pl.dispatch(f); ln != nil {
			touched = append(touched, ln)
		}
	}
	for _, ln := range touched {
		pl.advance(ln)
	}
	// More may be due when the window was full, or (kinds paused) a walk
	// stopped at its cap, and the fetch got somewhere: took a job, or
	// learned of a waiting key to skip next time. A capped walk that found
	// nothing (only paused jobs) goes on at the next poll or wakeup, from
	// where it stopped: walking a paused backlog costs one capped walk per
	// poll, not the backlog.
	pl.more = (res.scanned == n || res.walking) && (len(pl.held) > before || fresh > 0)
}

// dispatch takes in a fetched job: ready at once if it has no key, else
// queued in its key's line, which it returns (to be advanced).
func (pl *pipeline) dispatch(f fetched) *line {
	if pl.held[f.id] {
		return nil
	}
	pl.held[f.id] = true
	if f.key == "" {
		pl.ready = append(pl.ready, f)
		return nil
	}
	ln := pl.lines[f.key]
	if ln == nil {
		ln = &line{key: f.key}
		pl.lines[f.key] = ln
	}
	if ln.stalled {
		delete(pl.held, f.id)
		return nil
	}
	i, _ := slices.BinarySearchFunc(ln.queue, f.id, func(q fetched, id int64) int { return cmp.Compare(q.id, id) })
	ln.queue = slices.Insert(ln.queue, i, f)
	return ln
}

// advance makes the next job of a line ready, if it may start.
func (pl *pipeline) advance(ln *line) {
	if ln.busy || ln.stalled {
		return
	}
	if len(ln.queue) == 0 {
		if ln.unrecorded == 0 {
			delete(pl.lines, ln.key)
		}
		return
	}
	f := ln.queue[0]
	if h, ok := pl.p.cfg.Workers.handlers[f.kind]; ok && h.tx && ln.unrecorded > 0 {
		// It commits on its own: not before the key's earlier outcomes,
		// which it asks to be recorded now.
		pl.p.completer.hurry()
		return
	}
	ln.queue = ln.queue[1:]
	ln.busy = true
	pl.ready = append(pl.ready, f)
}

// stall stops a line: its queued jobs are let go (they stay pending), and
// the key is skipped by fetches until its unrecorded outcomes are recorded.
func (pl *pipeline) stall(ln *line) {
	for _, f := range ln.queue {
		delete(pl.held, f.id)
	}
	ln.queue, ln.busy, ln.stalled = nil, false, true
	if ln.unrecorded == 0 {
		delete(pl.lines, ln.key)
	}
}

// start starts the first ready job (with the ready jobs of its kind, for a
// batch handler) on the slot the caller took.
func (pl *pipeline) start() {
	p := pl.p
	f := pl.ready[0]
	pl.ready = pl.ready[1:]
	if ps := p.pauses.of(pl.o.Group); ps.kind(f.kind) {
		<-p.slots
		pl.drop(f)
		return
	}
	if pl.cancelled[f.id] {
		<-p.slots
		pl.dropCancelled(f)
		return
	}
	pl.running++
	r := &run{p: p, o: pl.o, log: pl.log, set: pl.set}
	if r.settle(f) {
		<-p.slots
		pl.finish(r)
		return
	}
	h := p.cfg.Workers.handlers[f.kind]
	fs := []fetched{f}
	if h.runBatch != nil {
		rest := pl.ready[:0]
		var gone []fetched // cancelled before they started
		for _, g := range pl.ready {
			if pl.cancelled[g.id] {
				gone = append(gone, g)
			} else if g.kind == f.kind && len(fs) < p.cfg.BatchSize && g.attempt < g.max && h.decodes(r.work(g)) == nil {
				fs = append(fs, g)
			} else {
				rest = append(rest, g)
			}
		}
		pl.ready = rest
		for _, g := range gone {
			pl.dropCancelled(g) // may make the key's next job ready
		}
	}
	p.spawn(func() {
		if h.runBatch != nil {
			r.runBatch(pl.hctx, fs, h)
		} else {
			r.runOne(pl.hctx, f, h)
		}
		<-p.slots
		pl.done <- r
	})
}

// finish takes in the results of a unit that ended.
func (pl *pipeline) finish(r *run) {
	pl.running--
	if r.fenced != nil && pl.fenced == nil {
		pl.fenced = r.fenced
		pl.p.fail("fenced", pl.o, "queue: fenced: a newer owner has the partition", "err", r.fenced)
	}
	var recs []record
	var next []*line // advanced once recs are in the completer (advance may hurry them)
	for _, res := range r.results {
		f := res.f
		ln := pl.lines[f.key] // nil for a keyless job
		if ln != nil {
			ln.busy = false
		}
		if res.rec != nil {
			recs = append(recs, record{rec: *res.rec, ev: res.ev, key: f.key, to: pl.in})
			if ln == nil {
				continue
			}
			ln.unrecorded++
			holds := f.holds
			if res.rec.holds != nil { // a policy's FailureHold
				holds = *res.rec.holds
			}
			if res.rec.state == "pending" && holds && res.ev.Outcome != OutcomeInterrupted {
				pl.stall(ln) // it waits, and its key waits behind it
			} else {
				next = append(next, ln)
			}
			continue
		}
		pl.p.report(res.ev)
		switch res.ev.Outcome {
		case OutcomeCompleted, OutcomeSkipped, OutcomeCancelled: // cancelled while it ran: finished
			delete(pl.held, f.id)
			if ln != nil {
				pl.advance(ln)
			}
		case OutcomeUnrecorded:
			// The processor's own failure (a lock timeout at the fence
			// check, a lost connection at commit): the job stays pending.
			// Fetch it again a little later, and its key's jobs after it.
			until := time.Now().Add(pl.p.cfg.PollInterval)
			pl.cool[f.id] = until
			pl.later(until)
			if ln != nil {
				pl.skip[f.key] = until
				delete(pl.pausedKeys, f.key) // skipped for the job, not for a paused kind: a resume keeps the skip
				pl.stall(ln)
			}
		default: // fenced or interrupted: the run is ending
			delete(pl.held, f.id)
			if ln != nil {
				pl.stall(ln)
			}
		}
	}
	pl.unanswered += len(recs)
	pl.p.completer.add(recs...)
	for _, ln := range next {
		pl.advance(ln)
	}
}

// answers takes in what the completer recorded.
func (pl *pipeline) answers() {
	var fe *fence.FencedError
	for _, a := range pl.in.answers() {
		pl.unanswered -= len(a.recs)
		fenced := errors.As(a.err, &fe)
		if fenced && pl.fenced == nil {
			pl.fenced = a.err
			pl.p.fail("fenced", pl.o, "queue: fenced: a newer owner has the partition", "err", a.err)
		}
		if a.err != nil && !fenced {
			pl.lost = true
		}
		for _, r := range a.recs {
			delete(pl.held, r.rec.id)
			ev := r.ev
			switch {
			case fenced && ev.plain:
				ev.Outcome, ev.Err = OutcomeFenced, a.err
			case a.err != nil && ev.plain:
				ev.Outcome, ev.Err = OutcomeUnrecorded, a.err
			}
			pl.p.report(ev)
			if ln := pl.lines[r.key]; ln != nil {
				ln.unrecorded--
				if ln.stalled && ln.unrecorded == 0 {
					delete(pl.lines, ln.key)
					pl.poke = true
				} else {
					pl.advance(ln)
				}
			}
		}
	}
}

// pausesChanged takes in a change of the Processor's pauses: the keys
// skipped because their next job's kind was paused are fetched again, and jobs
// held but not started whose group or kind is paused now are let go.
func (pl *pipeline) pausesChanged(gen uint64) {
	pl.pauseGen = gen
	for k := range pl.pausedKeys {
		delete(pl.skip, k)
	}
	clear(pl.pausedKeys)
	pl.poke = true
	ps := pl.p.pauses.of(pl.o.Group)
	if ps == nil {
		return
	}
	rest := pl.ready[:0]
	var drop []fetched
	for _, f := range pl.ready {
		if ps.kind(f.kind) {
			drop = append(drop, f)
		} else {
			rest = append(rest, f)
		}
	}
	pl.ready = rest
	for _, f := range drop {
		pl.drop(f)
	}
}

// takeCancels takes in the jobs cancel notifications named that were not
// running (see runningSet.cancel): those the pipeline holds are dropped
// before they start; the others it forgets (a job fetched after its cancel
// committed is not fetched at all).
func (pl *pipeline) takeCancels() {
	for id := range pl.set.takeNotified() {
		if pl.held[id] {
			if pl.cancelled == nil {
				pl.cancelled = make(map[int64]bool)
			}
			pl.cancelled[id] = true
		}
	}
	for id := range pl.cancelled {
		if !pl.held[id] {
			delete(pl.cancelled, id) // let go meanwhile
		}
	}
}

// dropCancelled lets go of a held job cancelled before it started: it is
// finished in the database, so its key's next job may run.
func (pl *pipeline) dropCancelled(f fetched) {
	delete(pl.cancelled, f.id)
	delete(pl.held, f.id)
	pl.log.Info("queue: held job cancelled before it started", "job", f.id, "kind", f.kind)
	if ln := pl.lines[f.key]; ln != nil {
		ln.busy = false
		pl.advance(ln)
	}
}

// drop lets go of a job held but not started (its group or kind was
// paused): it stays pending, and its key's later jobs are let go too,
// to be fetched again in order.
func (pl *pipeline) drop(f fetched) {
	delete(pl.held, f.id)
	if ln := pl.lines[f.key]; ln != nil {
		pl.stall(ln)
	}
}

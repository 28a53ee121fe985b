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
	limits     []int     // the key limits of the key's jobs ready or running, smallest first
	started    int       // the key's jobs running (fair.go's weights)
	weight     int       // the key's weight (ProcessorConfig.KeyWeight; 0: not asked yet)
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
	// rates are the recent starts of the rate-limited keys (limits.go).
	rates *rates
	// next is the index in ready of the job start takes (see startable).
	next int
	// keyless is how many jobs without a key run (fair.go's weights).
	keyless int
	// charged are jobs whose attempt the recovery spent before leaving
	// them to the pipeline (recover.go): their outcome spends none.
	charged map[int64]bool
	// limitedCounts are the jobs held back at the last snapshot, by Limit
	// (limited.go).
	limitedCounts [3]int64
	// slotWait are the kinds whose slots (Policy.GroupConcurrency) were all
	// taken at the last try, each with the channel closed when one frees.
	slotWait map[string]<-chan struct{}
	// walk is where the fetches' walks resume while kinds of the group are
	// paused or keys are full (see fetchFrom, fair.go).
	walk walkPos
	// behind are the keys whose due jobs the walk passes, read by key
	// instead (fair.go); walkFrom is when the kept walk last started from
	// the beginning.
	behind   map[string]bool
	walkFrom time.Time
	// walkAlone: the last fair fetch's walk found no job of another key
	// (fair.go): the full keys' refills may take the whole fetch.
	walkAlone bool
	// cancelled are held jobs cancelled before they started (see
	// takeCancels): start drops them.
	cancelled map[int64]bool
}

// pipeline runs o's jobs until ctx or hctx ends or the fence refuses a
// write, then waits for the running jobs and records their outcomes. It
// reports whether it ended cleanly: every job it started has its outcome
// recorded, or was interrupted without one; and the fence's refusal if a
// newer owner has the partition.
func (p *Processor) pipeline(ctx, hctx context.Context, o partition.Ownership, log *slog.Logger, wake <-chan struct{}, set *runningSet, st *runState) (bool, error) {
	rs := &st.rates
	pl := &pipeline{p: p, o: o, log: log, ctx: ctx, hctx: hctx, window: p.cfg.Window, set: set,
		in:   newInbox(o), // Serve refuses a nil Lease
		held: make(map[int64]bool), cool: make(map[int64]time.Time), lines: make(map[string]*line),
		skip: make(map[string]time.Time), done: make(chan *run, p.cfg.Window+1), poke: true,
		pauseGen: p.pauses.gen.Load(), pausedKeys: make(map[string]bool), rates: rs, behind: make(map[string]bool), charged: st.handed}
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
		var ctxDone, hctxDone, freed <-chan struct{}
		if !stopping {
			ctxDone, hctxDone = ctx.Done(), hctx.Done()
			if len(pl.ready) > 0 && pl.running < p.cfg.PartitionConcurrency {
				// A ready job may have to wait for its key's rate or a
				// slot of its kind (limits.go): a handler slot is taken
				// only for a job that may start.
				ok, at, slotFreed := pl.startable(time.Now())
				if ok {
					slots = p.slots
				} else {
					freed = slotFreed
				}
				if !at.IsZero() {
					pl.later(at)
				}
			}
			if !pl.thawAt.IsZero() {
				// Wake when the earliest wait ends (a rate's window, a
				// cooling job, a skipped key), if before the next poll.
				if d := time.Until(pl.thawAt); d < p.cfg.PollInterval {
					timer.Reset(max(d, time.Millisecond))
				}
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
		case <-freed:
		case <-timer.C: // housekeeping (thaw, cancels, the limits' snapshot); the member polls for due jobs
			timer.Reset(p.cfg.PollInterval)
			pl.snapshotLimits()
		case <-ctxDone:
		case <-hctxDone:
		}
	}
	pl.forgetLimits()
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
// its own waiting to be recorded, which would make enough room for a fetch
// (or nothing runs or waits for a slot): in a backlog, the completer then
// records them at once instead of after CompleteInterval, so that the
// window never waits on it. Outcomes that would not make enough room wait
// for more: a window full of a few keys' jobs, run one at a time, would
// otherwise record each outcome alone, a statement per job.
func (pl *pipeline) starved() bool {
	need := min(pl.p.cfg.BatchSize, (pl.window+1)/2)
	return (pl.poke || pl.more) && pl.unanswered > 0 && pl.room() < need &&
		(pl.room()+pl.unanswered >= need || pl.running == 0 && len(pl.ready) == 0)
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
		pl.passed("") // (a keyed one's key was stalled, and so is read by key)
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
	fair := pl.fairTurns(n)
	if fair != nil {
		for _, c := range fair.counts {
			n -= int(c)
		}
	}
	res, err := pl.p.fetchFrom(pl.ctx, pl.o, n, ids, skip[:min(len(skip), maxSkipKeys)], &pl.walk, fair)
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
		if fair != nil {
			pl.passed(w.key) // its later due jobs may be behind the walk: read by key once it is due
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
	refill := pl.refilled(fair, res)
	pl.walkAlone = fair != nil && res.scanned == 0 && !res.walking
	// More may be due when the window was full, or (kinds paused) a walk
	// stopped at its cap, and the fetch got somewhere: took a job, or
	// learned of a waiting key to skip next time. A capped walk that found
	// nothing (only paused jobs) goes on at the next poll or wakeup, from
	// where it stopped: walking a paused backlog costs one capped walk per
	// poll, not the backlog.
	pl.more = (res.scanned == n || res.walking) && (len(pl.held) > before || fresh > 0)
	if fair != nil && res.walking || refill {
		// Walking past full keys' backlogs: on at once, until the keys
		// behind them are found (each row is walked past once a pass); or
		// a full key may have more: read them as soon as there is room.
		pl.more = true
	}
}

// dispatch takes in a fetched job: ready at once if it has no key, else
// queued in its key's line, which it returns (to be advanced).
func (pl *pipeline) dispatch(f fetched) *line {
	if pl.held[f.id] {
		return nil
	}
	pl.held[f.id] = true
	if pl.charged[f.id] {
		// Its attempt was spent by the recovery of an abrupt end, which
		// left it to the pipeline (a limited job): its outcome spends none.
		delete(pl.charged, f.id)
		f.attempt--
		f.charged = true
	}
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

// advance makes the next jobs of a line ready, as many as may run at once:
// the next job waits while as many of the key's jobs as its key limit are
// ready or running (with a limit of 1, the key's jobs run one at a time, in
// id order). A line with nothing queued, ready, running or unrecorded is
// forgotten.
func (pl *pipeline) advance(ln *line) {
	for !ln.stalled && len(ln.queue) > 0 {
		f := ln.queue[0]
		own := pl.p.keyLimit(f)
		limit := own
		if len(ln.limits) > 0 {
			limit = min(own, ln.limits[0]) // a job with limit 1 runs alone, whatever comes after it
		}
		if ln.active() >= limit {
			break
		}
		if h, ok := pl.p.cfg.Workers.handlers[f.kind]; ok && h.tx && limit == 1 && ln.unrecorded > 0 {
			// It commits on its own: not before the key's earlier outcomes,
			// which it asks to be recorded now.
			pl.p.completer.hurry()
			break
		}
		ln.queue = ln.queue[1:]
		ln.enter(own)
		pl.ready = append(pl.ready, f)
	}
	if pl.behind[ln.key] && !ln.stalled && holding(ln) <= pl.share()/2 {
		pl.more = true // a full key ran low: read its next jobs (fair.go)
	}
	if len(ln.queue) == 0 && ln.active() == 0 && ln.unrecorded == 0 {
		delete(pl.lines, ln.key)
		if ln.stalled {
			pl.poke = true // its jobs wait in the database: fetch them again
		}
	}
}

// active is how many of the line's jobs are ready or running.
func (ln *line) active() int { return len(ln.limits) }

// enter counts a job of the line with key limit limit as ready or running.
func (ln *line) enter(limit int) {
	i, _ := slices.BinarySearch(ln.limits, limit)
	ln.limits = slices.Insert(ln.limits, i, limit)
}

// leave counts out a job entered with limit.
func (ln *line) leave(limit int) {
	if i, ok := slices.BinarySearch(ln.limits, limit); ok {
		ln.limits = slices.Delete(ln.limits, i, i+1)
	}
}

// stall stops a line: its queued jobs are let go (they stay pending), and
// the key is skipped by fetches until its unrecorded outcomes are recorded.
func (pl *pipeline) stall(ln *line) {
	for _, f := range ln.queue {
		delete(pl.held, f.id)
	}
	pl.passed(ln.key)
	ln.queue, ln.stalled = nil, true
	if ln.active() == 0 && ln.unrecorded == 0 {
		delete(pl.lines, ln.key)
	}
}

// start starts the first ready job (with the ready jobs of its kind, for a
// batch handler) on the slot the caller took.
func (pl *pipeline) start() {
	p := pl.p
	f := pl.ready[pl.next]
	pl.ready = slices.Delete(pl.ready, pl.next, pl.next+1)
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
	pl.began(f, 1)
	r := &run{p: p, o: pl.o, log: pl.log, set: pl.set}
	if r.settle(f) {
		<-p.slots
		pl.finish(r)
		return
	}
	freed := p.slotsChanged()
	slot, ok := p.takeSlot(pl.o.Group, f.kind)
	if !ok { // the kind's slots are taken (by other partitions meanwhile): wait for one
		pl.running--
		pl.began(f, -1)
		pl.ready = slices.Insert(pl.ready, pl.next, f)
		if pl.slotWait == nil {
			pl.slotWait = make(map[string]<-chan struct{})
		}
		pl.slotWait[f.kind] = freed
		<-p.slots
		return
	}
	now := time.Now()
	h := p.cfg.Workers.handlers[f.kind]
	f.stamp = pl.rates.started(f, p.keyRate(f))
	fs := []fetched{f}
	if h.runBatch != nil {
		rest := pl.ready[:0]
		var gone []fetched // cancelled before they started
		for _, g := range pl.ready {
			if pl.cancelled[g.id] {
				gone = append(gone, g)
			} else if g.kind == f.kind && len(fs) < p.cfg.BatchSize && g.attempt < g.max && h.decodes(r.work(g)) == nil &&
				pl.rates.wait(g, p.keyRate(g), now) == 0 {
				g.stamp = pl.rates.started(g, p.keyRate(g))
				pl.began(g, 1)
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
		hctx, cancel := withSlot(pl.hctx, slot)
		if h.runBatch != nil {
			r.runBatch(hctx, fs, h)
		} else {
			r.runOne(hctx, f, h)
		}
		cancel()
		slot.release()
		<-p.slots
		pl.done <- r
	})
}

// startable reports whether a ready job may start at now, and sets next to
// the first that may: a job waits while its key's rate window is full
// (KeyRate) or its kind's slots are all taken (GroupConcurrency); the
// others go past it. If none may, at is when a rate's wait ends (zero:
// none) and freed a channel closed when a slot of a waiting kind frees
// (nil: none).
func (pl *pipeline) startable(now time.Time) (ok bool, at time.Time, freed <-chan struct{}) {
	for i, f := range pl.ready {
		if ch, waiting := pl.slotWait[f.kind]; waiting {
			if !isClosed(ch) {
				freed = ch
				continue
			}
			delete(pl.slotWait, f.kind)
		}
		if d := pl.rates.wait(f, pl.p.keyRate(f), now); d > 0 {
			if t := now.Add(d); at.IsZero() || t.Before(at) {
				at = t
			}
			continue
		}
		if pl.p.cfg.KeyWeight == nil {
			pl.next = i
			return true, time.Time{}, nil
		}
		if !ok || pl.lighter(f, pl.ready[pl.next]) {
			pl.next, ok = i, true
		}
	}
	if ok {
		return true, time.Time{}, nil
	}
	return false, at, freed
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
		f.stamp.settle()
		pl.began(f, -1)
		ln := pl.lines[f.key] // nil for a keyless job
		if ln != nil {
			ln.leave(pl.p.keyLimit(f))
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
				pl.advance(ln)
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
		ln.leave(pl.p.keyLimit(f))
		pl.advance(ln)
	}
}

// drop lets go of a job held but not started (its group or kind was
// paused): it stays pending, and its key's later jobs are let go too,
// to be fetched again in order.
func (pl *pipeline) drop(f fetched) {
	delete(pl.held, f.id)
	if ln := pl.lines[f.key]; ln != nil {
		ln.leave(pl.p.keyLimit(f))
		pl.stall(ln)
		pl.advance(ln) // forgotten if nothing of it is left
	}
}

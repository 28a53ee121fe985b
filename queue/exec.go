package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/partition"
)

// fetched is a due job as read by the owner.
type fetched struct {
	id           int64
	key, kind    string
	args         []byte
	attempt, max int // attempt: spent before this run
	created      time.Time
	holds        bool   // holds its key's later jobs while it waits
	maxSet       bool   // max was set by the enqueuer: no policy replaces it
	batch        int64  // the job's batch (0: none): an item or a follow-up of it
	item         string // the job's item key in its batch ("": not an item)
	trace        []byte // the trace context it was enqueued under (nil: none), see trace.go
	keyLimit     int16  // the job's own KeyConcurrency (0: its kind's policy)
	stamp        *stamp // set when its handler is called (nil: not rate-limited; limits.go)
	// charged: this run's attempt was spent before it started (recovery
	// after an abrupt end, see recover.go), so its outcome spends none.
	charged bool
}

// spend is how many attempts an outcome that spends n still spends.
func (f fetched) spend(n int32) int32 {
	if f.charged {
		return n - 1
	}
	return n
}

// jobResult is what one run left for one job: an outcome to record (nil:
// nothing to record, for example a transactional run that committed) and
// the event to report once it is.
type jobResult struct {
	f   fetched
	rec *outcome
	ev  event
}

// run collects the results of one unit of work: one job, or a batch
// handler's batch.
type run struct {
	p   *Processor
	o   partition.Ownership
	log *slog.Logger

	set *runningSet // the grant's running set (nil: not tracked)

	mu      sync.Mutex
	results []jobResult
	fenced  error          // a transactional run was refused by the fence
	cancels map[int64]bool // jobs cancelled while they ran (see running.go)
	// cancelled is whether cancels has any: read without the mutex by
	// runs that were not cancelled, nearly all of them.
	cancelled atomic.Bool
}

// markCancelled notes that job id was cancelled while it ran.
func (r *run) markCancelled(id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancels == nil {
		r.cancels = make(map[int64]bool)
	}
	r.cancels[id] = true
	r.cancelled.Store(true)
}

// isCancelled reports whether job id was cancelled while it ran, and
// whether some job of the run was.
func (r *run) isCancelled(id int64) (job, some bool) {
	if !r.cancelled.Load() {
		return false, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cancels[id], len(r.cancels) > 0
}

// track adds f to the grant's running set, to be cancelled by cancel.
func (r *run) track(f fetched, cancel context.CancelCauseFunc, t time.Time) {
	if r.set != nil {
		r.set.add(r, f.id, f.kind, cancel, t)
	}
}

// untrack removes f from the grant's running set.
func (r *run) untrack(f fetched) {
	if r.set != nil {
		r.set.remove(f.id)
	}
}

// trackAll adds a batch to the grant's running set, to be cancelled by
// cancel.
func (r *run) trackAll(fs []fetched, cancel context.CancelCauseFunc, t time.Time) {
	if r.set != nil {
		r.set.addAll(r, fs, cancel, t)
	}
}

// untrackAll removes a batch from the grant's running set.
func (r *run) untrackAll(fs []fetched) {
	if r.set != nil {
		r.set.removeAll(fs)
	}
}

// cancelledEvent is the event of job f, cancelled while it ran: already
// cancelled in the database, so nothing is recorded, and no retry. Its Err
// wraps ErrJobCancelled and what the handler returned (err, if not nil).
func (r *run) cancelledEvent(f fetched, d time.Duration, err error) event {
	ev := r.event(f, OutcomeCancelled, d, ErrJobCancelled)
	if err != nil && !errors.Is(err, ErrJobCancelled) {
		ev.Err = fmt.Errorf("%w; the handler returned: %w", ErrJobCancelled, err)
	}
	ev.plain = false
	return ev
}

// add records the result of one job's run. A batch item's outcome is
// marked as one whatever built it: only the statement that counts items
// may apply it (see completeGrants).
func (r *run) add(f fetched, rec *outcome, ev event) {
	if rec != nil && f.item != "" {
		rec.item = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, jobResult{f: f, rec: rec, ev: ev})
}

func (r *run) fence(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fenced == nil {
		r.fenced = err
	}
}

// recordContext bounds a write that records what already happened: it
// must not be cut short by ctx's end (a handoff), only bounded.
func recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// settle decides, without running a handler, the jobs that need none: a
// job whose last attempt was spent by a run that ended without an outcome
// is discarded, a job whose kind has no handler is kept pending for
// UnknownKindDelay, and a batch handler's job whose args do not decode is
// discarded. It reports whether f was settled so.
func (r *run) settle(f fetched) bool {
	p := r.p
	h, ok := p.cfg.Workers.handlers[f.kind]
	switch {
	case f.attempt >= f.max:
		err := fmt.Errorf("%w (attempt %d of %d)", ErrNoOutcome, f.attempt, f.max)
		r.log.Warn("queue: job discarded: its last attempt ended without an outcome", "job", f.id, "kind", f.kind, "attempt", f.attempt)
		msg := storable(err.Error())
		ev := r.event(f, OutcomeDiscarded, 0, err)
		ev.Attempt = f.attempt // it did not run
		r.add(f, &outcome{id: f.id, state: "discarded", err: &msg, item: f.item != ""}, ev)
		return true
	case !ok:
		r.log.Warn("queue: no handler for the job's kind; kept pending", "job", f.id, "kind", f.kind)
		rec := p.later(f.id, p.cfg.UnknownKindDelay, fmt.Sprintf("no handler for kind %q", f.kind))
		rec.item = f.item != "" // an item's outcome takes the statement that counts items
		r.add(f, &rec, r.event(f, OutcomeSnoozed, 0, nil))
		return true
	case h.runBatch != nil:
		if err := h.decodes(r.work(f)); err != nil {
			rec := p.outcome(f, err, r.log)
			r.add(f, &rec, r.event(f, rec.result(), 0, err))
			return true
		}
	}
	return false
}

func (r *run) work(f fetched) *Work[rawArgs] {
	return &Work[rawArgs]{ID: f.id, Group: r.o.Group, Partition: r.o.Partition, Key: f.key, Attempt: f.attempt + 1,
		MaxAttempts: f.max, CreatedAt: f.created, Token: r.o.Token, Batch: f.batch, Item: f.item, Args: rawArgs{f.args}, stamp: f.stamp}
}

// event is a run's event; plain runs' outcomes depend on their recording.
type event struct {
	JobEvent
	plain bool
	grant *partition.Ownership // the run's grant (for a fenced event: see record.go)
}

func (r *run) event(f fetched, oc Outcome, d time.Duration, err error) event {
	return event{JobEvent: JobEvent{Group: r.o.Group, Partition: r.o.Partition, ID: f.id, Kind: f.kind,
		Attempt: f.attempt + 1, Token: r.o.Token, Outcome: oc, Duration: d, Err: err}, plain: true, grant: &r.o}
}

// runOne runs one job's handler, plain or transactional.
func (r *run) runOne(hctx context.Context, f fetched, h handler) {
	p := r.p
	w := r.work(f)
	jc := p.jobContext(hctx, h)
	defer jc.release()
	jctx, span := p.trace.startRun(jc.ctx, r.o, f)
	start := time.Now()
	r.track(f, jc.cancel, start)
	if !h.tx {
		err := timedOut(jctx, call(jctx, h, nil, w))
		d := time.Since(start)
		r.untrack(f)
		if c, _ := r.isCancelled(f.id); c {
			// Cancelled in the database already: whatever the handler
			// returned, its completion would change nothing.
			r.add(f, nil, r.cancelledEvent(f, d, err))
			end(span, err, OutcomeCancelled)
			return
		}
		if interrupted(hctx, err) {
			r.interrupt(f, r.event(f, OutcomeInterrupted, d, err))
			end(span, err, OutcomeInterrupted)
			return
		}
		rec := p.outcome(f, err, r.log)
		r.add(f, &rec, r.event(f, rec.result(), d, err))
		end(span, err, rec.result())
		return
	}
	err := p.runTx(jctx, r.o, f, h, w)
	r.untrack(f)
	r.txResult(hctx, f, err, time.Since(start))
	if span != nil { // r.outcome takes the run's lock: not for untraced runs
		end(span, err, r.outcome())
	}
}

// outcome is the outcome of the last result added (for a batch, all of
// them share it).
func (r *run) outcome() Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.results) == 0 {
		return ""
	}
	return r.results[len(r.results)-1].ev.Outcome
}

// runBatch runs a batch handler's batch.
func (r *run) runBatch(hctx context.Context, fs []fetched, h handler) {
	ws := make([]*Work[rawArgs], len(fs))
	for i, f := range fs {
		ws[i] = r.work(f)
	}
	jc := r.p.jobContext(hctx, h)
	defer jc.release()
	jctx, span := r.p.trace.startBatch(jc.ctx, r.o, fs)
	start := time.Now()
	r.trackAll(fs, jc.cancel, start)
	err := r.p.runTxBatch(jctx, r.o, fs, h, ws)
	d := time.Since(start)
	r.untrackAll(fs)
	for _, f := range fs {
		r.txResult(hctx, f, err, d)
	}
	if span != nil { // r.outcome takes the run's lock: not for untraced runs
		end(span, err, r.outcome())
	}
}

// txResult sorts the result of a transactional run: committed (nothing to
// record), fenced (the partition has a newer owner), or an outcome to
// record.
func (r *run) txResult(hctx context.Context, f fetched, err error, d time.Duration) {
	var he handlerError
	ev := r.event(f, OutcomeCompleted, d, nil)
	ev.plain = false
	if c, some := r.isCancelled(f.id); err != nil && some && !errors.Is(err, fence.ErrFenced) {
		// A job of the run was cancelled while it ran: its transaction
		// rolled back (or the handler failed on its cancelled context).
		// The cancelled job is finished already; the others of a batch
		// run again without spending an attempt, as when their completion
		// finds a job finished (errFinished).
		if c {
			if !errors.As(err, &he) { // not the handler's: errFinished, a failed commit
				err = nil
			}
			r.add(f, nil, r.cancelledEvent(f, d, err))
		} else {
			ev.Outcome = OutcomeSkipped
			r.add(f, nil, ev)
		}
		return
	}
	switch {
	case err == nil:
		r.add(f, nil, ev)
	case errors.Is(err, errFinished):
		ev.Outcome = OutcomeSkipped
		r.add(f, nil, ev)
	case errors.As(err, &he):
		if interrupted(hctx, err) {
			ev.Outcome, ev.Err = OutcomeInterrupted, he.err
			r.interrupt(f, ev)
			return
		}
		rec := r.p.outcome(f, he.err, r.log)
		ev = r.event(f, rec.result(), d, he.err) // recorded with the plain runs
		r.add(f, &rec, ev)
	case errors.Is(err, fence.ErrFenced):
		ev.Outcome, ev.Err = OutcomeFenced, err
		r.add(f, nil, ev)
		r.fence(err)
	case interrupted(hctx, err):
		ev.Outcome, ev.Err = OutcomeInterrupted, err
		r.interrupt(f, ev)
	default:
		r.log.Warn("queue: job not recorded; it runs again", "job", f.id, "kind", f.kind, "err", err)
		ev.Outcome, ev.Err = OutcomeUnrecorded, err
		r.add(f, nil, ev)
	}
}

// interrupt records a run cut short by a handoff or a lost lease: it spends
// no attempt, so a recovered run gets back the attempt charged before it.
func (r *run) interrupt(f fetched, ev event) {
	var rec *outcome
	if f.charged {
		rec = &outcome{id: f.id, state: "pending", spent: f.spend(0), item: f.item != ""}
	}
	r.add(f, rec, ev)
}

// interrupted reports whether a run failed because its partition is being
// handed off or lost (hctx is done): the job then stays pending, without
// spending an attempt, for the next owner.
func interrupted(hctx context.Context, err error) bool {
	return err != nil && hctx.Err() != nil
}

// timedOut names the job timeout in err when it caused it.
func timedOut(jctx context.Context, err error) error {
	if err != nil && errors.Is(err, context.DeadlineExceeded) && errors.Is(context.Cause(jctx), ErrJobTimeout) {
		return fmt.Errorf("%w: %w", context.Cause(jctx), err)
	}
	return err
}

// report counts events for operators (see record.go) and calls the OnJob
// hook for them.
func (p *Processor) report(evs ...event) {
	for i := range evs {
		p.tallies.count(&evs[i])
	}
	f := p.cfg.Hooks.OnJob
	if f == nil {
		return
	}
	for _, ev := range evs {
		f(ev.JobEvent)
	}
}

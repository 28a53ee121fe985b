package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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

	mu      sync.Mutex
	results []jobResult
	fenced  error // a transactional run was refused by the fence
}

// add records the result of one job's run.
func (r *run) add(f fetched, rec *outcome, ev event) {
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
		MaxAttempts: f.max, CreatedAt: f.created, Token: r.o.Token, Batch: f.batch, Item: f.item, Args: rawArgs{f.args}}
}

// event is a run's event; plain runs' outcomes depend on their recording.
type event struct {
	JobEvent
	plain bool
}

func (r *run) event(f fetched, oc Outcome, d time.Duration, err error) event {
	return event{JobEvent: JobEvent{Group: r.o.Group, Partition: r.o.Partition, ID: f.id, Kind: f.kind,
		Attempt: f.attempt + 1, Outcome: oc, Duration: d, Err: err}, plain: true}
}

// runOne runs one job's handler, plain or transactional.
func (r *run) runOne(hctx context.Context, f fetched, h handler) {
	p := r.p
	w := r.work(f)
	jctx, cancel := p.jobContext(hctx, h)
	defer cancel()
	start := time.Now()
	if !h.tx {
		err := timedOut(jctx, call(jctx, h, nil, w))
		d := time.Since(start)
		if interrupted(hctx, err) {
			r.interrupt(f, r.event(f, OutcomeInterrupted, d, err))
			return
		}
		rec := p.outcome(f, err, r.log)
		r.add(f, &rec, r.event(f, rec.result(), d, err))
		return
	}
	err := p.runTx(jctx, r.o, f, h, w)
	r.txResult(hctx, f, err, time.Since(start))
}

// runBatch runs a batch handler's batch.
func (r *run) runBatch(hctx context.Context, fs []fetched, h handler) {
	ws := make([]*Work[rawArgs], len(fs))
	for i, f := range fs {
		ws[i] = r.work(f)
	}
	jctx, cancel := r.p.jobContext(hctx, h)
	defer cancel()
	start := time.Now()
	err := r.p.runTxBatch(jctx, r.o, fs, h, ws)
	d := time.Since(start)
	for _, f := range fs {
		r.txResult(hctx, f, err, d)
	}
}

// txResult sorts the result of a transactional run: committed (nothing to
// record), fenced (the partition has a newer owner), or an outcome to
// record.
func (r *run) txResult(hctx context.Context, f fetched, err error, d time.Duration) {
	var he handlerError
	ev := r.event(f, OutcomeCompleted, d, nil)
	ev.plain = false
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
		rec = &outcome{id: f.id, state: "pending", spent: f.spend(0)}
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

// report calls the OnJob hook for events.
func (p *Processor) report(evs ...event) {
	f := p.cfg.Hooks.OnJob
	if f == nil {
		return
	}
	for _, ev := range evs {
		f(ev.JobEvent)
	}
}

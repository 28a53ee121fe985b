package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

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

// run is one batch of a partition in progress: the outcomes to record and
// the events to report once they are.
type run struct {
	p   *Processor
	o   partition.Ownership
	log *slog.Logger

	mu     sync.Mutex
	outs   []outcome // plain runs' outcomes, recorded together at the end
	events []event   // with the outcome that recording them gives
	fenced error     // a transactional run was refused by the fence
}

// add records the result of one job's run.
func (r *run) add(rec *outcome, ev event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec != nil {
		r.outs = append(r.outs, *rec)
	}
	r.events = append(r.events, ev)
}

func (r *run) fence(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fenced == nil {
		r.fenced = err
	}
}

func (r *run) isFenced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fenced != nil
}

// batch runs one batch of due jobs and returns how many it fetched. ctx is
// the Run's context (no new job once it is done), hctx the handlers' base.
func (p *Processor) batch(ctx, hctx context.Context, o partition.Ownership, log *slog.Logger) (int, error) {
	jobs, err := p.fetch(ctx, o)
	if err != nil || len(jobs) == 0 {
		return 0, err
	}
	return len(jobs), p.process(ctx, hctx, o, log, jobs)
}

// fetch reads the partition's due jobs, at most BatchSize.
func (p *Processor) fetch(ctx context.Context, o partition.Ownership) ([]fetched, error) {
	rows, err := p.pool.Query(ctx, p.q.fetch, o.Group, o.Partition, p.cfg.BatchSize)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (fetched, error) {
		var f fetched
		err := r.Scan(&f.id, &f.key, &f.kind, &f.args, &f.attempt, &f.max, &f.created)
		return f, err
	})
}

// process runs fetched jobs and records their outcomes.
func (p *Processor) process(ctx, hctx context.Context, o partition.Ownership, log *slog.Logger, jobs []fetched) error {
	r := &run{p: p, o: o, log: log}
	r.runJobs(ctx, hctx, jobs)
	if r.fenced != nil {
		r.report(OutcomeFenced, r.fenced)
		return r.fenced
	}
	if len(r.outs) == 0 {
		r.report("", nil)
		return r.stalled() // if not nil, wait before fetching the same jobs again
	}
	// Record the outcomes even when ctx was just cancelled: the lease is
	// held until Run returns, and the fence refuses a stale owner.
	cctx, cancel := recordContext(ctx)
	defer cancel()
	_, err := p.completeFenced(cctx, p.pool, o, r.outs)
	switch {
	case errors.Is(err, fence.ErrFenced):
		r.report(OutcomeFenced, err)
	case err != nil:
		r.report(OutcomeUnrecorded, err)
	default:
		r.report("", nil)
	}
	return err
}

// recordContext bounds a write that records what already happened: it
// must not be cut short by ctx's end (a handoff), only bounded.
func recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// stalled returns an error when no run of the batch got anywhere: every
// one failed on the processor's side (say a lock timeout at the fence
// check), so fetching again at once would spin on the same jobs.
func (r *run) stalled() error {
	for _, ev := range r.events {
		if ev.Outcome != OutcomeUnrecorded {
			return nil
		}
	}
	if len(r.events) == 0 {
		return nil
	}
	return fmt.Errorf("queue: no outcome of %d run(s) could be recorded: %w", len(r.events), r.events[0].Err)
}

// report calls the OnJob hook for every run of the batch. A non-empty
// override replaces the outcome of the plain runs (whose outcomes are
// recorded together at the end). Transactional runs keep theirs: a run that
// committed before another was refused by the fence is completed.
func (r *run) report(override Outcome, err error) {
	f := r.p.cfg.Hooks.OnJob
	if f == nil {
		return
	}
	for _, ev := range r.events {
		if override != "" && ev.plain {
			ev.Outcome, ev.Err = override, err
		}
		f(ev.JobEvent)
	}
}

// runJobs runs the fetched jobs, up to PartitionConcurrency at once, then
// the batch handlers' batches.
func (r *run) runJobs(ctx, hctx context.Context, jobs []fetched) {
	p := r.p
	type pending struct {
		fs    []fetched
		works []*Work[rawArgs]
	}
	batches := make(map[string]*pending) // by kind, for batch handlers
	var kinds []string                   // in order of first appearance
	here := make(chan struct{}, p.cfg.PartitionConcurrency)
	var wg sync.WaitGroup
	for _, f := range jobs {
		if ctx.Err() != nil || hctx.Err() != nil || r.isFenced() {
			break // handing off, stopping or lost: take no new job
		}
		w := r.work(f)
		h, ok := p.cfg.Workers.handlers[f.kind]
		switch {
		case f.attempt >= f.max: // the last attempt was spent by a run that ended without an outcome
			err := fmt.Errorf("%w (attempt %d of %d)", ErrNoOutcome, f.attempt, f.max)
			r.log.Warn("queue: job discarded: its last attempt ended without an outcome", "job", f.id, "kind", f.kind, "attempt", f.attempt)
			msg := storable(err.Error())
			ev := r.event(f, OutcomeDiscarded, 0, err)
			ev.Attempt = f.attempt // it did not run
			r.add(&outcome{id: f.id, state: "discarded", err: &msg}, ev)
			continue
		case !ok:
			r.log.Warn("queue: no handler for the job's kind; kept pending", "job", f.id, "kind", f.kind)
			rec := p.later(f.id, p.cfg.UnknownKindDelay, fmt.Sprintf("no handler for kind %q", f.kind))
			r.add(&rec, r.event(f, OutcomeSnoozed, 0, nil))
			continue
		case h.runBatch != nil:
			if err := h.decodes(w); err != nil {
				rec := p.outcome(f, err, r.log)
				r.add(&rec, r.event(f, rec.result(), 0, err))
				continue
			}
			b := batches[f.kind]
			if b == nil {
				b = &pending{}
				batches[f.kind] = b
				kinds = append(kinds, f.kind)
			}
			b.fs, b.works = append(b.fs, f), append(b.works, w)
			continue
		}
		select {
		case here <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil || r.isFenced() || !p.acquire(ctx) {
			break // again: a run that ended meanwhile may have been fenced
		}
		if p.cfg.PartitionConcurrency == 1 { // one at a time: no goroutine to start
			r.runOne(hctx, f, h, w)
			p.release()
			<-here
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-here }()
			defer p.release()
			r.runOne(hctx, f, h, w)
		}()
	}
	wg.Wait()
	for _, kind := range kinds {
		if ctx.Err() != nil || r.isFenced() || !p.acquire(ctx) {
			break
		}
		b := batches[kind]
		r.runBatch(hctx, b.fs, p.cfg.Workers.handlers[kind], b.works)
		p.release()
	}
}

func (r *run) work(f fetched) *Work[rawArgs] {
	return &Work[rawArgs]{ID: f.id, Group: r.o.Group, Partition: r.o.Partition, Key: f.key, Attempt: f.attempt + 1,
		MaxAttempts: f.max, CreatedAt: f.created, Token: r.o.Token, Args: rawArgs{f.args}}
}

// event is a run's event; plain runs' outcomes depend on the batch's
// recording.
type event struct {
	JobEvent
	plain bool
}

func (r *run) event(f fetched, oc Outcome, d time.Duration, err error) event {
	return event{JobEvent: JobEvent{Group: r.o.Group, Partition: r.o.Partition, ID: f.id, Kind: f.kind,
		Attempt: f.attempt + 1, Outcome: oc, Duration: d, Err: err}, plain: true}
}

// runOne runs one job's handler, plain or transactional.
func (r *run) runOne(hctx context.Context, f fetched, h handler, w *Work[rawArgs]) {
	p := r.p
	jctx, cancel := p.jobContext(hctx)
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
		r.add(&rec, r.event(f, rec.result(), d, err))
		return
	}
	err := p.runTx(jctx, r.o, f, h, w)
	r.txResult(hctx, f, err, time.Since(start))
}

// runBatch runs a batch handler's batch.
func (r *run) runBatch(hctx context.Context, fs []fetched, h handler, ws []*Work[rawArgs]) {
	jctx, cancel := r.p.jobContext(hctx)
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
		r.add(nil, ev)
	case errors.Is(err, errFinished):
		ev.Outcome = OutcomeSkipped
		r.add(nil, ev)
	case errors.As(err, &he):
		if interrupted(hctx, err) {
			ev.Outcome, ev.Err = OutcomeInterrupted, he.err
			r.interrupt(f, ev)
			return
		}
		rec := r.p.outcome(f, he.err, r.log)
		ev = r.event(f, rec.result(), d, he.err) // recorded with the plain runs
		r.add(&rec, ev)
	case errors.Is(err, fence.ErrFenced):
		ev.Outcome, ev.Err = OutcomeFenced, err
		r.add(nil, ev)
		r.fence(err)
	case interrupted(hctx, err):
		ev.Outcome, ev.Err = OutcomeInterrupted, err
		r.interrupt(f, ev)
	default:
		r.log.Warn("queue: job not recorded; it runs again", "job", f.id, "kind", f.kind, "err", err)
		ev.Outcome, ev.Err = OutcomeUnrecorded, err
		r.add(nil, ev)
	}
}

// interrupt records a run cut short by a handoff or a lost lease: it spends
// no attempt, so a recovered run gets back the attempt charged before it.
func (r *run) interrupt(f fetched, ev event) {
	var rec *outcome
	if f.charged {
		rec = &outcome{id: f.id, state: "pending", spent: f.spend(0)}
	}
	r.add(rec, ev)
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

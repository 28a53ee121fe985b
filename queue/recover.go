package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/partition"
)

// A job whose run takes its worker down (a crash, an out-of-memory kill, a
// handler that wedges the process) never returns an outcome, so no failure
// is ever recorded for it: left alone it would block its partition forever
// (its key's later jobs wait behind it) and fell every worker that takes the
// partition over. Spending an attempt before every run would cost a write
// per job. Instead each grant's Run records itself in queue_runs, open,
// while it runs (one write when it starts, one to close it when it ends
// cleanly), and a Run that finds its predecessor's record still open knows
// that run ended abruptly.
// It then runs the first fetch's jobs, the ones the predecessor may have had
// running, one at a time, spending an attempt in its own fenced write before
// each. A job that crashes every run thus runs out of attempts and is
// discarded with ErrNoOutcome, and the jobs that ran fine before it are not
// charged for its crashes.

// runState is what a Run knows about its grant's record in queue_runs.
type runState struct {
	opened     bool // recorded as the partition's running grant
	recovering bool // the previous run ended abruptly: the next fetch is recovered
	// charged holds the jobs this run spent an attempt on before running
	// them whose outcome is not recorded yet, so that a recovered batch
	// fetched again (after a database error) does not charge them twice.
	charged map[int64]bool
	// rates are the grant's rate-limit starts (limits.go), from the
	// previous run's when it ended cleanly.
	rates rates
	// handed are the limited jobs the recovery charged and left to the
	// pipeline (see recoverBatch), which spends no attempt on them.
	handed map[int64]bool
}

// openRun records o's grant as the partition's running one (and the
// handoff, as an Event), with the grants that start meanwhile (see
// runs.go), and reports whether the previous run ended abruptly; if it
// ended cleanly, the recent starts it handed over are added to rs. A newer
// grant's record means o is stale: *fence.FencedError.
func (p *Processor) openRun(ctx context.Context, o partition.Ownership, rs *rates) (abrupt bool, err error) {
	a, err := ask(ctx, p.opener, o, nil)
	if err != nil {
		return false, err
	}
	if a.recorded && !a.open {
		if err := rs.take(a.rate, a.since, time.Now()); err != nil {
			// Not ours to lose starts over: wait a period, as after a crash.
			p.fail("rate", o, "queue: the previous run's rate-limit starts do not decode; rate-limited keys wait a period", "err", err)
			rs.abrupt = time.Now()
		}
	}
	prev, open, recorded := a.prev, a.open, a.recorded
	if !recorded {
		fe := &fence.FencedError{Resource: partition.LeaseName(o.Group, o.Partition), Held: o.Token,
			Reason: "a newer grant runs the partition"}
		if prev != nil { // nil when the newer grant's row was inserted concurrently
			fe.Current = fence.Token(*prev)
		}
		return false, fe
	}
	return open, nil
}

// closeRun marks o's run as ended cleanly, with the runs that end
// meanwhile (see runs.go). A failure only costs the next owner a
// recovered first fetch.
func (p *Processor) closeRun(ctx context.Context, o partition.Ownership, log *slog.Logger, rs *rates) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := ask(ctx, p.closer, o, rs.carry(p, time.Now())); err != nil {
		p.fail("close_run", o, "queue: could not record a clean end of the run; the next owner runs its first jobs one at a time", "err", err)
	}
}

// step opens the run, then, if the previous run ended abruptly, recovers
// one batch; st.recovering turns false once a batch is fully recovered.
func (p *Processor) step(ctx, hctx context.Context, o partition.Ownership, log *slog.Logger, st *runState) (int, error) {
	if !st.opened {
		abrupt, err := p.openRun(ctx, o, &st.rates)
		if err != nil {
			return 0, err
		}
		st.opened, st.recovering = true, abrupt
		if abrupt {
			st.rates.abrupt = time.Now() // the previous run's starts are unknown (limits.go)
		}
		if abrupt {
			p.fail("abrupt", o, "queue: the partition's previous run ended abruptly; its first jobs run one at a time, each spending an attempt first")
		}
	}
	if !st.recovering {
		return 0, nil
	}
	if st.charged == nil {
		st.charged = make(map[int64]bool)
	}
	if st.handed == nil {
		st.handed = make(map[int64]bool)
	}
	n, done, err := p.recoverBatch(ctx, hctx, o, log, st.charged, st.handed)
	if done {
		st.recovering, st.charged = false, nil
	}
	return n, err
}

// recoverBatch runs the first fetch after an abrupt end (up to Window
// jobs): the jobs run one
// at a time, each after its attempt is spent (and the fence checked) in a
// write of its own, and each outcome is recorded before the next job
// starts. A key whose job is left waiting (a retry, a snooze, an outcome
// not recorded) runs no later job in the batch. done reports that every
// job of the batch was run (or skipped) and recorded: a batch cut short,
// by an error or a handoff, is still to be recovered.
func (p *Processor) recoverBatch(ctx, hctx context.Context, o partition.Ownership, log *slog.Logger, charged, handed map[int64]bool) (n int, done bool, err error) {
	if ps := p.pauses.of(o.Group); ps != nil && ps.all {
		p.pauses.skips.Add(1)
		return 0, false, nil // recovered once the group is resumed (a resume wakes the partition)
	}
	// Window jobs: as many as the previous run may have held (with the same
	// configuration), so that the jobs it had running are among them.
	res, err := p.fetch(ctx, o, p.cfg.Window, nil, nil)
	if err != nil {
		return 0, false, err
	}
	jobs := keyOrder(res.jobs)
	waits := make(map[string]bool) // keys whose later jobs wait
	for i, f := range jobs {
		if ctx.Err() != nil || hctx.Err() != nil {
			return i, false, nil
		}
		if waits[f.key] {
			continue
		}
		if ps := p.pauses.of(o.Group); ps.kind(f.kind) {
			// Paused since the fetch (the group, or the job's kind): the
			// batch is cut short, and fetched again (without the paused
			// kinds) once the group is not paused.
			p.pauses.skips.Add(1)
			return i, false, nil
		}
		if charged[f.id] {
			// Charged by this run already; its run's outcome was not
			// recorded (a database error) and the attempt stays spent.
			f.attempt--
			f.charged = true
		} else if _, ok := p.cfg.Workers.handlers[f.kind]; ok && f.attempt < f.max {
			cctx, cancel := recordContext(ctx)
			n, _, err := p.completeFenced(cctx, p.pool, o, []outcome{{id: f.id, state: "pending", spent: 1, item: f.item != ""}})
			cancel()
			if err != nil {
				return i, false, err
			}
			if n == 0 {
				continue // finished meanwhile (an operator cancelled it)
			}
			f.charged, charged[f.id] = true, true
		}
		if p.limited(f) {
			// Its rate or its kind's slots are the pipeline's to respect
			// (limits.go): it runs there, and its key's later jobs after
			// it. Charged like every job the previous run may have had
			// running (a job that kills its worker still runs out of
			// attempts); the pipeline spends no attempt on its outcome.
			if f.key != "" {
				waits[f.key] = true
			}
			if f.charged {
				handed[f.id] = true
			}
			delete(charged, f.id)
			continue
		}
		left, err := p.process(ctx, hctx, o, log, f)
		if err != nil {
			return i + 1, false, err
		}
		if left && f.key != "" {
			waits[f.key] = true
		}
		delete(charged, f.id) // its outcome spent the charge: due again, it is charged anew
	}
	return len(jobs), true, nil
}

// keyOrder returns jobs, which come in (priority, run_at, id) order, with
// each key's jobs in id order: a key's jobs run in id order, as a
// pipeline's lines run them, whatever their run_at (a retried job's is
// later than its key's later jobs') or priority. Each key's jobs take the
// places its jobs had in the fetch's order; keyless jobs keep theirs.
func keyOrder(jobs []fetched) []fetched {
	byKey := make(map[string][]fetched)
	for _, f := range jobs {
		if f.key != "" {
			byKey[f.key] = append(byKey[f.key], f)
		}
	}
	for _, fs := range byKey {
		slices.SortFunc(fs, func(a, b fetched) int { return cmp.Compare(a.id, b.id) })
	}
	out := make([]fetched, len(jobs))
	for i, f := range jobs {
		if k := f.key; k != "" {
			f, byKey[k] = byKey[k][0], byKey[k][1:]
		}
		out[i] = f
	}
	return out
}

// process runs one job and records its outcome before returning. left
// reports that the job stays pending and holds its key (a retry or snooze
// of a job that holds its place, or a run whose outcome was not recorded).
func (p *Processor) process(ctx, hctx context.Context, o partition.Ownership, log *slog.Logger, f fetched) (left bool, err error) {
	r := &run{p: p, o: o, log: log, set: p.setOf(o)}
	if !r.settle(f) {
		h := p.cfg.Workers.handlers[f.kind]
		if h.runBatch != nil {
			r.runBatch(hctx, []fetched{f}, h)
		} else {
			r.runOne(hctx, f, h)
		}
	}
	var outs []outcome
	var evs []event
	for _, res := range r.results {
		evs = append(evs, res.ev)
		switch {
		case res.rec != nil:
			outs = append(outs, *res.rec)
			left = left || res.rec.state == "pending" && f.holds
		case res.ev.Outcome != OutcomeCompleted && res.ev.Outcome != OutcomeSkipped && res.ev.Outcome != OutcomeCancelled:
			left = true
		}
	}
	override := func(oc Outcome, err error) {
		for i := range evs {
			if evs[i].plain {
				evs[i].Outcome, evs[i].Err = oc, err
			}
		}
	}
	switch {
	case r.fenced != nil:
		override(OutcomeFenced, r.fenced)
		p.report(evs...)
		return true, r.fenced
	case len(outs) == 0:
		p.report(evs...)
		if len(evs) > 0 && evs[0].Outcome == OutcomeUnrecorded {
			// Wait before fetching the same job again.
			return true, fmt.Errorf("queue: the outcome of job %d could not be recorded: %w", f.id, evs[0].Err)
		}
		return left, nil
	}
	// Record the outcome even when ctx was just cancelled: the lease is
	// held until Run returns, and the fence refuses a stale owner.
	cctx, cancel := recordContext(ctx)
	defer cancel()
	_, err = p.recordOne(cctx, o, outs)
	switch {
	case errors.Is(err, fence.ErrFenced):
		override(OutcomeFenced, err)
	case err != nil:
		override(OutcomeUnrecorded, err)
	}
	p.report(evs...)
	return left || err != nil, err
}

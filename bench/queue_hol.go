package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// The hol case (head of line): --hol-jobs (2000) keyed jobs are enqueued in
// one batched insert at time zero on a running, idle system; every 100th
// sleeps --hol-slow (2s), the others 1ms. Measured: for the fast jobs only,
// the time from time zero until their completion was observed committed
// (leasehold: the commit of the statement completing them, seen by the
// tracer; River: its completion event, sent after its completer wrote the
// completion). A slow job that holds up fast ones behind it shows in their
// p99.

// holEvery makes every holEvery-th job of the hol case slow.
const holEvery = 100

// holFast is how long the hol case's fast jobs sleep.
const holFast = time.Millisecond

// holSettle is how long a started system idles before time zero, so that
// it is listening for new jobs when they come.
const holSettle = 200 * time.Millisecond

// holSlowJob reports whether job n of the hol case is slow: the 100th,
// the 200th, ... (n = 99, 199, ...).
func holSlowJob(n int) bool { return n%holEvery == holEvery-1 }

// holSleep returns how long the handler of job n of the hol case sleeps.
func (f queueFlags) holSleep(n int) time.Duration {
	if holSlowJob(n) {
		return f.holSlow
	}
	return holFast
}

// holCap returns how long the hol case may run before it is cut: --duration,
// but at least five slow sleeps.
func (f queueFlags) holCap() time.Duration { return max(f.duration, 5*f.holSlow) }

// hol measures sys on n jobs of the hol case enqueued at once, cut at d.
// Its sample's latencies are the fast jobs' times from time zero until
// their completion was observed; a fast job not completed when the case was
// cut counts as completed at the cut (a lower bound; the sample is marked
// short). Its rate is the jobs finished over the time until the last one.
func (q *queueBench) hol(ctx context.Context, sys queueSystem, n int, d time.Duration) (sample, error) {
	if err := sys.reset(ctx); err != nil {
		return sample{}, err
	}
	b := newBurn(n, q.f.partitions)
	b.track = true
	run, err := sys.start(ctx, caseHOL, b, nil)
	if err != nil {
		return sample{}, err
	}
	if err := run.open(); err != nil {
		stopRun(ctx, run)
		return sample{}, err
	}
	err = sleepCtx(ctx, holSettle)
	s0 := startSample(b) // time zero
	var ids []int64
	if err == nil {
		ids, err = sys.enqueue(ctx, caseHOL, 0, n)
	}
	var smp sample
	if err == nil {
		smp, err = await(ctx, b, s0, d)
	}
	if serr := stopRun(ctx, run); err == nil {
		err = serr
	}
	if err != nil {
		return smp, err
	}
	if smp.lat, err = holLatencies(ids, b.completions(), b.start, b.start.Add(smp.elapsed)); err != nil {
		return smp, err
	}
	return smp, q.check(ctx, sys, caseHOL, n, smp, !smp.short)
}

// holLatencies returns the sorted latencies of the fast jobs of the hol
// case: ids are the enqueued jobs' ids (job n's at index n), done their
// observed completions, t0 time zero; a fast job without a completion
// counts as completed at cut.
func holLatencies(ids []int64, done []completion, t0, cut time.Time) ([]time.Duration, error) {
	index := make(map[int64]int, len(ids))
	for n, id := range ids {
		index[id] = n
	}
	if len(index) != len(ids) {
		return nil, fmt.Errorf("%d distinct ids for %d enqueued jobs", len(index), len(ids))
	}
	at := make([]time.Time, len(ids))
	for _, c := range done {
		n, ok := index[c.id]
		switch {
		case !ok:
			return nil, fmt.Errorf("job %d completed but was not enqueued", c.id)
		case !at[n].IsZero():
			return nil, fmt.Errorf("job %d completed twice", c.id)
		}
		at[n] = c.at
	}
	var lat []time.Duration
	for n, t := range at {
		if holSlowJob(n) {
			continue
		}
		if t.IsZero() {
			t = cut
		}
		lat = append(lat, t.Sub(t0))
	}
	slices.Sort(lat)
	return lat, nil
}

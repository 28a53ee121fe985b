package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The queue suite's cases, in the order they run within a round.
const (
	caseNoopBurndown  = "noop-burndown"
	caseKeyless       = "keyless"
	caseHotKey        = "hot-key"
	caseSteady        = "steady"
	caseTxOneRow      = "tx-one-row"
	caseIO            = "io-10ms"
	caseHOL           = "hol"
	caseFair          = "fair"
	caseEnqueueSingle = "enqueue-single"
	caseEnqueueBatch  = "enqueue-batch"
	caseIdleLatency   = "idle-latency"
)

var queueCases = []string{caseNoopBurndown, caseKeyless, caseHotKey, caseSteady, caseTxOneRow, caseIO, caseHOL, caseFair,
	caseEnqueueSingle, caseEnqueueBatch, caseIdleLatency}

// ioSleep is how long the io-10ms case's handler sleeps.
const ioSleep = 10 * time.Millisecond

// hotKey is the one key of every job of the hot-key case.
const hotKey = "hot"

// sleepOf returns how long the handler of job n of case c sleeps (io-10ms,
// hol, fair; the other cases' handlers do not sleep).
func (q *queueBench) sleepOf(c string, n int) time.Duration {
	switch c {
	case caseIO, caseFair:
		return ioSleep
	case caseHOL:
		return q.f.holSleep(n)
	}
	return 0
}

// caseRuns reports whether system sys takes part in case c. The raw-SQL
// loop runs no handlers, so it sits out the cases whose handlers sleep
// (io-10ms, hol, fair); and it places jobs in partitions itself, so it
// sits out keyless, whose placement is the library's to decide.
func caseRuns(c, sys string) bool {
	if sys != sysQueueRaw {
		return true
	}
	return c != caseIO && c != caseHOL && c != caseFair && c != caseKeyless
}

// steadyInsertBatch is how many jobs the steady case's producer inserts per
// call while the backlog is below --steady-backlog: 5000, as River's own benchmark does.
const steadyInsertBatch = 5000

// one measures case c on sys once. warm makes it small (the untimed
// warm-up before round 1).
func (q *queueBench) one(ctx context.Context, sys queueSystem, c string, warm bool) (sample, error) {
	d := q.f.duration
	if warm {
		d = min(d, 500*time.Millisecond)
	}
	switch c {
	case caseNoopBurndown, caseKeyless, caseHotKey, caseTxOneRow, caseIO:
		n := q.f.jobsOf(c)
		if warm {
			n = min(n, 2000)
		}
		return q.burndown(ctx, sys, c, n, d)
	case caseHOL:
		n := q.f.holJobs
		if warm {
			n = min(n, holEvery-1) // no slow job
		} else {
			d = q.f.holCap()
		}
		return q.hol(ctx, sys, n, d)
	case caseFair:
		n := q.f.fairJobs
		if warm {
			n = min(n, 2000)
		}
		return q.fair(ctx, sys, n, d)
	case caseSteady:
		return q.steady(ctx, sys, d)
	case caseEnqueueSingle, caseEnqueueBatch:
		return q.enqueueCase(ctx, sys, c, d)
	case caseIdleLatency:
		n := q.f.latencyJobs
		if warm {
			n = min(n, 3)
		}
		return q.idleLatency(ctx, sys, n, d)
	}
	return sample{}, fmt.Errorf("unknown case %q", c)
}

// fill empties sys's tables and enqueues a backlog of n jobs of case c with
// its batched insert, untimed, then checkpoints. It runs no ANALYZE: the
// jobs table's statistics are whatever autovacuum made of them, as in an
// application.
func (q *queueBench) fill(ctx context.Context, sys queueSystem, c string, n int) error {
	if err := sys.reset(ctx); err != nil {
		return err
	}
	for first := 0; first < n; first += q.f.enqueueBatch {
		if _, err := sys.enqueue(ctx, c, first, min(q.f.enqueueBatch, n-first)); err != nil {
			return fmt.Errorf("enqueue the backlog: %w", err)
		}
	}
	return sys.checkpoint(ctx)
}

// stopRun stops run with a deadline of its own.
func stopRun(ctx context.Context, run queueRun) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	return run.stop(sctx)
}

// burndown measures sys burning down a fresh backlog of n jobs of case c,
// cut at d, and checks the outcome in the database.
func (q *queueBench) burndown(ctx context.Context, sys queueSystem, c string, n int, d time.Duration) (sample, error) {
	if err := q.fill(ctx, sys, c, n); err != nil {
		return sample{}, fmt.Errorf("set up: %w", err)
	}
	b := newBurn(n, q.f.partitions)
	run, err := sys.start(ctx, c, b, nil)
	if err != nil {
		return sample{}, err
	}
	s0 := startSample(b)
	if err := run.open(); err != nil {
		stopRun(ctx, run)
		return sample{}, err
	}
	smp, err := await(ctx, b, s0, d)
	if serr := stopRun(ctx, run); err == nil {
		err = serr
	}
	if err != nil {
		return smp, err
	}
	smp.lat = b.latencies()
	return smp, q.check(ctx, sys, c, n, smp, !smp.short)
}

// errCheck marks a measurement whose outcome in the database disagrees
// with what was counted.
var errCheck = errors.New("check")

// check verifies sys's tables after a measurement; see checkTally.
func (q *queueBench) check(ctx context.Context, sys queueSystem, c string, want int, smp sample, complete bool) error {
	t, err := sys.tally(ctx)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if err := checkTally(t, c, want, smp, complete); err != nil {
		return fmt.Errorf("%w: %w", errCheck, err)
	}
	return nil
}

// steady measures sys for d while a producer keeps its backlog of no-op
// jobs topped up to --steady-backlog (in batches of steadyInsertBatch with
// the system's own batched insert), as River's own benchmark does. The
// rate is the jobs finished over d; the producer's inserts load the same
// machine and server for every system.
func (q *queueBench) steady(ctx context.Context, sys queueSystem, d time.Duration) (sample, error) {
	backlog := q.f.steadyBacklog
	if err := q.fill(ctx, sys, caseSteady, backlog); err != nil {
		return sample{}, fmt.Errorf("set up: %w", err)
	}
	b := newBurn(math.MaxInt32, q.f.partitions)
	run, err := sys.start(ctx, caseSteady, b, nil)
	if err != nil {
		return sample{}, err
	}
	var (
		inserted = int64(backlog)
		halt     atomic.Bool
		perr     error
		wg       sync.WaitGroup
	)
	wg.Go(func() {
		for !halt.Load() && ctx.Err() == nil {
			if inserted-b.done.Load() >= int64(backlog) {
				time.Sleep(time.Millisecond)
				continue
			}
			if _, perr = sys.enqueue(ctx, caseSteady, int(inserted), steadyInsertBatch); perr != nil {
				return
			}
			inserted += steadyInsertBatch
		}
	})
	s0 := startSample(b)
	if err := run.open(); err != nil {
		halt.Store(true)
		wg.Wait()
		stopRun(ctx, run)
		return sample{}, err
	}
	smp, err := await(ctx, b, s0, d)
	halt.Store(true)
	wg.Wait()
	if serr := stopRun(ctx, run); err == nil {
		err = serr
	}
	if err == nil && perr != nil {
		err = fmt.Errorf("producer: %w", perr)
	}
	if err != nil {
		return smp, err
	}
	smp.short = false // steady state always runs for d
	smp.lat = b.latencies()
	return smp, q.check(ctx, sys, caseSteady, int(inserted), smp, false)
}

// enqueueCase measures sys's inserts for d on --enqueue-workers goroutines
// into an emptied table: one job per call (enqueue-single), or
// --enqueue-size per call (enqueue-batch). Latencies are per call; the rate
// is jobs per second.
func (q *queueBench) enqueueCase(ctx context.Context, sys queueSystem, c string, d time.Duration) (sample, error) {
	if err := sys.reset(ctx); err != nil {
		return sample{}, err
	}
	size := 1
	if c == caseEnqueueBatch {
		size = q.f.enqueueSize
	}
	var next atomic.Int64
	p := plan{op: func(ctx context.Context, _, _ int) (bool, error) {
		first := int(next.Add(int64(size))) - size
		if size == 1 {
			return true, sys.enqueueOne(ctx, c, first)
		}
		_, err := sys.enqueue(ctx, c, first, size)
		return true, err
	}}
	smp, err := measure(ctx, q.f.enqueueWorkers, d, p, "system", sys.name(), "case", c)
	if err != nil {
		return smp, err
	}
	smp.ops *= size
	t, err := sys.tally(ctx)
	switch {
	case err != nil:
		return smp, fmt.Errorf("check: %w", err)
	case t.total != smp.ops || t.waiting != t.total:
		return smp, fmt.Errorf("%w: %d jobs in the table (%d waiting), %d enqueued", errCheck, t.total, t.waiting, smp.ops)
	}
	return smp, nil
}

// startEvent is a handler reporting that job n started.
type startEvent struct {
	n  int
	at time.Time
}

// idleLatency measures, on an idle running system, the time from the
// start of each job's enqueue until its handler starts, for up to n jobs
// within d. Each job is enqueued alone once the previous one completed,
// after a random gap of 5ms plus up to --latency-spread, so that its
// arrival falls at a random phase of any polling (a spread shorter than a
// poll interval would bias the result: every poller just woke when the
// previous job completed).
func (q *queueBench) idleLatency(ctx context.Context, sys queueSystem, n int, d time.Duration) (sample, error) {
	if err := sys.reset(ctx); err != nil {
		return sample{}, err
	}
	b := newBurn(n, q.f.partitions)
	starts := make(chan startEvent, n+16)
	run, err := sys.start(ctx, caseIdleLatency, b, func(i int) {
		select {
		case starts <- startEvent{i, time.Now()}:
		default: // more starts than jobs: the check below reports it
		}
	})
	if err != nil {
		return sample{}, err
	}
	s0 := startSample(b)
	smp := sample{}
	err = run.open()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := 0; err == nil && i < n && time.Since(b.start) < d; i++ {
		gap := 5*time.Millisecond + time.Duration(rng.Int64N(int64(q.f.latencySpread)+1))
		if err = sleepCtx(ctx, gap); err != nil {
			break
		}
		t0 := time.Now()
		if err = sys.enqueueOne(ctx, caseIdleLatency, i); err != nil {
			break
		}
		var lat time.Duration
		lat, err = awaitStart(ctx, starts, i, t0)
		if err != nil {
			break
		}
		smp.lat = append(smp.lat, lat)
		smp.ops++
		// Idle again: wait for the job's completion to commit.
		for deadline := time.Now().Add(10 * time.Second); err == nil && b.done.Load() < int64(i+1); {
			if time.Now().After(deadline) {
				err = fmt.Errorf("job %d started but did not complete within 10s", i)
			} else {
				err = sleepCtx(ctx, 200*time.Microsecond)
			}
		}
	}
	smp.elapsed = time.Since(b.start)
	smp.cpu, smp.allocs, smp.gcCPU = processCPU()-s0.cpu, mallocs()-s0.allocs, gcCPU()-s0.gcCPU
	if serr := stopRun(ctx, run); err == nil {
		err = serr
	}
	if err != nil {
		return smp, err
	}
	slices.Sort(smp.lat)
	if len(starts) > 0 {
		return smp, fmt.Errorf("%w: %d handler starts more than jobs", errCheck, len(starts))
	}
	return smp, q.check(ctx, sys, caseIdleLatency, smp.ops, smp, true)
}

// awaitStart waits for job i's start and returns the time since t0.
func awaitStart(ctx context.Context, starts <-chan startEvent, i int, t0 time.Time) (time.Duration, error) {
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case ev := <-starts:
			if ev.n != i {
				return 0, fmt.Errorf("job %d started while waiting for job %d", ev.n, i)
			}
			return ev.at.Sub(t0), nil
		case <-timeout.C:
			return 0, fmt.Errorf("job %d did not start within 10s of its enqueue", i)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

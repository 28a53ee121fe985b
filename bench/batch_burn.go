package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// batchRound is one round's measurements.
type batchRound struct {
	batchFirst bool
	submit     submitResult    // SubmitItems of N items, default SubmitChunk
	fill       submitResult    // the plain backlog's EnqueueMany (reference)
	plain      time.Duration   // plain burn-down: from the open until the last completion (server clock)
	batch      time.Duration   // batch burn-down: from SealedAt to FinishedAt (server clock)
	reads      []time.Duration // progress reads (Client.Batch)
	floor      []time.Duration // the control reads (SELECT 1) right after each
	load       [2]float64      // the machine's 1-minute load average before and after the batch burn-down
	// plainCPU and batchCPU are this process's CPU time (user+system)
	// over each burn-down: the workers' client-side cost (and, in the
	// batch's, the reader's few reads).
	plainCPU, batchCPU time.Duration
}

func (r batchRound) plainRate(n int) float64 { return perSec(n, r.plain) }
func (r batchRound) batchRate(n int) float64 { return perSec(n, r.batch) }

func perSec(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// rounds runs --rounds rounds of both burn-downs, on an emptied jobs table
// each, plain first in odd rounds and batch first in even ones.
func (b *batchBench) rounds(ctx context.Context) ([]batchRound, error) {
	n := b.f.items
	var out []batchRound
	for r := 1; r <= b.f.rounds; r++ {
		rd := batchRound{batchFirst: r%2 == 0}
		for k := range 2 {
			var err error
			if (k == 0) == rd.batchFirst {
				err = b.batchBurn(ctx, r, &rd)
			} else {
				err = b.plainBurn(ctx, &rd)
			}
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", r, err)
			}
		}
		out = append(out, rd)
		lat, fl := summarizeLat(rd.reads), summarizeLat(rd.floor)
		fmt.Fprintf(b.stderr, "  r%d submit %8.0f items/s (peak heap %.1f MiB, %.0f B/item)  plain %8.0f items/s  batch %8.0f items/s  "+
			"batch/plain %.2f  client CPU %.1f / %.1f µs/item  reads %d p50 %.2f p99 %.2f max %.2f ms (SELECT 1: p50 %.2f p99 %.2f max %.2f)  load %.1f-%.1f\n",
			r, rd.submit.rate(), mib(rd.submit.peakHeap), rd.submit.bytesPerItem(), rd.plainRate(n), rd.batchRate(n),
			rd.batchRate(n)/rd.plainRate(n), perItemUS(rd.plainCPU, n), perItemUS(rd.batchCPU, n), lat.n, ms(lat.p50), ms(lat.p99), ms(lat.max), ms(fl.p50), ms(fl.p99), ms(fl.max),
			rd.load[0], rd.load[1])
	}
	return out, nil
}

// plainBurn measures the plain no-op burn-down of --items jobs.
func (b *batchBench) plainBurn(ctx context.Context, rd *batchRound) error {
	n := b.f.items
	if err := b.reset(ctx); err != nil {
		return err
	}
	fill, err := b.fillPlain(ctx, n)
	if err != nil {
		return err
	}
	rd.fill = fill
	if err := checkpoint(ctx, b.ctl); err != nil {
		return err
	}
	run, err := b.startWorkers(ctx)
	if err != nil {
		return err
	}
	var start time.Time
	if err := b.ctl.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&start); err != nil {
		run.stop(ctx)
		return err
	}
	cpu0 := processCPU()
	run.open()
	err = b.drain(ctx, run, int64(n), nil)
	rd.plainCPU = processCPU() - cpu0
	if serr := run.stop(ctx); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("plain burn-down: %w", err)
	}
	var end time.Time
	if err := b.ctl.QueryRow(ctx, "SELECT max(finished_at) FROM "+b.tables.jobs).Scan(&end); err != nil {
		return fmt.Errorf("plain burn-down: %w", err)
	}
	rd.plain = end.Sub(start)
	return b.check(ctx, n, false)
}

// batchBurn submits a batch of --items items (timed: the submission), then
// measures its burn-down from SealedAt to FinishedAt while a reader reads
// its progress every --read-every.
func (b *batchBench) batchBurn(ctx context.Context, r int, rd *batchRound) error {
	n := b.f.items
	if err := b.reset(ctx); err != nil {
		return err
	}
	name := fmt.Sprintf("round-%d", r)
	sub, err := b.submit(ctx, b.app, name, n)
	if err != nil {
		return err
	}
	rd.submit = sub
	if err := checkpoint(ctx, b.ctl); err != nil {
		return err
	}
	run, err := b.startWorkers(ctx)
	if err != nil {
		return err
	}
	sealed, err := b.app.SealBatch(ctx, batchGroup, name)
	if err != nil {
		run.stop(ctx)
		return fmt.Errorf("seal: %w", err)
	}
	cpu0 := processCPU()
	run.open()
	rctx, stopReads := context.WithCancel(ctx)
	var reads []queue.BatchInfo
	var rerr error
	var wg sync.WaitGroup
	finished := make(chan struct{})
	rd.load[0] = loadAvg()
	wg.Go(func() {
		reads, rd.reads, rd.floor, rerr = b.readProgress(rctx, name, finished)
	})
	// +1: the on-complete follow-up, which the finishing transaction
	// enqueues, also runs before the table has no pending job.
	err = b.drain(ctx, run, int64(n)+1, finished)
	rd.batchCPU = processCPU() - cpu0
	stopReads()
	wg.Wait()
	rd.load[1] = loadAvg()
	if serr := run.stop(ctx); err == nil {
		err = serr
	}
	if err == nil && rerr != nil && !errors.Is(rerr, context.Canceled) {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("batch burn-down: %w", err)
	}
	final, err := b.reader.Batch(ctx, batchGroup, name)
	if err != nil {
		return fmt.Errorf("batch burn-down: %w", err)
	}
	if err := checkProgress(append(reads, final), int64(n)); err != nil {
		return fmt.Errorf("%w: %w", errCheck, err)
	}
	if final.State() != queue.BatchSucceeded || final.CompleteJob == 0 || final.FinishedAt == nil || final.SealedAt == nil {
		return fmt.Errorf("%w: the batch after its burn-down: %+v", errCheck, final)
	}
	rd.batch = final.FinishedAt.Sub(*sealed.SealedAt)
	return b.check(ctx, n, true)
}

// readProgress reads batch name's progress every --read-every until ctx
// ends, timing each read, and closes finished once a read shows the batch
// finished (the reads go on until the burn-down's end). Right after each
// read it times a SELECT 1 on the same pool: the control, the latency of a
// round trip that reads nothing at the same moment (on a loaded machine,
// mostly waiting for a CPU). It returns the reads and both latencies.
func (b *batchBench) readProgress(ctx context.Context, name string, finished chan<- struct{}) (reads []queue.BatchInfo, lat, floor []time.Duration, err error) {
	t := time.NewTicker(b.f.readEvery)
	defer t.Stop()
	closed := false
	for {
		t0 := time.Now()
		info, err := b.reader.Batch(ctx, batchGroup, name)
		if err != nil {
			if ctx.Err() != nil {
				return reads, lat, floor, nil
			}
			return reads, lat, floor, fmt.Errorf("progress read: %w", err)
		}
		lat = append(lat, time.Since(t0))
		reads = append(reads, info)
		t1 := time.Now()
		if _, err := b.readPool.Exec(ctx, "SELECT 1"); err == nil {
			floor = append(floor, time.Since(t1))
		} else if ctx.Err() == nil {
			return reads, lat, floor, fmt.Errorf("control read: %w", err)
		}
		if info.FinishedAt != nil && !closed {
			close(finished)
			closed = true
		}
		select {
		case <-ctx.Done():
			return reads, lat, floor, nil
		case <-t.C:
		}
	}
}

// drain waits until run's handlers have run want times (and, if not nil,
// finished is closed), then until the jobs table has no pending job. It
// fails after --timeout, or when no handler ran for a minute.
func (b *batchBench) drain(ctx context.Context, run *batchRun, want int64, finished <-chan struct{}) error {
	const stall = time.Minute
	began := time.Now()
	last, lastAt := int64(-1), time.Now()
	for {
		h := run.handled.Load()
		done := h >= want
		if done && finished != nil {
			select {
			case <-finished:
			default:
				done = false
			}
		}
		if done {
			var pending bool
			if err := b.ctl.QueryRow(ctx, "SELECT EXISTS (SELECT FROM "+b.tables.jobs+" WHERE state = 'pending')").Scan(&pending); err != nil {
				return err
			}
			if !pending {
				return nil
			}
		}
		if h != last {
			last, lastAt = h, time.Now()
		}
		switch {
		case time.Since(began) > b.f.timeout:
			return fmt.Errorf("not done after --timeout %v (%d of %d handled)", b.f.timeout, h, want)
		case time.Since(lastAt) > stall:
			return fmt.Errorf("no handler ran for %v (%d of %d handled; member err %v)", stall, h, want, run.m.Err())
		}
		wait := 100 * time.Millisecond
		if done {
			wait = 10 * time.Millisecond
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return err
		}
	}
}

// check counts the jobs table after a burn-down of n jobs (batch: items);
// see checkBatchTally.
func (b *batchBench) check(ctx context.Context, n int, batch bool) error {
	var t batchTally
	err := b.ctl.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'completed' AND attempt = 1),
		count(*) FILTER (WHERE batch_item IS NOT NULL), count(*) FILTER (WHERE followup = 'complete') FROM `+b.tables.jobs).
		Scan(&t.total, &t.firstTry, &t.items, &t.followUps)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	return checkBatchTally(t, n, batch)
}

// loadAvg returns the machine's 1-minute load average (0 if unknown): on
// a shared machine, what else competed for the CPUs.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	x, _ := strconv.ParseFloat(f[0], 64)
	return x
}

// perItemUS returns d per item, in microseconds.
func perItemUS(d time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(d) / float64(n) / float64(time.Microsecond)
}

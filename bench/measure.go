package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// op is one timed operation of worker w; i counts the worker's operations
// from 0. It returns false, without doing anything, when the worker has no
// work left (a pre-built stock ran out); that ends the measurement early.
type op func(ctx context.Context, w, i int) (more bool, err error)

// sample is one measurement of one case on one system.
type sample struct {
	ops     int
	elapsed time.Duration   // from the start until every worker stopped
	lat     []time.Duration // every operation's latency, sorted
	short   bool            // a worker ran out of work before the duration
	cpu     time.Duration   // CPU time (user+system) this process used meanwhile
	allocs  uint64          // heap allocations this process made meanwhile
	gcCPU   time.Duration   // estimated CPU time the Go runtime spent on GC meanwhile
}

// gcCPUPerOp returns the Go runtime's GC CPU time per operation.
func (s sample) gcCPUPerOp() time.Duration {
	if s.ops == 0 {
		return 0
	}
	return s.gcCPU / time.Duration(s.ops)
}

// gcCPU returns the Go runtime's estimate of the CPU time spent on GC.
func gcCPU() time.Duration {
	m := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return time.Duration(m[0].Value.Float64() * float64(time.Second))
}

// allocsPerOp returns this process's heap allocations per operation.
func (s sample) allocsPerOp() float64 {
	if s.ops == 0 {
		return 0
	}
	return float64(s.allocs) / float64(s.ops)
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// cpuPerOp returns this process's CPU time per operation: the client-side
// cost of an operation, including the runtime's (GC) share.
func (s sample) cpuPerOp() time.Duration {
	if s.ops == 0 {
		return 0
	}
	return s.cpu / time.Duration(s.ops)
}

// processCPU returns the CPU time (user+system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rate returns operations per second.
func (s sample) rate() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.ops) / s.elapsed.Seconds()
}

// quantile returns the latency at quantile q (0..1), nearest rank.
func (s sample) quantile(q float64) time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	i := int(q*float64(len(s.lat))+0.5) - 1
	return s.lat[min(max(i, 0), len(s.lat)-1)]
}

// merge returns s and t as one sample, as if measured in one go.
func (s sample) merge(t sample) sample {
	s.ops += t.ops
	s.elapsed += t.elapsed
	s.lat = append(slices.Clip(s.lat), t.lat...)
	slices.Sort(s.lat)
	s.short = s.short || t.short
	s.cpu += t.cpu
	s.allocs += t.allocs
	s.gcCPU += t.gcCPU
	return s
}

// plan is one case made ready to measure on one system.
type plan struct {
	// op is the timed operation. Its i counts the worker's operations
	// across batches.
	op op
	// batch is how many operations each worker runs between calls of
	// prepare; 0 means one unbounded batch.
	batch int
	// prepare, if not nil, runs untimed before each batch, with the index
	// of the batch's first operation. It builds the batch's stock (say, the
	// leases to release) or clears the previous batch's leftovers.
	prepare func(ctx context.Context, first int) error
}

// measure runs p.op on workers goroutines, labelled for CPU profiles with
// labels (key, value pairs), for d of timed work: batches alternate with
// untimed calls of p.prepare until their timed phases add up to d (an
// operation in flight then completes and counts), a worker runs out of
// work, or an operation fails; the first error is returned.
func measure(ctx context.Context, workers int, d time.Duration, p plan, labels ...string) (sample, error) {
	var s sample
	lats := make([][]time.Duration, workers)
	for first := 0; s.elapsed < d; first += p.batch {
		if p.prepare != nil {
			if err := p.prepare(ctx, first); err != nil {
				return s, fmt.Errorf("prepare: %w", err)
			}
		}
		last := math.MaxInt
		if p.batch > 0 {
			last = first + p.batch
		}
		full, err := phase(ctx, workers, d-s.elapsed, first, last, p.op, lats, &s, labels)
		if err != nil {
			return s, err
		}
		if !full {
			break
		}
	}
	for _, l := range lats {
		s.lat = append(s.lat, l...)
	}
	slices.Sort(s.lat)
	s.ops = len(s.lat)
	return s, nil
}

// phase runs operations first..last-1 on every worker until d passes,
// adding its time, CPU and allocations to s and latencies to lats. It
// reports whether every worker completed its batch.
func phase(ctx context.Context, workers int, d time.Duration, first, last int, f op,
	lats [][]time.Duration, s *sample, labels []string) (full bool, err error) {
	var (
		stop     atomic.Bool
		short    atomic.Bool
		cut      atomic.Bool // the deadline or a failure ended the phase
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	allocs0, gc0, cpu0 := mallocs(), gcCPU(), processCPU()
	start := time.Now()
	deadline := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels(labels...), func(ctx context.Context) {
			defer wg.Done()
			lat := lats[w]
			if lat == nil {
				lat = make([]time.Duration, 0, 4096)
			}
			for i := first; i < last && !stop.Load(); i++ {
				t0 := time.Now()
				if !t0.Before(deadline) {
					cut.Store(true)
					break
				}
				more, err := f(ctx, w, i)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					cut.Store(true)
					stop.Store(true)
					break
				}
				if !more {
					short.Store(true)
					stop.Store(true)
					break
				}
				lat = append(lat, time.Since(t0))
			}
			lats[w] = lat
		})
	}
	wg.Wait()
	s.elapsed += time.Since(start)
	s.short = s.short || short.Load()
	s.cpu += processCPU() - cpu0
	s.allocs += mallocs() - allocs0
	s.gcCPU += gcCPU() - gc0
	return !cut.Load() && !stop.Load(), firstErr
}

// undoStack collects clean-ups and runs them in reverse order.
type undoStack []func()

func (u *undoStack) push(f func()) { *u = append(*u, f) }

// run runs the clean-ups, last pushed first, once.
func (u *undoStack) run() {
	for i := len(*u) - 1; i >= 0; i-- {
		(*u)[i]()
	}
	*u = nil
}

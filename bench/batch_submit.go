package main

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// submitResult is one producer's submission of a batch's items (or of a
// plain backlog with EnqueueMany, whose memory is not sampled).
type submitResult struct {
	items   int
	elapsed time.Duration
	// baseHeap is the heap in use (bytes of heap objects, live or not yet
	// swept) after a GC right before the submission; peakHeap the highest
	// sample during it. The process runs nothing else meanwhile: the
	// workers are not started.
	baseHeap, peakHeap uint64
	allocBytes         uint64 // bytes allocated on the heap during the submission
}

func (s submitResult) rate() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.items) / s.elapsed.Seconds()
}

func (s submitResult) bytesPerItem() float64 {
	if s.items == 0 {
		return 0
	}
	return float64(s.allocBytes) / float64(s.items)
}

const (
	metricHeapObjects = "/memory/classes/heap/objects:bytes"
	metricHeapAllocs  = "/gc/heap/allocs:bytes"
)

// readMetric returns the runtime metric name (a uint64 one).
func readMetric(name string) uint64 {
	m := []metrics.Sample{{Name: name}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return m[0].Value.Uint64()
}

// heapPeak samples the heap in use every interval until stopped, and
// keeps the highest sample.
type heapPeak struct {
	stop chan struct{}
	wg   sync.WaitGroup
	peak uint64
}

func sampleHeap(every time.Duration) *heapPeak {
	h := &heapPeak{stop: make(chan struct{}), peak: readMetric(metricHeapObjects)}
	h.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				h.peak = max(h.peak, readMetric(metricHeapObjects))
			}
		}
	})
	return h
}

// end stops the sampling and returns the peak, with a last sample.
func (h *heapPeak) end() uint64 {
	close(h.stop)
	h.wg.Wait()
	return max(h.peak, readMetric(metricHeapObjects))
}

// items yields the n no-op items of a batch, one at a time (the producer
// never holds them all): item key i<n>, key k<n mod --keys>, as plain job
// n of the plain backlog.
func (b *batchBench) items(n int) iter.Seq2[queue.Item, error] {
	return func(yield func(queue.Item, error) bool) {
		for i := range n {
			if !yield(queue.Item{ID: "i" + strconv.Itoa(i), Key: b.key(i), Args: noopJob{N: i}}, nil) {
				return
			}
		}
	}
}

// followUp is every batch's on-complete follow-up: a no-op job, so that
// the finishing transaction enqueues one as an application's would.
var followUp = &queue.FollowUp{Args: noopJob{N: -1}}

// submit creates batch name and submits n items with c's SubmitItems,
// timed, sampling the heap; the batch is left open (the caller seals it).
func (b *batchBench) submit(ctx context.Context, c *queue.Client, name string, n int) (submitResult, error) {
	if _, err := c.CreateBatch(ctx, queue.BatchSpec{Group: batchGroup, Name: name, OnComplete: followUp}); err != nil {
		return submitResult{}, fmt.Errorf("create batch: %w", err)
	}
	runtime.GC()
	res := submitResult{items: n, baseHeap: readMetric(metricHeapObjects)}
	a0 := readMetric(metricHeapAllocs)
	h := sampleHeap(b.f.sampleEvery)
	t0 := time.Now()
	added, err := c.SubmitItems(ctx, batchGroup, name, b.items(n))
	res.elapsed = time.Since(t0)
	res.peakHeap = h.end()
	res.allocBytes = readMetric(metricHeapAllocs) - a0
	if err != nil {
		return res, fmt.Errorf("submit items: %w", err)
	}
	if added != (queue.Added{Items: n, Added: n}) {
		return res, fmt.Errorf("%w: SubmitItems added %+v, want %d items all new", errCheck, added, n)
	}
	return res, nil
}

// fillPlain enqueues the plain backlog: jobs 0..n-1 with EnqueueMany, in
// calls of --enqueue-batch, as the queue suite builds its backlogs. It is
// timed for reference only (a different call: whole slices).
func (b *batchBench) fillPlain(ctx context.Context, n int) (submitResult, error) {
	t0 := time.Now()
	jobs := make([]queue.Job, 0, b.f.enqueueBatch)
	for first := 0; first < n; first += b.f.enqueueBatch {
		jobs = jobs[:0]
		for i := first; i < min(first+b.f.enqueueBatch, n); i++ {
			jobs = append(jobs, queue.Job{Group: batchGroup, Key: b.key(i), Args: noopJob{N: i}})
		}
		if _, err := b.app.EnqueueMany(ctx, jobs...); err != nil {
			return submitResult{}, fmt.Errorf("enqueue the plain backlog: %w", err)
		}
	}
	return submitResult{items: n, elapsed: time.Since(t0)}, nil
}

// sweep measures SubmitItems with each --chunks SubmitChunk, --sweep-items
// items per submission, --sweep-rounds rounds; the order of the chunk
// sizes rotates from round to round.
func (b *batchBench) sweep(ctx context.Context) (map[int][]submitResult, error) {
	clients := map[int]*queue.Client{}
	for _, c := range b.f.chunks {
		cl, err := b.client(b.producer, c)
		if err != nil {
			return nil, err
		}
		clients[c] = cl
	}
	out := map[int][]submitResult{}
	for r := 1; r <= b.f.sweepRounds; r++ {
		for i := range b.f.chunks {
			c := b.f.chunks[(i+r-1)%len(b.f.chunks)]
			if err := b.reset(ctx); err != nil {
				return nil, err
			}
			res, err := b.submit(ctx, clients[c], fmt.Sprintf("sweep-%d-%d", r, c), b.f.sweepItems)
			if err != nil {
				return nil, fmt.Errorf("sweep round %d, SubmitChunk %d: %w", r, c, err)
			}
			out[c] = append(out[c], res)
			fmt.Fprintf(b.stderr, "  sweep r%d SubmitChunk %-5d %8d items %8.0f items/s  peak heap %6.1f MiB (base %.1f)  %6.0f B/item\n",
				r, c, res.items, res.rate(), mib(res.peakHeap), mib(res.baseHeap), res.bytesPerItem())
		}
	}
	return out, nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

package main

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// latSummary sums up latencies: count, p50, p99 (nearest rank) and max.
type latSummary struct {
	n             int
	p50, p99, max time.Duration
}

// summarizeLat returns the summary of lat (in any order; not modified).
func summarizeLat(lat []time.Duration) latSummary {
	if len(lat) == 0 {
		return latSummary{}
	}
	s := sample{lat: slices.Sorted(slices.Values(lat))}
	return latSummary{n: len(lat), p50: s.quantile(0.50), p99: s.quantile(0.99), max: s.lat[len(s.lat)-1]}
}

// ratios returns num[i]/den[i] for each round both have with den[i] > 0:
// paired, so that what slows a whole round cancels out.
func ratios(num, den []float64) []float64 {
	var out []float64
	for i := range min(len(num), len(den)) {
		if den[i] > 0 {
			out = append(out, num[i]/den[i])
		}
	}
	return out
}

// bestChunk returns the SubmitChunk whose median rate is highest, and its
// median over the median of def (the default): 1.10 means 10% faster. ok
// is false when def was not measured.
func bestChunk(rates map[int][]float64, def int) (best int, over float64, ok bool) {
	d := median(rates[def])
	if d <= 0 {
		return 0, 0, false
	}
	keys := slices.Sorted(func(yield func(int) bool) {
		for k := range rates {
			if !yield(k) {
				return
			}
		}
	})
	bestRate := -1.0
	for _, k := range keys {
		if m := median(rates[k]); m > bestRate {
			best, bestRate = k, m
		}
	}
	return best, bestRate / d, true
}

// errProgress marks a history of progress reads that breaks an invariant.
var errProgress = errors.New("progress reads")

// checkProgress checks the progress reads of a sealed batch of total items
// taken while it burned down, in the order they were taken: each read adds
// up (Pending + Completed + Failed + Cancelled = Total = total), nothing
// fails or is cancelled (no-op items), Completed never goes back, and once
// a read shows the batch finished, every later one does, with nothing
// pending.
func checkProgress(reads []queue.BatchInfo, total int64) error {
	var prev queue.BatchInfo
	for i, b := range reads {
		switch {
		case b.Total != total:
			return fmt.Errorf("%w: read %d: Total %d, want %d", errProgress, i, b.Total, total)
		case b.Pending+b.Completed+b.Failed+b.Cancelled != b.Total || b.Pending < 0:
			return fmt.Errorf("%w: read %d: pending %d + completed %d + failed %d + cancelled %d != total %d",
				errProgress, i, b.Pending, b.Completed, b.Failed, b.Cancelled, b.Total)
		case b.Failed != 0 || b.Cancelled != 0:
			return fmt.Errorf("%w: read %d: %d failed, %d cancelled no-op items", errProgress, i, b.Failed, b.Cancelled)
		case i > 0 && b.Completed < prev.Completed:
			return fmt.Errorf("%w: read %d: Completed went back from %d to %d", errProgress, i, prev.Completed, b.Completed)
		case i > 0 && prev.FinishedAt != nil && (b.FinishedAt == nil || !b.FinishedAt.Equal(*prev.FinishedAt)):
			return fmt.Errorf("%w: read %d: FinishedAt changed after read %d showed it", errProgress, i, i-1)
		case b.FinishedAt != nil && b.Pending != 0:
			return fmt.Errorf("%w: read %d: finished with %d items pending", errProgress, i, b.Pending)
		}
		prev = b
	}
	return nil
}

// batchTally is what the jobs table holds after a burn-down.
type batchTally struct {
	total     int // jobs
	firstTry  int // completed on their first attempt
	items     int // batch items
	followUps int // on-complete follow-up jobs
}

// checkBatchTally checks the jobs table after a burn-down of n jobs, plain
// or (batch) n items and their on-complete follow-up: every job completed
// exactly once, on its first attempt, and the follow-up enqueued once.
func checkBatchTally(t batchTally, n int, batch bool) error {
	want := batchTally{total: n, firstTry: n}
	if batch {
		want = batchTally{total: n + 1, firstTry: n + 1, items: n, followUps: 1}
	}
	if t != want {
		return fmt.Errorf("%w: jobs table holds %+v, want %+v", errCheck, t, want)
	}
	return nil
}

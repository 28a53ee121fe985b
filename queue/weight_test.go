package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

type weighed struct{ Key string }

func (weighed) Kind() string { return "weighed" }

// Weights share a partition's handler slots between keys that may each
// run many jobs at once: with 4 slots, a key of weight 3 runs about three
// jobs at once and a key of weight 1 one, while both have jobs ready.
// Control: without weights the slots go in fetch order (the keys' jobs
// were enqueued alternately: about two each).
func TestKeyWeightsShareTheSlots(t *testing.T) {
	t.Parallel()
	for _, weighted := range []bool{true, false} {
		t.Run(map[bool]string{true: "weighted", false: "control"}[weighted], func(t *testing.T) {
			t.Parallel()
			heavy, light := weightRun(t, weighted)
			ratio := heavy / light
			t.Logf("jobs running at once on average: heavy %.2f, light %.2f (ratio %.2f)", heavy, light, ratio)
			switch {
			case weighted && (ratio < 2.2 || ratio > 4):
				t.Errorf("with weights 3:1 the keys ran %.2f:1 at once; want about 3", ratio)
			case !weighted && ratio > 1.6:
				t.Errorf("control: without weights the keys ran %.2f:1 at once; want about 1", ratio)
			}
		})
	}
}

// weightRun runs 300 jobs of each of two keys of partition 0 and returns
// how many jobs of each ran at once, on average over the starts made while
// both keys had jobs left.
func weightRun(t *testing.T, weighted bool) (heavy, light float64) {
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	keys := keysIn(0, 2, "weight")
	h, l := keys[0], keys[1]
	var mu sync.Mutex
	running := make(map[string]int)
	left := map[string]int{h: 300, l: 300}
	var sum [2]float64
	var n int
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[weighed]) error {
		mu.Lock()
		running[w.Key]++
		if left[h] > 20 && left[l] > 20 {
			sum[0] += float64(running[h])
			sum[1] += float64(running[l])
			n++
		}
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		running[w.Key]--
		left[w.Key]--
		mu.Unlock()
		return nil
	}, queue.WithPolicy(queue.Policy{KeyConcurrency: 100}))
	// A window that holds every job: the keys never fill their share, so
	// the starts measure the weights alone, not how soon a full key's next
	// jobs are read (fair.go).
	cfg := queue.ProcessorConfig{Workers: ws, Concurrency: 4, Window: 1000, PollInterval: 50 * time.Millisecond}
	if weighted {
		cfg.KeyWeight = func(key string) int {
			if key == h {
				return 3
			}
			return 1
		}
	}
	p, err := queue.NewProcessor(pgtest.Open(t, pool, leasehold.Config{Logger: quiet}), cfg)
	pgtest.Must(t, err)
	var jobs []queue.Job
	for range 300 {
		jobs = append(jobs, queue.Job{Group: "emails", Key: h, Args: weighed{}}, queue.Job{Group: "emails", Key: l, Args: weighed{}})
	}
	_, err = c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	serveWith(t, pool, "emails", 8, p, false)
	pgtest.WaitNoPendingJobs(t, pool, 60*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if n < 50 {
		t.Fatalf("only %d starts while both keys had jobs left", n)
	}
	return sum[0] / float64(n), sum[1] / float64(n)
}

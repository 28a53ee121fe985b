package queue_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// unhandled is a kind no handler of the test's worker has (recorded in
// group_kinds by hand, as a worker that had it once would have).
type unhandled struct {
	N int `json:"n"`
}

func (unhandled) Kind() string { return "unhandled" }

// keysOn returns n distinct keys of partition part of 8.
func keysOn(part, n int) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := fmt.Sprintf("k-%d", i); partition.OfString(k, 8) == part {
			keys = append(keys, k)
		}
	}
	return keys
}

// Batch items of a kind the owner has no handler for wait UnknownKindDelay
// like any job of such a kind: each is looked at once in a second (it was
// looked at thousands of times, its outcome silently not applied), and a
// handled job of the same partition runs promptly behind 60 of them. The
// control: every item was looked at (the count is of looks, not of items
// never fetched).
func TestBatchItemsOfAnUnhandledKindWaitAndDoNotStarveTheirPartition(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var mu sync.Mutex
	looks := map[int64]int{}
	ran := make(chan time.Time, 1)
	ws := batchWorkers(t, pool, nil)
	kindsFor(t, pool, "unhandled", "reprice", "batch_done")
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond, UnknownKindDelay: time.Minute,
		Hooks: queue.Hooks{OnJob: func(ev queue.JobEvent) {
			mu.Lock()
			defer mu.Unlock()
			if ev.Kind == "unhandled" {
				looks[ev.ID]++
			}
			if ev.Kind == "reprice" && ev.Outcome == queue.OutcomeCompleted {
				select {
				case ran <- time.Now():
				default:
				}
			}
		}}}, true)
	createBatch(t, c, "ghosts")
	var its []queue.Item
	for i, k := range keysOn(3, 60) {
		its = append(its, queue.Item{ID: fmt.Sprint(i), Key: k, Args: unhandled{N: i}})
	}
	_, err := c.AddItems(ctx, "emails", "ghosts", its...)
	pgtest.Must(t, err)
	// Wait until every item was looked at once.
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(looks)
		mu.Unlock()
		if n == 60 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("control: %d of 60 items looked at", n)
		}
	}
	sent := time.Now()
	_, err = c.Enqueue(ctx, queue.Job{Group: "emails", Key: keysOn(3, 61)[60], Args: reprice{User: 1}})
	pgtest.Must(t, err)
	var waited time.Duration
	select {
	case at := <-ran:
		waited = at.Sub(sent)
	case <-time.After(5 * time.Second):
		waited = 5 * time.Second
	}
	time.Sleep(time.Second) // more fetches of the partition
	mu.Lock()
	most, total := 0, 0
	for _, n := range looks {
		most, total = max(most, n), total+n
	}
	mu.Unlock()
	t.Logf("handled job ran after %v; items looked at %d times in all (at most %d each)", waited, total, most)
	if most > 1 {
		t.Errorf("an item of an unhandled kind was looked at %d times within UnknownKindDelay; want once", most)
	}
	if waited > 2*time.Second {
		t.Errorf("the handled job waited %v behind items of an unhandled kind; want it run promptly", waited)
	}
	var due int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE kind = 'unhandled' AND state = 'pending'
		AND run_at > clock_timestamp() + interval '30 seconds' AND errors->-1->>'error' LIKE 'no handler%'`).Scan(&due))
	if due != 60 {
		t.Errorf("%d of 60 items kept pending for UnknownKindDelay with the error recorded", due)
	}
}

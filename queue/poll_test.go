package queue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// With PollInterval an hour, a job scheduled before the member started
// runs when it comes due (the member polls after its grants and learns
// when), and a keyless job snoozed for a second runs again a second later
// (the member polls when the snooze it recorded comes due: notifications
// announce enqueues only): neither waits for the next PollInterval, nor
// runs before it is due.
func TestPollFindsJobsAsTheyComeDue(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	var mu sync.Mutex
	runs := map[string][]time.Time{}
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		mu.Lock()
		runs[w.Args.Name] = append(runs[w.Args.Name], time.Now())
		n := len(runs[w.Args.Name])
		mu.Unlock()
		if w.Args.Name == "snoozed" && n == 1 {
			return queue.Snooze(time.Second)
		}
		return nil
	})
	read := func(name string) []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), runs[name]...)
	}
	wait := func(name string, n int) {
		t.Helper()
		waitUntil(t, fmt.Sprintf("%d runs of %s (PollInterval 1h)", n, name), func() bool { return len(read(name)) >= n })
	}
	due := time.Now().Add(1500 * time.Millisecond)
	_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Args: step{"scheduled"}, RunAt: due})
	pgtest.Must(t, err)
	member(t, pool, 8, queue.ProcessorConfig{Workers: ws, PollInterval: time.Hour}, true)
	wait("scheduled", 1)
	if at := read("scheduled")[0]; at.Before(due) || at.After(due.Add(time.Second)) {
		t.Errorf("the scheduled job ran %v after it came due; want within [0, 1s)", at.Sub(due))
	}
	_, err = c.Enqueue(ctx, queue.Job{Group: "emails", Args: step{"snoozed"}})
	pgtest.Must(t, err)
	wait("snoozed", 2)
	if r := read("snoozed"); r[1].Sub(r[0]) < time.Second || r[1].Sub(r[0]) > 2*time.Second {
		t.Errorf("the snoozed job ran again %v after its snooze of 1s; want within [1s, 2s)", r[1].Sub(r[0]))
	}
}

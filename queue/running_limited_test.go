package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// rated is the args of jobs of a kind whose key starts once an hour.
type rated struct{}

func (rated) Kind() string { return "rated" }

// The publisher writes the keys held back by limits with the running jobs,
// in the running row of their partition: a key whose jobs wait behind its
// KeyConcurrency (1: one runs, three wait) and a key whose jobs wait for
// its KeyRate (1 per hour: one ran, one waits), with their waiting counts;
// Processor.Limited counts them by limit. A key not held back (its one job
// runs) is not listed. Once the held-back jobs have run, the row's list is
// written anew without them.
func TestRunningPublishesLimited(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	release := make(chan struct{})
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[hold]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return ctx.Err()
	}, queue.WithPolicy(queue.Policy{KeyConcurrency: 1})) // declared: a key's jobs waiting their turn count as held back
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[rated]) error { return nil },
		queue.WithPolicy(queue.Policy{KeyRate: queue.Rate{Starts: 1, Per: time.Hour}}))
	_, p := runningMember(t, pool, queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		PublishInterval: 20 * time.Millisecond}, false)
	keys := keysIn(2, 2, "lim")
	hot, cold, rate := keys[0], keys[1], keysIn(5, 1, "rate")[0]
	for n := range 4 {
		_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: hot, Args: hold{n}})
		pgtest.Must(t, err)
	}
	_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: cold, Args: hold{9}})
	pgtest.Must(t, err)
	for range 2 {
		_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: rate, Args: rated{}})
		pgtest.Must(t, err)
	}

	// read returns the keys the group's rows list, by partition and key.
	read := func() map[string]queue.LimitedKey {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT partition, coalesce(limited, '[]') FROM leasehold.running WHERE group_name = 'emails'`)
		pgtest.Must(t, err)
		defer rows.Close()
		out := map[string]queue.LimitedKey{}
		for rows.Next() {
			var part int
			var b []byte
			pgtest.Must(t, rows.Scan(&part, &b))
			var ks []queue.LimitedKey
			pgtest.Must(t, json.Unmarshal(b, &ks))
			for _, k := range ks {
				out[fmt.Sprintf("%d/%s", part, k.Key)] = k
			}
		}
		pgtest.Must(t, rows.Err())
		return out
	}
	want := map[string]queue.LimitedKey{
		"2/" + hot:  {Key: hot, Kind: "hold", Limit: queue.LimitKeyConcurrency, Waiting: 3},
		"5/" + rate: {Key: rate, Kind: "rated", Limit: queue.LimitKeyRate, Waiting: 1},
	}
	var got map[string]queue.LimitedKey
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if got = read(); reflect.DeepEqual(got, want) {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("published limited keys %v; want %v (and not %q, whose one job runs)", got, want, cold)
		}
	}
	running, err := c.Running(ctx, "emails")
	pgtest.Must(t, err)
	if len(running) != 2 {
		t.Errorf("running %+v; want the first job of %q and the job of %q", running, hot, cold)
	}
	wantHeld := map[queue.Limit]int64{queue.LimitKeyConcurrency: 3, queue.LimitKeyRate: 1, queue.LimitGroupConcurrency: 0}
	if held := p.Limited(); !reflect.DeepEqual(held, wantHeld) {
		t.Errorf("Processor.Limited() = %v; want %v", held, wantHeld)
	}

	close(release)
	want = map[string]queue.LimitedKey{"5/" + rate: want["5/"+rate]}
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if got = read(); reflect.DeepEqual(got, want) {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("once %q's jobs ran: published limited keys %v; want %v", hot, got, want)
		}
	}
}

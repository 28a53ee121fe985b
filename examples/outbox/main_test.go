package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/queue"
)

func TestMain(m *testing.M) { os.Exit(leaseholdtest.Run(m)) }

// Every order is a row once and an event in Kafka once, read with
// read_committed, with the row's values: the event of the failed first
// attempt of order 2 was never published.
func TestOutbox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.DB(t)
	cluster, err := kfake.NewCluster(kfake.SeedTopics(4, topic))
	pgtest.Must(t, err)
	defer cluster.Close()
	const n = 40
	var out bytes.Buffer
	if err := run(ctx, db, &out, cluster.ListenAddrs(), n); err != nil {
		t.Fatal(err)
	}
	want := ""
	for i := 1; i <= n; i++ {
		want += fmt.Sprintf("order %d placed: %d x %s\n", i, (i-1)%3+1, []string{"tea", "coffee", "cocoa"}[(i-1)%3])
	}
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}

	// Read the topic again, as a new consumer would, for a while after the
	// last event: a duplicate published late would show.
	events := readAll(ctx, t, cluster.ListenAddrs(), n, 2*time.Second)
	seen := map[int64]int{}
	for _, e := range events {
		seen[e.order.ID]++
		var item string
		var quantity int
		pgtest.Must(t, db.Pool().QueryRow(ctx, `SELECT item, quantity FROM orders WHERE id = $1`, e.order.ID).Scan(&item, &quantity))
		if e.key != strconv.FormatInt(e.order.ID, 10) || e.order.Item != item || e.order.Quantity != quantity {
			t.Errorf("event %+v (key %q); the row has %q, %d", e.order, e.key, item, quantity)
		}
	}
	for id := int64(1); id <= n; id++ {
		if seen[id] != 1 {
			t.Errorf("order %d: published %d times; want once", id, seen[id])
		}
	}
	if len(events) != n {
		t.Errorf("%d events in the topic; want %d", len(events), n)
	}
	var rows int
	pgtest.Must(t, db.Pool().QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&rows))
	if rows != n {
		t.Errorf("%d orders in the table; want %d", rows, n)
	}
	// Order 2's first attempt failed after appending its event.
	j := leaseholdtest.RequireEnqueued[Order](ctx, t, db, &leaseholdtest.RequireOpts{Group: "orders", Key: "2", State: queue.StateCompleted})
	if j.Attempt != 2 {
		t.Errorf("order 2 ran %d times; want 2 (a failed attempt, then the one that committed)", j.Attempt)
	}
}

// event is an event read from the topic.
type event struct {
	key   string
	order Order
}

// readAll reads the topic with read_committed until it has n events and
// for settle after that.
func readAll(ctx context.Context, t *testing.T, brokers []string, n int, settle time.Duration) []event {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond))
	pgtest.Must(t, err)
	defer cl.Close()
	var events []event
	var until time.Time
	for until.IsZero() || time.Now().Before(until) {
		if until.IsZero() && len(events) >= n {
			until = time.Now().Add(settle)
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("read %d events of %d: %v", len(events), n, ctx.Err())
		}
		for r := range fs.RecordsAll() {
			var o Order
			pgtest.Must(t, json.Unmarshal(r.Value, &o))
			events = append(events, event{string(r.Key), o})
		}
	}
	return events
}

package kafka_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/outbox"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// Two databases (same schema and group names) served by one process: a
// commit still wakes its own database's relay after the other's relay
// registered. (With one waiter per schema, group and partition, the second
// worker's relay replaced the first's, and tenant 1's record waited for
// its next grant. Wake-ups are now keyed by database too, and a slot wakes
// every relay registered in it; this test catches the loss of both.)
func TestRelayWakeUpsStayInTheirDatabase(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 1, "out")
	ctx := pgtest.ContextFor(t, time.Minute)
	tenant := func() *queue.Client {
		pool := pgtest.Pool(t)
		db := pgtest.Open(t, pool, leasehold.Config{Logger: quiet()})
		ws := queue.NewWorkers()
		queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[Emitted]) error {
			return outbox.Add(ctx, tx, outbox.Record{Topic: "out", Value: []byte(strconv.Itoa(w.Args.N))})
		})
		r, err := kafka.NewRelay(db, kafka.RelayConfig{Brokers: brokers})
		pgtest.Must(t, err)
		w, err := worker.New(db, worker.Config{Group: "q", Partitions: 1, Workers: ws, Relay: r})
		pgtest.Must(t, err)
		pgtest.Must(t, w.Start(ctx))
		t.Cleanup(func() { w.Stop(context.Background()) })
		c, err := queue.New(db, queue.Config{})
		pgtest.Must(t, err)
		return c
	}
	c1 := tenant()
	time.Sleep(300 * time.Millisecond) // tenant 1's relay registered
	tenant()                           // same schema and group, another database
	time.Sleep(300 * time.Millisecond)
	_, err := c1.Enqueue(ctx, queue.Job{Group: "q", Args: Emitted{N: 1}})
	pgtest.Must(t, err)
	if out := readOutput(t, brokers, "out", 1, 5*time.Second, 200*time.Millisecond); len(out) != 1 {
		t.Fatalf("tenant 1's record: %d published within 5s, want 1", len(out))
	}
}

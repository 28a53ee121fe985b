// Outbox publishes events to Kafka exactly once, together with the rows
// they describe. A job's handler inserts an order and, in the same fenced
// transaction, appends an "order placed" event to the outbox (outbox.Add):
// the row, the event, the job's completion and the fence check commit
// together or not at all. Each worker's relay (kafka.Relay) publishes the
// events of the partitions it owns through a Kafka transaction that also
// stores how far it got, so a consumer reading with read_committed sees
// each event once: here, one order's first attempt fails after appending
// its event, and only the retry's event is published.
//
//	go run ./examples/outbox
//
// Kafka is in-process (kfake), so the example needs no broker: against a
// real cluster, set kafka.RelayConfig.Brokers (or $KAFKA_BROKERS).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples/internal/exampledb"
	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/outbox"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

func main() {
	exampledb.Main(func(ctx context.Context, db *leasehold.DB, out io.Writer) error {
		cluster, err := kfake.NewCluster(kfake.SeedTopics(4, topic))
		if err != nil {
			return err
		}
		defer cluster.Close()
		return run(ctx, db, out, cluster.ListenAddrs(), 5)
	})
}

// topic is where the events go.
const topic = "orders"

// Order is a job: record an order and publish its event.
type Order struct {
	ID       int64  `json:"id"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// Kind implements queue.Args.
func (Order) Kind() string { return "place_order" }

// placeOrder is the handler: it runs in the job's fenced transaction.
func placeOrder(ctx context.Context, tx pgx.Tx, w *queue.Work[Order]) error {
	o := w.Args
	if _, err := tx.Exec(ctx, `INSERT INTO orders (id, item, quantity) VALUES ($1, $2, $3)`, o.ID, o.Item, o.Quantity); err != nil {
		return err
	}
	event, err := json.Marshal(o)
	if err != nil {
		return err
	}
	err = outbox.Add(ctx, tx, outbox.Record{Topic: topic, Key: []byte(strconv.FormatInt(o.ID, 10)), Value: event})
	if err != nil {
		return err
	}
	if o.ID == 2 && w.Attempt == 1 {
		// A failure after the event was appended: the row and the event
		// roll back with the attempt, and the retry writes both again.
		return errors.New("payment service unavailable")
	}
	return nil
}

func run(ctx context.Context, db *leasehold.DB, out io.Writer, brokers []string, n int) error {
	if _, err := db.Pool().Exec(ctx, `DROP TABLE IF EXISTS orders;
		CREATE TABLE orders (id bigint PRIMARY KEY, item text NOT NULL, quantity int NOT NULL)`); err != nil {
		return err
	}
	// Two workers share the group's partitions; each runs a relay of its
	// own, which publishes the outbox of the partitions its worker owns.
	ws := queue.NewWorkers()
	queue.HandleTx(ws, placeOrder)
	for i := range 2 {
		relay, err := kafka.NewRelay(db, kafka.RelayConfig{Brokers: brokers})
		if err != nil {
			return err
		}
		w, err := worker.New(db, worker.Config{Group: "orders", ID: "worker-" + strconv.Itoa(i), Partitions: 8,
			Workers: ws, Relay: relay})
		if err != nil {
			return err
		}
		if err := w.Start(ctx); err != nil {
			return err
		}
		defer w.Stop(context.WithoutCancel(ctx))
	}

	client, err := queue.New(db, queue.Config{})
	if err != nil {
		return err
	}
	items := []string{"tea", "coffee", "cocoa"}
	for i := range n {
		o := Order{ID: int64(i + 1), Item: items[i%len(items)], Quantity: i%3 + 1}
		if _, err := client.Enqueue(ctx, queue.Job{Group: "orders", Key: strconv.FormatInt(o.ID, 10), Args: o}); err != nil {
			return err
		}
	}

	events, err := consume(ctx, brokers, n)
	if err != nil {
		return err
	}
	slices.SortFunc(events, func(a, b Order) int { return int(a.ID - b.ID) })
	for _, o := range events {
		fmt.Fprintf(out, "order %d placed: %d x %s\n", o.ID, o.Quantity, o.Item)
	}
	return nil
}

// consume reads the topic as a downstream consumer would, with
// read_committed (records of aborted or open Kafka transactions are never
// seen), until it has read n events.
func consume(ctx context.Context, brokers []string, n int) ([]Order, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var events []Order
	for len(events) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, fe := range fs.Errors() {
			return nil, fmt.Errorf("consume %s: %w", fe.Topic, fe.Err)
		}
		for r := range fs.RecordsAll() {
			var o Order
			if err := json.Unmarshal(r.Value, &o); err != nil {
				return nil, err
			}
			events = append(events, o)
		}
	}
	return events, nil
}

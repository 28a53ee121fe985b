package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/worker"
)

// A worker consuming the topic "payments" into a ledger table, exactly
// once: the rows of a batch, the stored offset's advance and the fence check
// commit together. The Consumer is run by a worker, whose Group is the
// consumer group; it brings metrics, /healthz and /readyz, and a graceful
// stop on SIGTERM. Run as many workers as you like; each Kafka partition has
// one owner at a time.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	db, err := leasehold.Open(pool, leasehold.Config{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := kafka.New(db, kafka.Config{
		Topics:             []string{"payments"},
		Brokers:            []string{"localhost:9092"}, // or $KAFKA_BROKERS
		PartitionsPerTopic: 32,                         // upper bound: partitions added up to 32 are picked up
		Handler: func(ctx context.Context, tx pgx.Tx, b *kafka.Batch) error {
			for _, r := range b.Records {
				if _, err := tx.Exec(ctx, `INSERT INTO ledger (partition, "offset", payload) VALUES ($1, $2, $3)`,
					b.Partition, r.Offset, r.Value); err != nil {
					return err // rolls back; the batch is handled again after a backoff
				}
			}
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	w, err := worker.New(db, worker.Config{Group: "payments-ledger", Kafka: c, MetricsAddr: ":9090"})
	if err != nil {
		log.Fatal(err)
	}
	// Until SIGTERM, then a graceful stop: batches in flight commit, the
	// partitions are released and the other workers take over at once.
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// A stored offset outside the log is reported, never silently reset.
func ExampleOffsetError() {
	var err error = &kafka.OffsetError{Group: "g", Topic: "payments", Partition: 3, Stored: 120, LogStart: 500, LogEnd: 900}
	fmt.Println(err)
	fmt.Println(errors.Is(err, kafka.ErrOffsetOutOfRange), errors.Is(err, fence.ErrFenced))
	// Output:
	// kafka: group "g": payments/3: stored offset 120 is outside the log [500, 900]
	// true false
}

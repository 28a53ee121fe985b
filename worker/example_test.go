package worker_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// Deposit is a job's arguments.
type Deposit struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

// Kind names the job's handler.
func (Deposit) Kind() string { return "deposit" }

// A worker process: a transactional handler whose effect commits with the
// job's completion and the partition's fence check, metrics on :9090, and a
// graceful stop on SIGTERM (a second SIGTERM stops at once).
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	db, err := leasehold.Open(pool, leasehold.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[Deposit]) error {
		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + $1 WHERE id = $2`, w.Args.Amount, w.Args.Account)
		return err
	})
	w, err := worker.New(db, worker.Config{
		Group:       "payments",
		Partitions:  64,
		Workers:     ws,
		JobTimeout:  30 * time.Second,
		MetricsAddr: ":9090",
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

package worker_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
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

// openDB stands for opening your own database: a *pgxpool.Pool, then
// leasehold.Open and DB.Migrate. Here it is a throwaway test database.
func openDB() *leasehold.DB {
	db, err := pgtest.ExampleDB()
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// A transactional handler's effect commits in the job's transaction,
// together with the partition's fence check and the job's completion: it
// is applied once, and never by a worker whose partition has moved on.
func ExampleWorker_Start() {
	ctx := context.Background()
	db := openDB()
	if _, err := db.Pool().Exec(ctx, `CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	ws := queue.NewWorkers()
	applied := make(chan struct{})
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[Deposit]) error {
		_, err := tx.Exec(ctx, `INSERT INTO accounts VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET balance = accounts.balance + EXCLUDED.balance`, w.Args.Account, w.Args.Amount)
		applied <- struct{}{}
		return err
	})
	w, err := worker.New(db, worker.Config{Group: "payments", Partitions: 4, Workers: ws})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer w.Stop(ctx) // graceful: running jobs finish, partitions are released at once
	fmt.Println("ready:", w.Ready(ctx) == nil)

	c, err := queue.New(db, queue.Config{})
	if err != nil {
		log.Fatal(err)
	}
	for _, amount := range []int64{10, 20, 30} {
		job := queue.Job{Group: "payments", Key: "acct-1", Args: Deposit{Account: "acct-1", Amount: amount}}
		if _, err := c.Enqueue(ctx, job); err != nil {
			log.Fatal(err)
		}
	}
	for range 3 {
		<-applied
	}
	// The outcome commits with the effect: wait until the last one is recorded.
	for {
		var balance int64
		var pending int
		err := db.Pool().QueryRow(ctx, `SELECT (SELECT balance FROM accounts WHERE id = 'acct-1'),
			(SELECT count(*) FROM leasehold.jobs WHERE state = 'pending')`).Scan(&balance, &pending)
		if err != nil {
			log.Fatal(err)
		}
		if pending == 0 {
			fmt.Println("balance:", balance)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Output:
	// ready: true
	// balance: 60
}

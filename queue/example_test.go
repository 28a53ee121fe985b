package queue_test

import (
	"context"
	"fmt"
	"log"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// openDB stands for opening your own database: a *pgxpool.Pool, then
// leasehold.Open and DB.Migrate. Here it is a throwaway test database.
func openDB() *leasehold.DB {
	db, err := pgtest.ExampleDB()
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// Welcome is a job's arguments: JSON, with a kind naming its handler.
type Welcome struct {
	To string `json:"to"`
}

// Kind implements queue.Args.
func (Welcome) Kind() string { return "welcome" }

// Jobs of one key run one at a time, in the order they were enqueued, on
// whichever worker owns the key's partition. A unique key makes enqueuing
// the same job again, while it is pending, a no-op.
func Example() {
	ctx := context.Background()
	db := openDB()

	ws := queue.NewWorkers()
	done := make(chan struct{})
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[Welcome]) error {
		fmt.Println("welcome", w.Args.To)
		done <- struct{}{}
		return nil
	})
	w, err := worker.New(db, worker.Config{Group: "emails", Partitions: 4, Workers: ws})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil { // creates the group, claims its partitions
		log.Fatal(err)
	}
	defer w.Stop(ctx)

	c, err := queue.New(db, queue.Config{})
	if err != nil {
		log.Fatal(err)
	}
	for _, to := range []string{"ada", "grace", "barbara"} {
		job := queue.Job{Group: "emails", Key: "customer-42", UniqueKey: "welcome/" + to, Args: Welcome{To: to}}
		if _, err := c.Enqueue(ctx, job); err != nil {
			log.Fatal(err)
		}
	}
	for range 3 {
		<-done
	}
	// Output:
	// welcome ada
	// welcome grace
	// welcome barbara
}

// JobInfo reads a job back: its state, attempts, arguments and errors.
func ExampleClient_JobInfo() {
	ctx := context.Background()
	db := openDB()
	w, err := worker.New(db, worker.Config{Group: "reports", Partitions: 1, Workers: queue.NewWorkers()})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	w.Stop(ctx) // the group exists now; no handler runs the job below

	c, err := queue.New(db, queue.Config{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Enqueue(ctx, queue.Job{Group: "reports", Key: "2026-12", Args: Welcome{To: "finance"}})
	if err != nil {
		log.Fatal(err)
	}
	info, err := c.JobInfo(ctx, res.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s %s attempts=%d args=%s\n", info.Kind, info.Key, info.State, info.Attempt, info.Args)
	// Output: welcome 2026-12 pending attempts=0 args={"to": "finance"}
}

// A producer deployed before the workers creates their group first, with
// their partition count: queue.DefaultPartitions for workers that leave
// worker.Config.Partitions zero. The workers, when they start, find the
// group as they would have created it, and run the jobs enqueued meanwhile.
func ExampleClient_EnsureGroup() {
	ctx := context.Background()
	db := openDB()

	// The producer, at its start.
	c, err := queue.New(db, queue.Config{})
	if err != nil {
		log.Fatal(err)
	}
	created, err := c.EnsureGroup(ctx, "invoices", queue.DefaultPartitions)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created:", created)
	if _, err := c.Enqueue(ctx, queue.Job{Group: "invoices", Args: Welcome{To: "billing"}}); err != nil {
		log.Fatal(err)
	}

	// A worker, later, with the default partition count: another count
	// would be refused (*partition.CountError).
	ws := queue.NewWorkers()
	done := make(chan struct{})
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[Welcome]) error {
		fmt.Println("welcome", w.Args.To)
		close(done)
		return nil
	})
	w, err := worker.New(db, worker.Config{Group: "invoices", Workers: ws})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer w.Stop(ctx)
	<-done
	// Output:
	// created: true
	// welcome billing
}

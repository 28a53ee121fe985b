// Hello is the smallest leasehold program: a worker that greets.
//
//	go run ./examples/hello
package main

import (
	"context"
	"fmt"
	"io"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples/internal/exampledb"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

func main() { exampledb.Main(run) }

// Greeting is a job: its Kind names its handler.
type Greeting struct {
	Name string `json:"name"`
}

// Kind implements queue.Args.
func (Greeting) Kind() string { return "greeting" }

// greet is the handler: it writes the greeting to out, then signals
// greeted.
func greet(out io.Writer, greeted chan<- struct{}) func(ctx context.Context, w *queue.Work[Greeting]) error {
	return func(ctx context.Context, w *queue.Work[Greeting]) error {
		fmt.Fprintf(out, "hello, %s\n", w.Args.Name)
		greeted <- struct{}{}
		return nil
	}
}

func run(ctx context.Context, db *leasehold.DB, out io.Writer) error {
	names := []string{"Ada", "Grace", "Barbara"}
	greeted := make(chan struct{}, len(names))
	ws := queue.NewWorkers()
	queue.Handle(ws, greet(out, greeted))
	w, err := worker.New(db, worker.Config{Group: "hello", Workers: ws})
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	defer w.Stop(context.WithoutCancel(ctx)) // graceful: finishes jobs, releases partitions

	client, err := queue.New(db, queue.Config{})
	if err != nil {
		return err
	}
	for _, name := range names { // one key: the greetings run in this order
		if _, err := client.Enqueue(ctx, queue.Job{Group: "hello", Key: "greetings", Args: Greeting{name}}); err != nil {
			return err
		}
	}
	for range names {
		select {
		case <-greeted:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

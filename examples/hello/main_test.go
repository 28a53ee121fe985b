package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/queue"
)

func TestMain(m *testing.M) { os.Exit(leaseholdtest.Run(m)) }

func TestHello(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	var out bytes.Buffer
	if err := run(ctx, db, &out); err != nil {
		t.Fatal(err)
	}
	const want = "hello, Ada\nhello, Grace\nhello, Barbara\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	// The three greetings were enqueued on one key, in this order, and
	// each completed once.
	var last int64
	for _, name := range []string{"Ada", "Grace", "Barbara"} {
		j := leaseholdtest.RequireEnqueued[Greeting](ctx, t, db, &leaseholdtest.RequireOpts{
			Group: "hello", Key: "greetings", Args: Greeting{name}, State: queue.StateCompleted})
		if j.ID <= last || j.Attempt != 1 {
			t.Fatalf("%s's job %d (attempt %d) after job %d; want enqueued in order, run once", name, j.ID, j.Attempt, last)
		}
		last = j.ID
	}
	leaseholdtest.RequireNotEnqueued[Greeting](ctx, t, db, nil) // nothing left pending
}

// The handler alone, run inline on one job.
func TestGreetInline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	leaseholdtest.Group(ctx, t, db, "hello", 1)
	var out bytes.Buffer
	greeted := make(chan struct{}, 1)
	ws := queue.NewWorkers()
	queue.Handle(ws, greet(&out, greeted))
	w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws})
	res, err := w.Work(ctx, t, queue.Job{Group: "hello", Key: "greetings", Args: Greeting{"Linus"}})
	if err != nil || res.Outcome != queue.OutcomeCompleted || res.Job.State != queue.StateCompleted {
		t.Fatalf("run: %+v, %v; want completed", res, err)
	}
	if out.String() != "hello, Linus\n" || len(greeted) != 1 {
		t.Fatalf("output %q, %d signals; want one greeting", out.String(), len(greeted))
	}
}

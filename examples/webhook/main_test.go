package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/queue"
)

func TestMain(m *testing.M) { os.Exit(leaseholdtest.Run(m)) }

// Every event is applied once; every third event's first delivery lost its
// answer, so it was delivered again and recognised.
func TestWebhook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	db := pgtest.DB(t) // run counts the pending jobs of the default schema
	if err := run(ctx, db, &out, 30); err != nil {
		t.Fatal(err)
	}
	const want = "30 events applied once each; 40 deliveries, 10 repeated deliveries recognised by their idempotency key\n"
	if out.String() != want {
		t.Fatalf("output %q\nwant %q", out.String(), want)
	}
	// The third event's job took two attempts, and recorded the lost answer.
	j := leaseholdtest.RequireEnqueued[Webhook](ctx, t, db, &leaseholdtest.RequireOpts{Key: "event-3", State: queue.StateCompleted})
	if j.Attempt != 2 || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "502") {
		t.Fatalf("event-3's job: attempt %d, errors %v; want 2 attempts, the 502 recorded", j.Attempt, j.Errors)
	}
	leaseholdtest.RequireNotEnqueued[Webhook](ctx, t, db, nil)
}

// The handler alone, run inline: a delivery whose answer is lost is a
// failed attempt, retried with the same idempotency key, which the
// receiver recognises; a malformed URL cancels the job.
func TestSendInline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	leaseholdtest.Group(ctx, t, db, "webhooks", 4)
	recv := &receiver{applied: make(map[string]string)}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	ws := queue.NewWorkers()
	queue.Handle(ws, send(srv.Client()))
	w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws})

	res, err := w.Work(ctx, t, queue.Job{Group: "webhooks", Key: "event-3", Args: Webhook{URL: srv.URL, Event: "event-3"}})
	if err == nil || res.Outcome != queue.OutcomeRetried || res.Job.State != queue.StatePending || res.Job.Attempt != 1 {
		t.Fatalf("the first delivery: %+v, %v; want a failed attempt, retried", res, err)
	}
	res, err = w.WorkJob(ctx, t, res.Job.ID)
	if err != nil || res.Outcome != queue.OutcomeCompleted || res.Job.Attempt != 2 {
		t.Fatalf("the second delivery: %+v, %v; want completed", res, err)
	}
	key := "leasehold-job-" + strconv.FormatInt(res.Job.ID, 10)
	recv.mu.Lock()
	if recv.deliveries != 2 || recv.duplicates != 1 || len(recv.applied) != 1 || recv.applied[key] != "event-3" {
		t.Errorf("receiver: %d deliveries, %d duplicates, applied %v; want the event applied once under %s", recv.deliveries, recv.duplicates, recv.applied, key)
	}
	recv.mu.Unlock()

	res, _ = w.Work(ctx, t, queue.Job{Group: "webhooks", Args: Webhook{URL: "http://[::1", Event: "event-1"}})
	if res.Outcome != queue.OutcomeCancelled || res.Job.State != queue.StateCancelled {
		t.Fatalf("a malformed URL: %+v; want cancelled", res)
	}
}

// Webhook sends webhooks from background jobs. The receiving service cannot
// check a fencing token, so each delivery carries an idempotency key that
// stays the same across retries and across partition owners: the receiver
// applies each event once even when a delivery is repeated (here, a
// receiver that applies an event and then fails to answer, as happens when
// a response is lost).
//
//	go run ./examples/webhook
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples/internal/exampledb"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

func main() {
	exampledb.Main(func(ctx context.Context, db *leasehold.DB, out io.Writer) error {
		return run(ctx, db, out, 30)
	})
}

// Webhook is a job: deliver Event to URL.
type Webhook struct {
	URL   string `json:"url"`
	Event string `json:"event"`
}

// Kind implements queue.Args.
func (Webhook) Kind() string { return "webhook" }

// send is the handler. The idempotency key is derived from the job's id,
// which every attempt and every owner of the job shares. The partition's
// fencing token travels too, for receivers that can check it (see
// fence.HighWater).
func send(client *http.Client) func(ctx context.Context, w *queue.Work[Webhook]) error {
	return func(ctx context.Context, w *queue.Work[Webhook]) error {
		body, _ := json.Marshal(map[string]string{"event": w.Args.Event})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.Args.URL, bytes.NewReader(body))
		if err != nil {
			return queue.Cancel(err) // a malformed URL will not get better
		}
		req.Header.Set("Idempotency-Key", "leasehold-job-"+strconv.FormatInt(w.ID, 10))
		fence.SetHeader(req.Header, w.Token)
		resp, err := client.Do(req)
		if err != nil {
			return err // retried with backoff, with the same idempotency key
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode >= 300 {
			return fmt.Errorf("webhook %s: %s", w.Args.URL, resp.Status)
		}
		return nil
	}
}

// receiver is the other side: it applies each event once per idempotency
// key, and fails to answer the first delivery of every third event after
// applying it.
type receiver struct {
	mu         sync.Mutex
	applied    map[string]string // idempotency key -> event
	deliveries int
	duplicates int
}

func (r *receiver) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	var body struct{ Event string }
	key := req.Header.Get("Idempotency-Key")
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil || key == "" {
		http.Error(rw, "bad request", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries++
	if _, ok := r.applied[key]; ok {
		r.duplicates++ // already applied: acknowledge, do nothing
		return
	}
	r.applied[key] = body.Event
	if n, _ := strconv.Atoi(body.Event[len("event-"):]); n%3 == 0 { // its first delivery: applied, then the answer is lost
		http.Error(rw, "applied, but the answer is lost", http.StatusBadGateway)
	}
}

func run(ctx context.Context, db *leasehold.DB, out io.Writer, events int) error {
	pool := db.Pool()
	recv := &receiver{applied: make(map[string]string)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: recv, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	ws := queue.NewWorkers()
	queue.Handle(ws, send(&http.Client{Timeout: 10 * time.Second}))
	cfg := worker.Config{Group: "webhooks", Workers: ws, PartitionConcurrency: 4}
	cfg.Queue.MinRetry, cfg.Queue.MaxRetry = 50*time.Millisecond, 200*time.Millisecond
	w, err := worker.New(db, cfg)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	defer w.Stop(context.WithoutCancel(ctx))

	client, err := queue.New(db, queue.Config{})
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String() + "/hooks"
	jobs := make([]queue.Job, events)
	for i := range jobs {
		event := fmt.Sprintf("event-%d", i)
		jobs[i] = queue.Job{Group: "webhooks", Key: event, Args: Webhook{URL: url, Event: event}}
	}
	if _, err := client.EnqueueMany(ctx, jobs...); err != nil {
		return err
	}
	for {
		var pending int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE group_name = 'webhooks' AND state = 'pending'`).Scan(&pending); err != nil {
			return err
		}
		if pending == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	fmt.Fprintf(out, "%d events applied once each; %d deliveries, %d repeated deliveries recognised by their idempotency key\n",
		len(recv.applied), recv.deliveries, recv.duplicates)
	return nil
}

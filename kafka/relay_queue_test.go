package kafka_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/outbox"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// Emitted is a queue job whose transactional handler appends one outbox
// record: its key, its sequence number among its key's jobs.
type Emitted struct {
	N int `json:"n"`
}

func (Emitted) Kind() string { return "emitted" }

// Queue jobs appending to the outbox (HandleTx) on two workers, one of
// which leaves gracefully mid-run: each job's record is published once,
// in enqueue order per key.
func TestRelayPublishesQueueJobsOutputOnce(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 4, "out")
	pool := pgtest.Pool(t)
	ctx := pgtest.ContextFor(t, 2*time.Minute)
	startWorker := func(id string) *worker.Worker {
		db := pgtest.Open(t, pool, leasehold.Config{Logger: testLogger(t)})
		ws := queue.NewWorkers()
		queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[Emitted]) error {
			return outbox.Add(ctx, tx, outbox.Record{Topic: "out", Key: []byte(w.Key), Value: []byte(strconv.Itoa(w.Args.N))})
		})
		r, err := kafka.NewRelay(db, kafka.RelayConfig{Brokers: brokers, RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond})
		pgtest.Must(t, err)
		w, err := worker.New(db, worker.Config{Group: "q", Partitions: 8, ID: id, Workers: ws, Relay: r,
			Lease: lease.Config{TTL: 2 * time.Second}})
		pgtest.Must(t, err)
		pgtest.Must(t, w.Start(ctx))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			w.Stop(ctx)
		})
		return w
	}
	a := startWorker("a")
	startWorker("b")
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	const keys, perKey = 20, 30
	enqueue := func(from, to int) {
		for n := from; n < to; n++ {
			for k := range keys {
				_, err := c.Enqueue(ctx, queue.Job{Group: "q", Key: fmt.Sprintf("k%d", k), Args: Emitted{N: n}})
				pgtest.Must(t, err)
			}
		}
	}
	enqueue(0, perKey/2)
	time.Sleep(300 * time.Millisecond)
	stopCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	pgtest.Must(t, a.Stop(stopCtx))
	cancel()
	enqueue(perKey/2, perKey)
	out := readOutput(t, brokers, "out", keys*perKey, 60*time.Second, time.Second)
	next := map[string]int{}
	for _, o := range out {
		n, err := strconv.Atoi(o.value)
		pgtest.Must(t, err)
		if n != next[o.key] {
			t.Fatalf("key %s: record %d published after %d (want each once, in order)", o.key, n, next[o.key]-1)
		}
		next[o.key]++
	}
	for k := range keys {
		if got := next[fmt.Sprintf("k%d", k)]; got != perKey {
			t.Fatalf("key k%d: %d of %d records published", k, got, perKey)
		}
	}
	if len(out) != keys*perKey {
		t.Fatalf("%d records published, want %d", len(out), keys*perKey)
	}
	eventuallyEmpty(t, pool)
}

// With Kafka unreachable, a queue worker with a relay still starts and runs
// its jobs; their records wait in the outbox, and the relay reports the
// failure (Stats, per partition) instead of dropping anything.
func TestRelayWithKafkaDownKeepsTheRecords(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := pgtest.ContextFor(t, time.Minute)
	db := pgtest.Open(t, pool, leasehold.Config{Logger: quiet()})
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[Emitted]) error {
		return outbox.Add(ctx, tx, outbox.Record{Topic: "out", Value: []byte(strconv.Itoa(w.Args.N))})
	})
	r, err := kafka.NewRelay(db, kafka.RelayConfig{Brokers: []string{"127.0.0.1:1"}, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
		ClientOptions: []kgo.Opt{kgo.RetryTimeout(200 * time.Millisecond), kgo.RequestRetries(1)}})
	pgtest.Must(t, err)
	w, err := worker.New(db, worker.Config{Group: "q", Partitions: 2, Workers: ws, Relay: r})
	pgtest.Must(t, err)
	pgtest.Must(t, w.Start(ctx))
	defer w.Stop(ctx)
	c, err := queue.New(db, queue.Config{})
	pgtest.Must(t, err)
	for n := range 10 {
		_, err := c.Enqueue(ctx, queue.Job{Group: "q", Args: Emitted{N: n}})
		pgtest.Must(t, err)
	}
	eventually(t, 20*time.Second, "the jobs completed and the relay reported the failure", func() bool {
		var done int
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE state = 'completed'`).Scan(&done))
		failing := false
		for _, p := range r.Stats().Partitions {
			failing = failing || p.Err != ""
		}
		return done == 10 && failing && r.Stats().Failed > 0
	})
	var recs int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.outbox_records`).Scan(&recs))
	if recs != 10 {
		t.Fatalf("%d records in the outbox, want the 10 the jobs appended, kept", recs)
	}
}

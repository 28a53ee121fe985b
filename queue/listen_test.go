package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// Listen survives a database restart: it reconnects, and an idle partition
// whose poll interval is an hour (its lease outlives the restart) runs a
// job enqueued afterwards.
func TestListenReconnectsAfterADatabaseRestart(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	cl := pgtest.Cluster(t)
	pool := pgtest.PoolURL(t, cl.URL("postgres"))
	pgtest.Must(t, pgtest.DBOn(t, pool).Migrate(ctx))
	ran := make(chan struct{}, 1)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[step]) error {
		ran <- struct{}{}
		return nil
	})
	p, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws, PollInterval: time.Hour})
	pgtest.Must(t, err)
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "emails", Partitions: 1, Run: p.Run,
		Lease: lease.Config{TTL: 20 * time.Second}})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(ctx))
	t.Cleanup(func() { m.Stop(context.Background()) })
	lctx, stopListen := context.WithCancel(ctx)
	defer stopListen()
	go p.Listen(lctx)
	waitOwned(t, m, 1)
	waitFetched(t, p, 1)

	pgtest.Must(t, cl.Restart(ctx))
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if _, err = c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: step{"after"}}); err == nil {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("enqueue after the restart: %v", err)
		}
	}
	select {
	case <-ran:
	case <-time.After(15 * time.Second):
		t.Fatal("the job enqueued after the restart did not run: Listen did not reconnect")
	}
	if len(m.Owned()) != 1 {
		t.Fatalf("the partition's lease did not outlive the restart; the test cannot tell")
	}
}

package chaos

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/outboxtx"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/outbox"
)

// The control relay reads the outbox with the relay's own statement, so a
// change of that statement's columns must not silently leave the control
// publishing nothing (which made CI's control "find no duplicates" for
// the wrong reason): it publishes a committed segment and deletes it.
func TestControlRelayPublishesWithTheRelaysStatements(t *testing.T) {
	t.Parallel()
	ctx := pgtest.ContextFor(t, time.Minute)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "out"))
	pgtest.Must(t, err)
	defer c.Close()
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	st, err := store.For(db.Schema())
	pgtest.Must(t, err)
	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	box := outboxtx.New("test", st, "g", 0, 1, tx)
	bctx := outboxtx.With(ctx, box)
	pgtest.Must(t, outbox.Add(bctx, tx, outbox.Record{Topic: "out", Value: []byte("v1")}, outbox.Record{Topic: "out", Value: []byte("v2")}))
	pgtest.Must(t, box.Seal(bctx, tx))
	pgtest.Must(t, tx.Commit(ctx))

	rec, err := NewRecorder(filepath.Join(t.TempDir(), "history"), "w")
	pgtest.Must(t, err)
	cr, err := newControlRelay(pool, WorkerEnv{Env: Env{Schema: db.Schema(), Group: "g", Partitions: 1, Brokers: c.ListenAddrs()},
		Recorder: rec, Stall: func() (bool, time.Duration) { return false, 0 }})
	pgtest.Must(t, err)
	defer cr.close()
	sent, err := cr.publish(ctx, 0)
	if err != nil || !sent {
		t.Fatalf("publish = %v, %v; want a segment sent", sent, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("out"), kgo.FetchMaxWait(50*time.Millisecond))
	pgtest.Must(t, err)
	defer cl.Close()
	var got []string
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		cancel()
	}
	if len(got) != 2 || got[0] != "v1" || got[1] != "v2" {
		t.Fatalf("published %v, want [v1 v2]", got)
	}
	var left int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.outbox_segments`).Scan(&left))
	if left != 0 {
		t.Fatalf("%d segments left after the control's delete", left)
	}
}

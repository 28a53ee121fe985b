package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// A batch of job completions commits on its own; cancelled while it waits
// for the synchronous standby (here by pg_cancel_backend), it has
// committed locally and the server answers success with a warning.
// The completer must take it for an unknown outcome (and try again), not
// for recorded. Negative control: on a pool without leasehold's notice
// hook, the same completion reports success.
func TestCompletionNotConfirmedBySyncStandbyIsIndeterminate(t *testing.T) {
	t.Parallel()
	c := pgtest.SyncRepCluster(t)
	ctx := pgtest.Context(t)
	// The partition's grant, committed locally.
	lc, err := lease.New(pgtest.Open(t, c.Pool(t, map[string]string{"synchronous_commit": "local"}, false), leasehold.Config{}),
		lease.Config{Owner: "w", TTL: time.Minute})
	pgtest.Must(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		lc.Close(ctx)
	})
	l, err := lc.TryAcquire(ctx, partition.LeaseName("g", 0))
	pgtest.Must(t, err)
	o := partition.Ownership{Group: "g", Partition: 0, Token: l.Token(), Lease: l}
	_, err = c.Local.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('g', 1)`)
	pgtest.Must(t, err)
	c.CancelWaiters(t)
	for _, hook := range []bool{true, false} {
		var id int64
		pgtest.Must(t, c.Local.QueryRow(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at)
			VALUES ('g', 0, '', 'k', '{}', 3, clock_timestamp()) RETURNING id`).Scan(&id))
		db := pgtest.Open(t, c.Pool(t, nil, hook), leasehold.Config{})
		p, err := NewProcessor(db, ProcessorConfig{Workers: NewWorkers()})
		pgtest.Must(t, err)
		_, err = p.recordOne(ctx, o, []outcome{{id: id, state: "completed", spent: 1}})
		var state string
		pgtest.Must(t, c.Local.QueryRow(ctx, `SELECT state FROM leasehold.jobs WHERE id = $1`, id).Scan(&state))
		if state != "completed" {
			t.Fatalf("hook %v: job state %q; want completed (committed locally): the test proves nothing", hook, state)
		}
		switch {
		case hook && (!fence.IsIndeterminate(err) || !errors.Is(err, leasehold.ErrNotReplicated)):
			t.Fatalf("completion not confirmed by the standby = %v; want an indeterminate error wrapping ErrNotReplicated", err)
		case !hook && err != nil:
			t.Fatalf("control, without the notice hook: completion = %v; want nil (the server answered success)", err)
		}
	}
}

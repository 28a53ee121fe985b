package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

// A fenced commit cancelled while it waits for the synchronous standby has
// committed locally, and the server answers success with a warning. The
// commit may be lost in a failover: Fence.Tx must report an unknown
// outcome, not success. Negative control: the same commit on a pool
// without leasehold's notice hook reports success.
func TestFencedCommitNotConfirmedBySyncStandbyIsIndeterminate(t *testing.T) {
	t.Parallel()
	c := pgtest.SyncRepCluster(t)
	local := c.Local
	ctx := pgtest.Context(t)
	_, err := local.Exec(ctx, `CREATE TABLE effects (note text NOT NULL)`)
	pgtest.Must(t, err)
	var tok int64
	pgtest.Must(t, local.QueryRow(ctx, `INSERT INTO leasehold.leases VALUES ('job', 'w', nextval('leasehold.lease_token_seq'),
		clock_timestamp(), clock_timestamp(), clock_timestamp() + interval '1 hour') RETURNING token`).Scan(&tok))
	for _, hook := range []bool{true, false} {
		db := pgtest.Open(t, c.Pool(t, nil, hook), leasehold.Config{})
		f, err := lease.NewFence(db, lease.FenceConfig{IdleTimeout: time.Minute})
		pgtest.Must(t, err)
		note := map[bool]string{true: "hooked", false: "unhooked"}[hook]
		// The commit waits for the standby until the context ends; pgx
		// then sends a cancel request, and the server stops waiting.
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err = f.Tx(short, "job", fence.Token(tok), func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, note)
			return err
		})
		cancel()
		var n int
		pgtest.Must(t, local.QueryRow(ctx, `SELECT count(*) FROM effects WHERE note = $1`, note).Scan(&n))
		if n != 1 {
			t.Fatalf("%s: the effect is in the database %d times; want 1 (committed locally): the test proves nothing", note, n)
		}
		if hook {
			var nr *leasehold.NotReplicatedError
			if !fence.IsIndeterminate(err) || !errors.Is(err, leasehold.ErrNotReplicated) || !errors.As(err, &nr) {
				t.Fatalf("fenced commit not confirmed by the standby = %v; want an indeterminate error wrapping ErrNotReplicated", err)
			}
			t.Logf("reported: %v", err)
		} else if err != nil {
			t.Fatalf("control, without the notice hook: Tx = %v; want nil (the server answered success)", err)
		}
	}
}

// A lease grant that the synchronous standby did not confirm may be lost
// in a failover, and its token granted again to another owner: the Client
// reports it as an unknown outcome. Its own pool has the notice hook
// whether or not the application's pool does. The grant's statement
// context (1.5 × StatementTimeout) ends while it waits, and pgx sends a
// cancel request (the derived pool inherits the application pool's
// CancelRequestContextWatcherHandler); statement_timeout does not bound
// the wait.
func TestLeaseGrantNotConfirmedBySyncStandbyIsIndeterminate(t *testing.T) {
	t.Parallel()
	c := pgtest.SyncRepCluster(t)
	local := c.Local
	ctx := pgtest.Context(t)
	db := pgtest.Open(t, c.Pool(t, nil, false), leasehold.Config{})
	cl, err := lease.New(db, lease.Config{Owner: "w", TTL: 10 * time.Second, StatementTimeout: time.Second})
	pgtest.Must(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cl.Close(ctx)
	})
	for _, names := range [][]string{{"one"}, {"a", "b"}} {
		_, err := cl.TryAcquireMany(ctx, names...)
		if !fence.IsIndeterminate(err) || !errors.Is(err, leasehold.ErrNotReplicated) {
			t.Fatalf("grant of %q not confirmed by the standby = %v; want an indeterminate error wrapping ErrNotReplicated", names, err)
		}
		var n int
		pgtest.Must(t, local.QueryRow(ctx, `SELECT count(*) FROM leasehold.leases WHERE name = ANY($1) AND owner = 'w'`, names).Scan(&n))
		if n != len(names) {
			t.Fatalf("%q: %d rows granted to w; want %d (committed locally): the test proves nothing", names, n, len(names))
		}
	}
	if ls, err := cl.TryAcquireAny(ctx, "x", "y"); !fence.IsIndeterminate(err) || !errors.Is(err, leasehold.ErrNotReplicated) {
		t.Fatalf("TryAcquireAny not confirmed by the standby = %v, %d leases; want an indeterminate error", err, len(ls))
	}
}

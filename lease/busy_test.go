package lease_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

// relayShareLocks keeps the row of lease name locked FOR SHARE by a relay of
// transactions, each taking its lock before the one before it commits (as
// overlapping fence checks do), until stop is closed. With gaps, every
// 10th handoff leaves the row unlocked for 3 ms, or until a statement
// waiting for a lock has it.
func relayShareLocks(t *testing.T, pool *pgxpool.Pool, name string, gaps bool, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx := context.Background()
		var prev pgx.Tx
		defer func() {
			if prev != nil {
				prev.Commit(ctx)
			}
		}()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Errorf("relay: %v", err)
				return
			}
			if _, err := tx.Exec(ctx, `SELECT 1 FROM leasehold.leases WHERE name = $1 FOR SHARE`, name); err != nil {
				t.Errorf("relay: %v", err)
				tx.Rollback(ctx)
				return
			}
			if prev != nil {
				prev.Commit(ctx)
			}
			prev = tx
			time.Sleep(5 * time.Millisecond)
			if gaps && i%10 == 9 {
				prev.Commit(ctx)
				prev = nil
				time.Sleep(3 * time.Millisecond)
				// The row is free: a statement waiting for it is granted it
				// now, and takes it once it runs. The gap lasts until no
				// backend of this database is still in a lock wait (at most
				// 200 ms), so that on a loaded machine the waiter's
				// scheduling delay does not count against it: the test is
				// about whether a waiter is there, not how soon the scheduler
				// runs it. (pg_locks shows the lock granted before the waiter
				// runs; its wait event clears only when it does.) Sampled
				// retries wait for nothing: their gap stays 3 ms.
				for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
					var waiting int
					if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
						WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil || waiting == 0 {
						break
					}
				}
			}
		}
	}()
	return done
}

// busyUnderRelay holds lease "hot" (TTL 1s) while a relay of FOR SHARE locks
// runs on its row for 4 TTLs, and reports whether the lease is still held
// at the end and how often the database saw it renewed.
func busyUnderRelay(t *testing.T, gaps, waiting bool) (held bool, renewals int) {
	t.Helper()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	c, err := lease.New(pgtest.DBOn(t, pool), lease.Config{Owner: "a", TTL: time.Second})
	pgtest.Must(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	if !waiting {
		lease.NoWaitingRenewal(c)
	}
	l, err := c.TryAcquire(ctx, "hot")
	pgtest.Must(t, err)
	stop := make(chan struct{})
	done := relayShareLocks(t, pool, "hot", gaps, stop)
	seen := map[time.Time]bool{}
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end) && l.Err() == nil; time.Sleep(50 * time.Millisecond) {
		// A plain read: it takes no row lock, so it waits for nothing.
		info, err := c.Inspect(ctx, "hot")
		pgtest.Must(t, err)
		seen[info.RenewedAt] = true
	}
	close(stop)
	<-done
	return l.Err() == nil, len(seen) - 1
}

// A lease whose row is locked FOR SHARE nearly all the time, by a steady
// stream of overlapping fence checks, stays held: once it nears its
// deadline, the Client renews it alone with a statement that waits for the
// row and gets it the moment the row is free, instead of only sampling the
// row with retries that keep missing those moments. The controls: with no
// gap at all the lease is lost whatever the Client does, which shows the
// check can fail; without the waiting renewal (on demand, see below) the
// lease is lost too.
func TestBusyLeaseUnderSteadyFenceChecksStaysHeld(t *testing.T) {
	t.Parallel()
	t.Run("waiting renewal", func(t *testing.T) {
		t.Parallel()
		if held, n := busyUnderRelay(t, true, true); !held || n < 2 {
			t.Fatalf("under a relay of FOR SHARE locks with gaps: held %v after 4 TTLs, renewed %d times; want held, renewed", held, n)
		}
	})
	t.Run("sampling only", func(t *testing.T) {
		// The measurement docs/leases.md quotes (lost in 5 runs of 5): on
		// demand only, since retries that sample the row may, by chance,
		// land in its free moments every time.
		if os.Getenv("LEASEHOLD_SAMPLING_CONTROL") == "" {
			t.Skip("set LEASEHOLD_SAMPLING_CONTROL=1 to run the control without the waiting renewal")
		}
		t.Parallel()
		if held, n := busyUnderRelay(t, true, false); held {
			t.Fatalf("without the waiting renewal the lease stayed held (renewed %d times): the relay does not starve sampled retries", n)
		}
	})
	t.Run("no gap", func(t *testing.T) {
		t.Parallel()
		if held, _ := busyUnderRelay(t, false, true); held {
			t.Fatal("the lease stayed held under a relay of FOR SHARE locks that never leaves its row free: the check cannot fail")
		}
	})
}

package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

// waitLockWaiters waits until at least n sessions of the test's database are
// waiting for a lock, and fails the test after 10s.
func waitLockWaiters(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	if !lockWaiters(t, pool, n, 10*time.Second) {
		t.Fatalf("fewer than %d sessions waiting for a lock after 10s", n)
	}
}

// lockWaiters reports whether at least n sessions of the test's database are
// waiting for a lock within timeout.
func lockWaiters(t *testing.T, pool *pgxpool.Pool, n int, timeout time.Duration) bool {
	t.Helper()
	ctx := pgtest.Context(t)
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		var waiting int
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		if waiting >= n {
			return true
		}
		if time.Since(start) > timeout {
			return false
		}
	}
}

// waitingOrDone waits until a session of the test's database waits for a
// lock (true), or done has a result first (false); it fails the test after
// 30s.
func waitingOrDone(t *testing.T, pool *pgxpool.Pool, done chan error) bool {
	t.Helper()
	for start := time.Now(); time.Since(start) < 30*time.Second; {
		if lockWaiters(t, pool, 1, 0) {
			return true
		}
		if len(done) > 0 {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no session waiting for a lock after 30s, and the statement that should wait did not return")
	return false
}

// grantAndReleaseLocked does, in tx (which holds the row lock of name), what
// a concurrent grant and release by another owner does: a new token from the
// sequence, and an expiry of now. It returns that token.
func grantAndReleaseLocked(t *testing.T, tx pgx.Tx, name string) int64 {
	t.Helper()
	var tok int64
	pgtest.Must(t, tx.QueryRow(pgtest.Context(t), `UPDATE leasehold.leases
		SET owner = 'other', token = nextval('leasehold.lease_token_seq'),
		    acquired_at = clock_timestamp(), renewed_at = clock_timestamp(), expires_at = clock_timestamp()
		WHERE name = $1 RETURNING token`, name).Scan(&tok))
	return tok
}

type acquired struct {
	l   *lease.Lease
	err error
}

func tryAcquireAsync(c *lease.Client, ctx context.Context, name string) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := c.TryAcquire(ctx, name)
		ch <- acquired{l, err}
	}()
	return ch
}

// An acquire that must wait for the row lock (held here by a transaction of
// the application, or by a concurrent grant) gets a token larger than any
// token committed to the row while it waited: the token is drawn after the
// row lock is granted, not before.
func TestAcquireWaitingForTheRowGetsALaterToken(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	a := newClient(t, pool, lease.Config{Owner: "a", TTL: 30 * time.Second}) // 10s lock timeout
	l0, err := a.TryAcquire(ctx, "job")
	pgtest.Must(t, err)
	pgtest.Must(t, l0.Release(ctx)) // the row exists and is free

	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `SELECT 1 FROM leasehold.leases WHERE name = 'job' FOR UPDATE`)
	pgtest.Must(t, err)
	got := tryAcquireAsync(a, ctx, "job")
	waitLockWaiters(t, pool, 1)
	other := grantAndReleaseLocked(t, tx, "job")
	pgtest.Must(t, tx.Commit(ctx))

	r := <-got
	pgtest.Must(t, r.err)
	if r.l.Token() <= fence.Token(other) {
		t.Fatalf("token %v granted after token %d was committed to the row: tokens must increase", r.l.Token(), other)
	}
}

// DeleteExpired must not delete a row under an acquire that is already
// running: here the acquire waits for the row behind a deletion, another
// grant with a newer token commits and expires meanwhile, and the deletion
// removes it. Without the table lock the acquire would then insert the token
// it drew before that grant. (Once the blocking transaction commits, the
// deletion and the acquire race for the row; without the table lock the
// deletion wins almost always, so a few rounds make a miss very unlikely.)
func TestDeleteExpiredDoesNotSlipUnderARunningAcquire(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	a := newClient(t, pool, lease.Config{Owner: "a", TTL: 30 * time.Second})
	janitor := newClient(t, pool, lease.Config{Owner: "janitor", TTL: 30 * time.Second})
	conclusive := 0
	for round := 0; conclusive < 5; round++ {
		if round == 40 {
			t.Fatalf("only %d of %d rounds conclusive: DeleteExpired kept timing out on the table lock", conclusive, round)
		}
		name := fmt.Sprintf("job%d", round)
		l0, err := a.TryAcquire(ctx, name)
		pgtest.Must(t, err)
		pgtest.Must(t, l0.Release(ctx))

		tx, err := pool.Begin(ctx)
		pgtest.Must(t, err)
		// Frees the locks if the test fails (a no-op after Commit): the
		// waiting sessions then end and the pool can close.
		defer tx.Rollback(context.Background())
		_, err = tx.Exec(ctx, `LOCK TABLE leasehold.leases IN ROW EXCLUSIVE MODE`) // as any writer holds
		pgtest.Must(t, err)
		_, err = tx.Exec(ctx, `SELECT 1 FROM leasehold.leases WHERE name = $1 FOR UPDATE`, name)
		pgtest.Must(t, err)

		deleted := make(chan error, 1)
		go func() { _, err := janitor.DeleteExpired(ctx, 0); deleted <- err }()
		if !waitingOrDone(t, pool, deleted) {
			// DeleteExpired gave up on the table lock (after 50ms) before
			// it was seen waiting, as on an overloaded machine: this
			// round shows nothing.
			<-deleted
			pgtest.Must(t, tx.Rollback(ctx))
			continue
		}
		got := tryAcquireAsync(a, ctx, name)
		both := lockWaiters(t, pool, 2, 2*time.Second) // false: DeleteExpired already gave up
		other := grantAndReleaseLocked(t, tx, name)
		pgtest.Must(t, tx.Commit(ctx))

		r := <-got
		pgtest.Must(t, r.err)
		if !both {
			pgtest.Must(t, r.l.Release(ctx))
			<-deleted
			continue
		}
		var pe *pgconn.PgError
		if derr := <-deleted; errors.As(derr, &pe) && pe.Code == "55P03" {
			// DeleteExpired gave up on the table lock (50ms) before the
			// blocking transaction committed: this round shows nothing.
			pgtest.Must(t, r.l.Release(ctx))
			continue
		} else {
			pgtest.Must(t, derr)
		}
		conclusive++
		if r.l.Token() <= fence.Token(other) {
			t.Fatalf("round %d: token %v granted after token %d was committed to the row: tokens must increase",
				round, r.l.Token(), other)
		}
		pgtest.Must(t, r.l.Release(ctx))
	}
}

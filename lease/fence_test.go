package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

func fenceClient(t *testing.T, pool *pgxpool.Pool, owner string, clock lease.Clock) *lease.Client {
	c, err := lease.New(pgtest.DBOn(t, pool), lease.Config{Owner: owner, TTL: time.Second, Clock: clock,
		MaxBackoff: 50 * time.Millisecond})
	pgtest.Must(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func fenceSetup(t *testing.T) (*pgxpool.Pool, *lease.Fence) {
	pool := pgtest.Pool(t)
	_, err := pool.Exec(pgtest.Context(t), `CREATE TABLE effects (token bigint NOT NULL, note text)`)
	pgtest.Must(t, err)
	f, err := lease.NewFence(pgtest.DBOn(t, pool), lease.FenceConfig{})
	pgtest.Must(t, err)
	return pool, f
}

func effect(token fence.Token, note string) func(pgx.Tx) error {
	return func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO effects VALUES ($1, $2)`, int64(token), note)
		return err
	}
}

func count(t *testing.T, pool *pgxpool.Pool, token fence.Token) int {
	var n int
	pgtest.Must(t, pool.QueryRow(pgtest.Context(t), `SELECT count(*) FROM effects WHERE token = $1`, int64(token)).Scan(&n))
	return n
}

func TestFenceTxCommitsOnlyWhileTheLeaseCarriesTheToken(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, f := fenceSetup(t)
	frozen := fakeclock.New(time.Now()) // A pauses: never renews
	la, err := fenceClient(t, pool, "a", frozen).TryAcquire(ctx, "p/1")
	pgtest.Must(t, err)
	pgtest.Must(t, f.Tx(ctx, "p/1", la.Token(), effect(la.Token(), "a while current")))

	// The lease expires in the database; nobody has taken it yet.
	time.Sleep(1100 * time.Millisecond)
	err = f.Tx(ctx, "p/1", la.Token(), effect(la.Token(), "a after expiry"))
	var fe *fence.FencedError
	if !errors.Is(err, fence.ErrFenced) || !errors.As(err, &fe) || !strings.Contains(fe.Reason, "expired") {
		t.Fatalf("effect after expiry = %v; want ErrFenced (expired)", err)
	}

	lb, err := fenceClient(t, pool, "b", nil).Acquire(ctx, "p/1")
	pgtest.Must(t, err)
	err = f.Tx(ctx, "p/1", la.Token(), effect(la.Token(), "a after takeover"))
	if !errors.As(err, &fe) || fe.Current != lb.Token() || fe.Held != la.Token() {
		t.Fatalf("stale effect = %v; want *FencedError held %v current %v", err, la.Token(), lb.Token())
	}
	pgtest.Must(t, f.Tx(ctx, "p/1", lb.Token(), effect(lb.Token(), "b")))
	if a, b := count(t, pool, la.Token()), count(t, pool, lb.Token()); a != 1 || b != 1 {
		t.Fatalf("effects: %d by a, %d by b; want exactly 1 each", a, b)
	}
	if err := f.Tx(ctx, "no/such", 1, effect(1, "x")); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("effect under an unknown lease = %v; want ErrFenced", err)
	}
	// An error from fn rolls back and comes back unchanged.
	boom := errors.New("boom")
	if err := f.Tx(ctx, "p/1", lb.Token(), func(tx pgx.Tx) error { effect(lb.Token(), "rolled back")(tx); return boom }); err != boom {
		t.Fatalf("Tx with failing fn = %v; want boom", err)
	}
	if count(t, pool, lb.Token()) != 1 {
		t.Fatal("a failed fn's effect was committed")
	}
}

// takeoverDuringOpenEffect opens an effect transaction for holder A with
// check (before the effect, or with checkLast after it), lets A's lease
// expire, starts B's acquire, and reports whether B's takeover committed
// while A's effect transaction was still open, then commits A's
// transaction.
func takeoverDuringOpenEffect(t *testing.T, check func(context.Context, pgx.Tx, string, fence.Token) error, checkLast bool, setup ...string) (committedWhileOpen, aCommitted bool) {
	ctx := pgtest.Context(t)
	pool, _ := fenceSetup(t)
	for _, s := range setup {
		if s != "" {
			_, err := pool.Exec(ctx, s)
			pgtest.Must(t, err)
		}
	}
	la, err := fenceClient(t, pool, "a", fakeclock.New(time.Now())).TryAcquire(ctx, "p/1")
	pgtest.Must(t, err)
	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(ctx)
	if checkLast {
		pgtest.Must(t, effect(la.Token(), "a")(tx))
		pgtest.Must(t, check(ctx, tx, "p/1", la.Token()))
	} else {
		pgtest.Must(t, check(ctx, tx, "p/1", la.Token()))
		pgtest.Must(t, effect(la.Token(), "a")(tx))
	}

	time.Sleep(1100 * time.Millisecond) // A's lease expires; A's transaction is still open
	got := make(chan error, 1)
	go func() {
		_, err := fenceClient(t, pool, "b", nil).Acquire(ctx, "p/1") // each attempt waits at most StatementTimeout
		got <- err
	}()
	select {
	case err := <-got:
		pgtest.Must(t, err)
		committedWhileOpen = true
	case <-time.After(500 * time.Millisecond):
	}
	aCommitted = tx.Commit(ctx) == nil && count(t, pool, la.Token()) == 1
	if !committedWhileOpen {
		pgtest.Must(t, <-got) // B gets it once A's transaction has ended
	}
	return committedWhileOpen, aCommitted
}

// The READ COMMITTED hole: with Fence.Check a takeover cannot commit
// while an effect transaction is open, so effects and grants stay in token
// order. The negative controls show that the test catches the hole: with a
// plain check, or with the check's FOR KEY SHARE on a leases table whose
// token is not part of a key (migration 15's index dropped: a takeover
// then updates no key column and takes a lock that FOR KEY SHARE does not
// block), the takeover commits while A's transaction is open, and A then
// commits too.
func TestTakeoverCannotCommitWhileAnEffectTransactionIsOpen(t *testing.T) {
	t.Parallel()
	f, err := lease.NewFence(pgtest.DBOn(t, pgtest.Pool(t)), lease.FenceConfig{})
	pgtest.Must(t, err)
	for _, last := range []bool{false, true} {
		if during, aOK := takeoverDuringOpenEffect(t, f.Check, last); during || !aOK {
			t.Fatalf("with Fence.Check (after the effect: %v): takeover committed during the effect = %v, A committed = %v; want false, true",
				last, during, aOK)
		}
	}
	naive := func(lock string) func(context.Context, pgx.Tx, string, fence.Token) error {
		return func(ctx context.Context, tx pgx.Tx, name string, tok fence.Token) error {
			var cur int64
			if err := tx.QueryRow(ctx, `SELECT token FROM leasehold.leases WHERE name = $1 `+lock, name).Scan(&cur); err != nil {
				return err
			}
			if fence.Token(cur) != tok {
				return fence.ErrFenced
			}
			return nil
		}
	}
	for _, c := range []struct{ lock, setup string }{{"", ""}, {"FOR KEY SHARE", "DROP INDEX leasehold.leases_name_token"}} {
		if during, aOK := takeoverDuringOpenEffect(t, naive(c.lock), false, c.setup); !during || !aOK {
			t.Fatalf("negative control (check %q, %q): takeover during the effect = %v, A committed = %v; want true, true (the hole)",
				c.lock, c.setup, during, aOK)
		}
	}
}

func TestNewFenceRejectsBadConfig(t *testing.T) {
	db := pgtest.DBOn(t, pgtest.Pool(t))
	for _, cfg := range []lease.FenceConfig{{LockTimeout: -1}, {IdleTimeout: -1}, {StatementTimeout: -1}} {
		if _, err := lease.NewFence(db, cfg); !errors.Is(err, lease.ErrInvalidConfig) {
			t.Errorf("NewFence(%+v) = %v; want ErrInvalidConfig", cfg, err)
		}
	}
	if _, err := lease.NewFence(nil, lease.FenceConfig{}); !errors.Is(err, lease.ErrInvalidConfig) {
		t.Errorf("NewFence(nil) = %v; want ErrInvalidConfig", err)
	}
}

// A token is only good for the lease that granted it: tokens come from one
// sequence, so another lease's (larger) token must not pass the check.
func TestCheckRefusesATokenOfAnotherLease(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, f := fenceSetup(t)
	c := fenceClient(t, pool, "a", nil)
	l1, err := c.TryAcquire(ctx, "p/1")
	pgtest.Must(t, err)
	l2, err := c.TryAcquire(ctx, "p/2")
	pgtest.Must(t, err)
	if l2.Token() <= l1.Token() {
		t.Fatalf("tokens %v then %v; want increasing", l1.Token(), l2.Token())
	}
	err = f.Tx(ctx, "p/1", l2.Token(), effect(l2.Token(), "wrong lease"))
	var fe *fence.FencedError
	if !errors.As(err, &fe) || fe.Current != l1.Token() || fe.Held != l2.Token() {
		t.Fatalf("effect on p/1 with p/2's token = %v; want *FencedError held %v current %v", err, l2.Token(), l1.Token())
	}
	if n := count(t, pool, l2.Token()); n != 0 {
		t.Fatalf("%d effects committed with another lease's token; want 0", n)
	}
}

// Tx promises that fn is not called when Check refuses.
func TestTxDoesNotCallFnWhenCheckRefuses(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, f := fenceSetup(t)
	la, err := fenceClient(t, pool, "a", fakeclock.New(time.Now())).TryAcquire(ctx, "p/1")
	pgtest.Must(t, err)
	lb, err := fenceClient(t, pool, "b", nil).Acquire(ctx, "p/1") // waits out a's frozen lease
	pgtest.Must(t, err)
	for _, c := range []struct {
		lease string
		tok   fence.Token
	}{{"p/1", la.Token()}, {"no/such", lb.Token()}} {
		called := false
		err := f.Tx(ctx, c.lease, c.tok, func(pgx.Tx) error { called = true; return nil })
		if !errors.Is(err, fence.ErrFenced) || called {
			t.Fatalf("Tx(%s, %v) = %v, fn called = %v; want ErrFenced and fn not called", c.lease, c.tok, err, called)
		}
	}
}

// IdleTimeout: a holder that stalls inside an open effect transaction is cut
// off by the server, so a takeover does not wait for it, and the stalled
// transaction cannot commit afterwards.
func TestIdleTimeoutCutsOffAStalledEffectTransaction(t *testing.T) {
	t.Parallel()
	f, err := lease.NewFence(pgtest.DBOn(t, pgtest.Pool(t)), lease.FenceConfig{IdleTimeout: 300 * time.Millisecond})
	pgtest.Must(t, err)
	if during, aOK := takeoverDuringOpenEffect(t, f.Check, false); !during || aOK {
		t.Fatalf("IdleTimeout 300ms, A idle 1.1s: takeover during the effect = %v, A committed = %v; want true, false", during, aOK)
	}
}

// txBehindLock acquires lease "p/1", holds its row in another open
// transaction with lock (a statement run in it), and runs a Fence.Tx with a
// LockTimeout of 200ms against it. It returns how long Tx took, how many
// of its effects committed, and Tx's error.
func txBehindLock(t *testing.T, lock string) (took time.Duration, effects int, err error) {
	t.Helper()
	ctx := pgtest.Context(t)
	pool, _ := fenceSetup(t)
	f, err := lease.NewFence(pgtest.DBOn(t, pool), lease.FenceConfig{LockTimeout: 200 * time.Millisecond})
	pgtest.Must(t, err)
	la, err := fenceClient(t, pool, "a", nil).TryAcquire(ctx, "p/1")
	pgtest.Must(t, err)
	holder, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	defer holder.Rollback(ctx)
	_, err = holder.Exec(ctx, lock)
	pgtest.Must(t, err)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	err = f.Tx(cctx, "p/1", la.Token(), effect(la.Token(), "checked against a locked row"))
	return time.Since(start), count(t, pool, la.Token()), err
}

// LockTimeout bounds Check's wait for the lease row's lock, here held as a
// takeover holds it. Tx checks after fn (the unlocked early read does not
// wait for the lock), so fn runs, and its effect is rolled back with the
// refused check.
func TestLockTimeoutBoundsTheCheck(t *testing.T) {
	t.Parallel()
	took, n, err := txBehindLock(t, `SELECT 1 FROM leasehold.leases WHERE name = 'p/1' FOR UPDATE`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "55P03" || fence.IsIndeterminate(err) || took > 3*time.Second {
		t.Fatalf("Tx against a locked lease row = %v after %v; want lock_not_available (55P03) after ~200ms", err, took)
	}
	if n != 0 {
		t.Fatalf("%d effects committed although the check timed out; want 0", n)
	}
}

// A renewal in flight does not hold up a fence check: the renewal locks the
// lease row FOR NO KEY UPDATE (it changes no key column) until its commit,
// which on a loaded server can take longer than LockTimeout; the check's
// FOR KEY SHARE does not wait for it. (With the FOR SHARE of schema 14,
// every fence check of a member's partitions timed out behind one slow
// renewal commit: CI's TestKafkaWorkerServesKafkaAndPartitionMetrics saw 4
// batches fail at once.) The control is TestLockTimeoutBoundsTheCheck: the
// same check behind a takeover's lock times out.
func TestRenewalInFlightDoesNotHoldUpTheCheck(t *testing.T) {
	t.Parallel()
	// A renewal that has updated the row and not yet committed.
	_, n, err := txBehindLock(t, `UPDATE leasehold.leases SET renewed_at = clock_timestamp(),
		expires_at = clock_timestamp() + interval '1 minute' WHERE name = 'p/1'`)
	if err != nil {
		t.Fatalf("Tx while a renewal of its lease is uncommitted = %v; want it to commit", err)
	}
	if n != 1 {
		t.Fatalf("%d effects committed; want 1", n)
	}
}

// fn cannot commit the fenced transaction itself: its Commit and Rollback
// are refused (ErrTxManaged), so no effect commits outside Tx's COMMIT, whose
// outcome is the one Tx reports. (Had fn committed, Tx's own COMMIT would
// find the transaction closed: an effect applied but reported as not.)
func TestFenceTxRefusesACommitByFn(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, f := fenceSetup(t)
	la, err := fenceClient(t, pool, "a", nil).TryAcquire(ctx, "p/1")
	pgtest.Must(t, err)
	var commitErr, rollbackErr error
	err = f.Tx(ctx, "p/1", la.Token(), func(tx pgx.Tx) error {
		if err := effect(la.Token(), "committed by fn")(tx); err != nil {
			return err
		}
		commitErr, rollbackErr = tx.Commit(ctx), tx.Rollback(ctx)
		return commitErr
	})
	if !errors.Is(commitErr, lease.ErrTxManaged) || !errors.Is(rollbackErr, lease.ErrTxManaged) {
		t.Fatalf("fn's Commit, Rollback = %v, %v; want ErrTxManaged", commitErr, rollbackErr)
	}
	if !errors.Is(err, lease.ErrTxManaged) || fence.IsIndeterminate(err) {
		t.Fatalf("Tx = %v; want fn's error, ErrTxManaged (known: rolled back)", err)
	}
	if n := count(t, pool, la.Token()); n != 0 {
		t.Fatalf("%d effects applied; want none: fn's error rolls back", n)
	}
	// The control: returning nil commits the effect, once.
	pgtest.Must(t, f.Tx(ctx, "p/1", la.Token(), effect(la.Token(), "committed by Tx")))
	if n := count(t, pool, la.Token()); n != 1 {
		t.Fatalf("%d effects after a Tx that returned nil; want 1", n)
	}
}

// A fenced transaction that cannot begin (the database cannot be reached)
// applied nothing: its error is known, never indeterminate, and fn is not
// called.
func TestFenceTxWithoutADatabaseIsKnownNotApplied(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, err := pgxpool.New(ctx, "postgres://leasehold@127.0.0.1:1/none?connect_timeout=2") // nothing listens on port 1
	pgtest.Must(t, err)
	t.Cleanup(pool.Close)
	f, err := lease.NewFence(pgtest.DBOn(t, pool), lease.FenceConfig{})
	pgtest.Must(t, err)
	called := false
	err = f.Tx(ctx, "p/1", 1, func(pgx.Tx) error { called = true; return nil })
	if err == nil || called || fence.IsIndeterminate(err) {
		t.Fatalf("Tx without a database = %v (fn called: %v); want a known error, fn not called", err, called)
	}
}

// Tx checks after fn: a takeover that commits while fn runs refuses the
// check, and fn's effect, written before the takeover, is rolled back.
func TestFenceTxRollsBackAnEffectWhoseLeaseWasTakenOverWhileFnRan(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, f := fenceSetup(t)
	la, err := fenceClient(t, pool, "a", fakeclock.New(time.Now())).TryAcquire(ctx, "p/1") // A never renews
	pgtest.Must(t, err)
	var lb *lease.Lease
	err = f.Tx(ctx, "p/1", la.Token(), func(tx pgx.Tx) error {
		if err := effect(la.Token(), "a, before the takeover")(tx); err != nil {
			return err
		}
		// B takes the lease over once A's grant expires; fn holds no lock
		// on the lease row, so nothing holds B back.
		var err error
		lb, err = fenceClient(t, pool, "b", nil).Acquire(ctx, "p/1")
		return err
	})
	var fe *fence.FencedError
	if !errors.As(err, &fe) || fe.Current != lb.Token() || fence.IsIndeterminate(err) {
		t.Fatalf("Tx whose lease was taken over while fn ran = %v; want *FencedError with current token %v", err, lb.Token())
	}
	if n := count(t, pool, la.Token()); n != 0 {
		t.Fatalf("%d effects of the superseded holder committed; want 0", n)
	}
}

// On a schema whose token is not part of a key (the index of migration 15
// dropped, as on a schema not yet migrated), FOR KEY SHARE would not fence
// a takeover: the check fails closed, with ErrNotMigrated, and the effect
// does not commit. The control: the same Tx commits on the migrated schema.
func TestFenceRefusesASchemaWithoutTheTokenKey(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	for _, dropped := range []bool{false, true} {
		pool, f := fenceSetup(t)
		la, err := fenceClient(t, pool, "a", nil).TryAcquire(ctx, "p/1")
		pgtest.Must(t, err)
		if dropped {
			_, err = pool.Exec(ctx, `DROP INDEX leasehold.leases_name_token`)
			pgtest.Must(t, err)
		}
		err = f.Tx(ctx, "p/1", la.Token(), effect(la.Token(), "a"))
		n := count(t, pool, la.Token())
		switch {
		case !dropped && (err != nil || n != 1):
			t.Fatalf("control: Tx on the migrated schema = %v, %d effects; want nil, 1", err, n)
		case dropped && (!errors.Is(err, leasehold.ErrNotMigrated) || n != 0):
			t.Fatalf("Tx without the token's key = %v, %d effects; want ErrNotMigrated, 0", err, n)
		}
	}
}

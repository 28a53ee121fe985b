package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

// fencedAt asserts that err is a *fence.FencedError refused by check, for
// reason, and that its message names the check.
func fencedAt(t *testing.T, what string, err error, check fence.Check, reason string) *fence.FencedError {
	t.Helper()
	var fe *fence.FencedError
	if !errors.As(err, &fe) {
		t.Fatalf("%s = %v; want a *fence.FencedError", what, err)
	}
	if fe.Check != check || !strings.Contains(fe.Reason, reason) || !strings.Contains(fe.Error(), "at the "+string(check)) {
		t.Fatalf("%s = %q (Check %q, Reason %q); want refused at the %s, %s", what, fe.Error(), fe.Check, fe.Reason, check, reason)
	}
	return fe
}

// waitExpired waits until the database clock is past name's expiry.
func waitExpired(t *testing.T, pool *pgxpool.Pool, name string) {
	t.Helper()
	ctx := pgtest.Context(t)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		var expired bool
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT expires_at <= clock_timestamp() FROM leasehold.leases WHERE name = $1`, name).Scan(&expired))
		if expired {
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("lease %s did not expire on the database clock", name)
		}
	}
}

// A fenced transaction whose lease had moved on before it began is refused
// by the early read, without running fn: the error says so (Check
// CheckEarly), for a takeover and for an expiry alike.
func TestFencedErrorNamesTheEarlyRead(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, f := fenceSetup(t)
	la, err := fenceClient(t, pool, "a", fakeclock.New(time.Now())).TryAcquire(ctx, "p/1") // A never renews
	pgtest.Must(t, err)
	waitExpired(t, pool, "p/1")
	called := false
	err = f.Tx(ctx, "p/1", la.Token(), func(pgx.Tx) error { called = true; return nil })
	fencedAt(t, "Tx on an expired lease", err, fence.CheckEarly, "expired")

	lb, err := fenceClient(t, pool, "b", nil).Acquire(ctx, "p/1")
	pgtest.Must(t, err)
	err = f.Tx(ctx, "p/1", la.Token(), func(pgx.Tx) error { called = true; return nil })
	if fe := fencedAt(t, "Tx on a lease taken over", err, fence.CheckEarly, "granted anew"); fe.Current != lb.Token() {
		t.Fatalf("Current = %v; want the new grant's %v", fe.Current, lb.Token())
	}
	if called {
		t.Fatal("fn ran although the early read refused")
	}
}

// A fenced transaction whose lease moves on while fn runs passes the early
// read and is refused by the locking check before the commit (Check
// CheckLocking): for an expiry (nobody took over) and for a takeover. A
// Check run by hand names the locking check too.
func TestFencedErrorNamesTheLockingCheck(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, f := fenceSetup(t)
	a := fenceClient(t, pool, "a", fakeclock.New(time.Now())) // A never renews
	la, err := a.TryAcquire(ctx, "p/1")
	pgtest.Must(t, err)
	err = f.Tx(ctx, "p/1", la.Token(), func(tx pgx.Tx) error {
		if err := effect(la.Token(), "a, before the expiry")(tx); err != nil {
			return err
		}
		waitExpired(t, pool, "p/1")
		return nil
	})
	fencedAt(t, "Tx whose lease expired while fn ran", err, fence.CheckLocking, "expired")

	var lb *lease.Lease
	err = f.Tx(ctx, "p/1", la.Token(), func(pgx.Tx) error { return nil })
	fencedAt(t, "Tx after the expiry", err, fence.CheckEarly, "expired") // the control: the same grant, refused before fn

	lc, err := a.TryAcquire(ctx, "p/2")
	pgtest.Must(t, err)
	err = f.Tx(ctx, "p/2", lc.Token(), func(tx pgx.Tx) error {
		var err error
		lb, err = fenceClient(t, pool, "b", nil).Acquire(ctx, "p/2") // waits for the expiry, then takes over
		return err
	})
	if fe := fencedAt(t, "Tx whose lease was taken over while fn ran", err, fence.CheckLocking, "granted anew"); fe.Current != lb.Token() {
		t.Fatalf("Current = %v; want the new grant's %v", fe.Current, lb.Token())
	}

	tx, err := f.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(context.WithoutCancel(ctx))
	fencedAt(t, "Check with a superseded token", f.Check(ctx, tx, "p/2", lc.Token()), fence.CheckLocking, "granted anew")
	if n := count(t, pool, la.Token()); n != 0 {
		t.Fatalf("%d effects of refused transactions committed; want 0", n)
	}
}

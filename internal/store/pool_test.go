package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
)

// Pools derived from one pool with the same size and timeout are one pool,
// open until its last user releases it; a different timeout is another
// pool (the control: the check can tell two pools apart).
func TestDerivedPoolsAreShared(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	base := pgtest.Pool(t)
	a, releaseA, err := store.DerivePool(base, 4, 5*time.Second, false)
	pgtest.Must(t, err)
	b, releaseB, err := store.DerivePool(base, 4, 5*time.Second, false)
	pgtest.Must(t, err)
	c, releaseC, err := store.DerivePool(base, 4, 6*time.Second, false)
	pgtest.Must(t, err)
	defer releaseC()
	if a != b {
		t.Fatal("two pools derived with the same size and timeout are two pools")
	}
	if c == a {
		t.Fatal("control: a pool derived with another timeout is the same pool")
	}
	releaseA()
	releaseA() // once only: a second call must not close b's pool
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("the shared pool after one of its two users released it: %v", err)
	}
	releaseB()
	if err := b.Ping(ctx); err == nil {
		t.Fatal("the shared pool is still open after its last user released it")
	}
	d, releaseD, err := store.DerivePool(base, 4, 5*time.Second, false)
	pgtest.Must(t, err)
	defer releaseD()
	if d == a {
		t.Fatal("a pool derived after the last release is the closed one")
	}
	pgtest.Must(t, d.Ping(ctx))
}

// A cloned pool keeps the pool's size, minimum and hooks and closes a
// connection idle for the time given (negative: the pool's own setting); it
// is a pool of its own (closing it leaves the original open).
func TestClonePoolClosesIdleConnections(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	for _, c := range []struct {
		base, idle, want time.Duration
	}{{0, time.Minute, time.Minute}, {10 * time.Second, time.Minute, time.Minute}, {10 * time.Second, -1, 10 * time.Second}, {0, -1, 30 * time.Minute}} {
		pc, err := pgxpool.ParseConfig(pgtest.MigratedURL(t))
		pgtest.Must(t, err)
		pc.MaxConns, pc.MinConns = 7, 1
		if c.base > 0 {
			pc.MaxConnIdleTime = c.base
		}
		pc.AfterConnect = func(context.Context, *pgx.Conn) error { return nil }
		base, err := pgxpool.NewWithConfig(ctx, pc)
		pgtest.Must(t, err)
		defer base.Close()
		clone, err := store.ClonePool(base, c.idle)
		pgtest.Must(t, err)
		got := clone.Config()
		if got.MaxConns != 7 || got.MinConns != 1 || got.MaxConnIdleTime != c.want || got.AfterConnect == nil {
			t.Errorf("%+v: clone has MaxConns %d, MinConns %d, MaxConnIdleTime %v, AfterConnect set %v; want 7, 1, %v, true",
				c, got.MaxConns, got.MinConns, got.MaxConnIdleTime, got.AfterConnect != nil, c.want)
		}
		pgtest.Must(t, clone.Ping(ctx))
		clone.Close()
		if err := base.Ping(ctx); err != nil {
			t.Errorf("%+v: the original pool after the clone closed: %v", c, err)
		}
	}
}

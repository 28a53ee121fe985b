package store_test

import (
	"testing"
	"time"

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

package lease_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/lease"
)

// A lease protects a write only together with its token: the target row
// remembers the highest token that wrote it and refuses lower ones.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	db, err := leasehold.Open(pool, leasehold.Config{})
	if err != nil {
		panic(err)
	}
	if err := db.Migrate(ctx); err != nil {
		panic(err)
	}

	leases, err := lease.New(db, lease.Config{TTL: 15 * time.Second})
	if err != nil {
		panic(err)
	}
	defer leases.Close(ctx)

	l, err := leases.Acquire(ctx, "nightly-report")
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)

	tag, err := pool.Exec(l.Context(), `
		UPDATE reports SET body = $1, fence_token = $2
		WHERE id = $3 AND fence_token <= $2`, "...", l.Token(), 1)
	switch {
	case err != nil:
		fmt.Println("write failed:", err)
	case tag.RowsAffected() == 0:
		fmt.Println("fenced: a newer holder wrote first")
	}
}

// TryAcquire makes one attempt and reports a held lease with ErrHeld.
func ExampleClient_TryAcquire() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	db, _ := leasehold.Open(pool, leasehold.Config{})
	leases, _ := lease.New(db, lease.Config{})
	defer leases.Close(ctx)

	l, err := leases.TryAcquire(ctx, "singleton")
	switch {
	case errors.Is(err, lease.ErrHeld):
		fmt.Println("another owner holds it")
	case fence.IsIndeterminate(err):
		fmt.Println("outcome unknown: retry with the same client, or let it expire")
	case err != nil:
		fmt.Println(err)
	default:
		defer l.Release(ctx)
		<-l.Done() // work until the lease is lost or released
	}
}

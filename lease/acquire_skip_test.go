package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/lease"
)

// TryAcquireAny does not lock a row that it sees held by another owner: it
// neither waits for the holder's open transaction on the row (a renewal, a
// release in flight) nor holds that holder up. Control: the same statement
// without the snapshot's filter waits for the row (lock timeout).
func TestTryAcquireAnySkipsHeldRowsWithoutLocking(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	a := newClient(t, pool, lease.Config{Owner: "a"})
	b := newClient(t, pool, lease.Config{Owner: "b"})
	held, free := t.Name()+"/held", t.Name()+"/free"
	la, err := a.TryAcquire(ctx, held)
	pgtest.Must(t, err)
	// The holder's transaction on the row, left open.
	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(context.Background())
	st, err := store.For("")
	pgtest.Must(t, err)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM "leasehold".leases WHERE name = $1 AND token = $2 FOR NO KEY UPDATE`, held, int64(la.Token())); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ls, err := b.TryAcquireAny(ctx, held, free)
	pgtest.Must(t, err)
	if len(ls) != 1 || ls[0].Name() != free {
		t.Fatalf("b took %d leases; want only %s", len(ls), free)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("TryAcquireAny took %v with the held row locked; want no wait", d)
	}
	// Control: without the filter, ON CONFLICT DO UPDATE locks the row to
	// find it held, and waits for the holder's transaction.
	unfiltered := st.Lease.AcquireMany
	i := strings.Index(unfiltered, "WHERE NOT EXISTS")
	j := strings.Index(unfiltered, "ORDER BY n")
	if i < 0 || j < i {
		t.Fatal("control: the acquire statement no longer has the filter this test removes")
	}
	unfiltered = unfiltered[:i] + unfiltered[j:]
	c, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	defer c.Rollback(context.Background())
	_, err = c.Exec(ctx, `SET LOCAL lock_timeout = '300ms'`)
	pgtest.Must(t, err)
	_, err = c.Exec(ctx, unfiltered, []string{held}, "c", int64(time.Second/time.Microsecond))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "55P03" {
		t.Fatalf("control: the unfiltered acquire of the locked row = %v; want a lock timeout", err)
	}
}

package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

// The token guard before a Client's first grant is tried again when its
// statement times out on a server busy for a moment (here: the lease table
// locked by another transaction for about two statement timeouts): the
// first acquire succeeds once the lock goes. Control: a lock held past
// every try (5 of about 333ms) fails the acquire with the timeout, so the retry is bounded
// and the test can fail.
func TestGuardRetriesATimedOutStatement(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	for _, hold := range []time.Duration{700 * time.Millisecond, 3 * time.Second} {
		c := newClient(t, pool, lease.Config{TTL: time.Second}) // statement timeout about 333ms
		tx, err := pool.Begin(ctx)
		pgtest.Must(t, err)
		_, err = tx.Exec(ctx, `LOCK TABLE leasehold.leases IN ACCESS EXCLUSIVE MODE`)
		pgtest.Must(t, err)
		released := make(chan struct{})
		time.AfterFunc(hold, func() {
			tx.Rollback(context.Background())
			close(released)
		})
		_, err = c.TryAcquire(ctx, "guarded")
		<-released
		switch {
		case hold < time.Second && err != nil:
			t.Fatalf("lock held %v: first acquire = %v; want it granted after the guard's timed-out tries", hold, err)
		case hold > time.Second && (err == nil || !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err)):
			t.Fatalf("control, lock held %v: first acquire = %v; want the guard's timeout after its tries", hold, err)
		}
	}
}

// isTimeout reports whether err is a statement timeout of the server.
func isTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "57014"
}

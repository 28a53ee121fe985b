package lease_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

// The background renewal (the renewal loop's skip-locked statement, not
// Lease.Renew's) must not revive a grant that expired on the database
// clock, even though nobody took it over and the row still carries the
// holder's token: it reports the loss (Err), and the row stays expired.
// The lease expires here by SQL while the holder's local deadline is far
// off, as when the database's clock ran ahead of the holder's or an
// operator expired it; the fake clock then brings the loop to its next
// renewal.
func TestBackgroundRenewalDoesNotReviveAnExpiredGrant(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	fc := fakeclock.New(time.Now())
	var renewals, renewed atomic.Int64
	c := newClient(t, pool, lease.Config{Owner: "holder", TTL: 30 * time.Second, Clock: fc,
		Hooks: lease.Hooks{OnRenew: func(e lease.RenewEvent) {
			if e.Err == nil {
				renewals.Add(1)
				renewed.Add(int64(e.Renewed))
			}
		}}})
	l, err := c.TryAcquire(ctx, "job")
	pgtest.Must(t, err)
	if !fc.WaitPending(2, 5*time.Second) { // the deadline timer and the renewal loop
		t.Fatalf("fake clock has %d timers; want 2", fc.Pending())
	}
	tag, err := pool.Exec(ctx, `UPDATE leasehold.leases SET expires_at = clock_timestamp() - interval '1 second'
		WHERE name = 'job' AND token = $1`, int64(l.Token()))
	pgtest.Must(t, err)
	if tag.RowsAffected() != 1 {
		t.Fatal("the lease row was not expired")
	}
	fc.Advance(c.Config().RenewInterval) // the next renewal of all, well before the local deadline
	if !closedWithin(l.Done(), 10*time.Second) {
		t.Fatalf("after a background renewal of an expired grant (%d renewal statements, %d leases renewed): Err() = %v; want the loss reported",
			renewals.Load(), renewed.Load(), l.Err())
	}
	if err := l.Err(); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "renewal found the lease expired") {
		t.Fatalf("Err() = %v; want ErrLost found by the renewal", err)
	}
	if renewals.Load() == 0 || renewed.Load() != 0 {
		t.Fatalf("%d renewal statements renewed %d leases; want at least one statement, renewing none", renewals.Load(), renewed.Load())
	}
	var expired bool
	var token int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT expires_at <= clock_timestamp(), token FROM leasehold.leases WHERE name = 'job'`).Scan(&expired, &token))
	if !expired || token != int64(l.Token()) {
		t.Fatalf("after the renewal: expired %v, token %d; want the row left expired, token %v", expired, token, l.Token())
	}
}

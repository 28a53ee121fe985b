package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

// A holder whose clock runs slow keeps trusting its lease after the database
// expired it. Its next renewal must report the loss, not bring the expired
// grant back to life (even though nobody took it over meanwhile).
func TestRenewalDoesNotReviveAnExpiredGrant(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	c := newClient(t, pool, lease.Config{Owner: "slow", TTL: time.Second, Clock: fakeclock.New(time.Now())})
	l, err := c.TryAcquire(ctx, "job")
	pgtest.Must(t, err)
	for {
		info, err := c.Inspect(ctx, "job")
		pgtest.Must(t, err)
		if !info.Held() {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := l.Renew(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew of a grant the database expired = %v; want ErrLost", err)
	}
	if info, err := c.Inspect(ctx, "job"); err != nil || info.Held() {
		t.Fatalf("after renewing an expired grant: %+v, %v; want the row still expired", info, err)
	}
}

// The same owner superseded its own grant (an acquire retried after a lost
// reply): releasing the old grant must not free the new one. Release checks
// the token, not just the owner.
func TestStaleReleaseBySameOwnerKeepsNewerGrant(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	first := newClient(t, pool, lease.Config{Owner: "w1"})
	l1, err := first.TryAcquire(ctx, "job")
	pgtest.Must(t, err)
	retry := newClient(t, pool, lease.Config{Owner: "w1"})
	l2, err := retry.TryAcquire(ctx, "job")
	pgtest.Must(t, err)

	pgtest.Must(t, l1.Release(ctx)) // changes nothing: not an error
	info, err := retry.Inspect(ctx, "job")
	pgtest.Must(t, err)
	if !info.Held() || info.Token != l2.Token() {
		t.Fatalf("after releasing the superseded grant: %+v; want still held with token %v", info, l2.Token())
	}
	pgtest.Must(t, l2.Renew(ctx))
}

// An acquire whose request reaches the database only after the client gave
// up waiting for the reply: the grant commits, and the client's error must
// say that the outcome is unknown.
func TestAcquireWithLostReplyIsIndeterminate(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	// No liveness ping: on a loaded machine the idle connection could be
	// pinged into the blackhole instead of carrying the acquire.
	viaProxy, proxy := pgtest.ProxiedPool(t, url, func(c *pgxpool.Config) {
		c.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	})

	c := newClient(t, viaProxy, lease.Config{Owner: "unsure", MaxConns: 1})
	warm, err := c.TryAcquire(ctx, "warm-up") // connect and prepare the acquire statement
	pgtest.Must(t, err)
	pgtest.Must(t, warm.Release(ctx))

	proxy.Blackhole()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, acqErr := c.TryAcquire(short, "job")
	cancel()
	if acqErr == nil {
		t.Fatal("TryAcquire through a blackhole succeeded")
	}
	if !fence.IsIndeterminate(acqErr) {
		t.Errorf("TryAcquire whose reply never came = %v; want an *IndeterminateError", acqErr)
	}
	// The held request now reaches the database. When pgconn gave up it also
	// sent a cancel request, on a new connection: that stays held, or it
	// could race the request it cancels and make the outcome "not granted",
	// which is just as possible in production but shows nothing here.
	proxy.HealOpen()
	defer proxy.Heal()

	direct := newClient(t, pgtest.PoolURL(t, url), lease.Config{Owner: "observer"})
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		// The grant happened (the Client may already have freed it again as
		// an orphan, so it need not still be held).
		if info, err := direct.Inspect(ctx, "job"); err == nil && info.Owner == "unsure" {
			t.Logf("the grant committed after the client reported: %v", acqErr)
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the delayed acquire never reached the database: the test shows nothing")
		}
	}
}

package lease_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

func TestBackgroundRenewalKeepsLeasesInOneStatement(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	var mu sync.Mutex
	var events []lease.RenewEvent
	c := newClient(t, pool, lease.Config{TTL: time.Second, Hooks: lease.Hooks{OnRenew: func(e lease.RenewEvent) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}}})
	names := make([]string, 20)
	for i := range names {
		names[i] = "r/" + string(rune('a'+i))
	}
	ls, err := c.AcquireMany(ctx, names...)
	pgtest.Must(t, err)
	first, _ := c.Inspect(ctx, names[0])

	time.Sleep(2500 * time.Millisecond) // 2.5 TTLs
	for _, l := range ls {
		if l.Err() != nil {
			t.Fatalf("%s lost while renewing: %v", l.Name(), l.Err())
		}
	}
	now, _ := c.Inspect(ctx, names[0])
	if !now.Held() || !now.ExpiresAt.After(first.ExpiresAt) || now.Token != first.Token {
		t.Fatalf("after 2.5 TTLs: %+v (first %+v); want held, same token, later expiry", now, first)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) < 3 {
		t.Fatalf("%d renewal statements in 2.5 TTLs; want at least 3 (every TTL/3)", len(events))
	}
	for _, e := range events {
		if e.Err != nil || e.Count != len(names) || e.Renewed != len(names) {
			t.Fatalf("renewal event %+v; want one statement renewing all %d leases", e, len(names))
		}
	}
}

// pausedHolder acquires "job" with a Client on a fake clock that the test
// does not advance: like a process stopped by a GC pause, SIGSTOP or VM
// migration, it neither renews nor notices its deadline. Another owner then
// takes the lease after it expires in the database.
func pausedHolder(t *testing.T) (fc *fakeclock.Clock, paused *lease.Lease, next *lease.Lease, pausedAt time.Time) {
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	fc = fakeclock.New(time.Now())
	a := newClient(t, pool, lease.Config{Owner: "paused", TTL: time.Second, Clock: fc})
	la, err := a.TryAcquire(ctx, "job")
	for i := 0; i < 20 && (fence.IsIndeterminate(err) || errors.Is(err, lease.ErrHeld) || errors.Is(err, context.DeadlineExceeded)); i++ {
		// A statement timeout (378ms at this TTL) on an overloaded
		// machine: of the acquire (the Client frees the orphan grant, if
		// any, and keeps the name reserved, ErrHeld, until it has), or of
		// the token guard's read before the Client's first grant (no
		// grant made; the next acquire runs the guard again).
		time.Sleep(100 * time.Millisecond)
		la, err = a.TryAcquire(ctx, "job")
	}
	pgtest.Must(t, err)
	pausedAt = time.Now()
	if !fc.WaitPending(2, 5*time.Second) { // the deadline timer and the renewal loop
		t.Fatalf("fake clock has %d timers; want 2", fc.Pending())
	}
	b := newClient(t, pool, lease.Config{Owner: "next", TTL: time.Second, MaxBackoff: 50 * time.Millisecond})
	lb, err := b.Acquire(ctx, "job")
	pgtest.Must(t, err)
	if lb.Token() <= la.Token() {
		t.Fatalf("takeover token %v; want > %v", lb.Token(), la.Token())
	}
	if la.Err() != nil {
		t.Fatalf("the paused holder noticed something while paused: %v", la.Err())
	}
	return fc, la, lb, pausedAt
}

func TestPausedHolderLosesAtItsDeadlineOnResume(t *testing.T) {
	t.Parallel()
	fc, la, _, pausedAt := pausedHolder(t)
	// Resume: the local monotonic clock jumps by the length of the pause.
	fc.Advance(time.Since(pausedAt))
	if !closedWithin(la.Done(), 5*time.Second) {
		t.Fatal("Done not closed after resuming past the local deadline")
	}
	if !errors.Is(la.Err(), lease.ErrLost) || !strings.Contains(la.Err().Error(), "deadline") {
		t.Fatalf("Err = %v; want ErrLost by local deadline", la.Err())
	}
}

func TestPausedHolderLosesAtFirstRenewalOnResume(t *testing.T) {
	t.Parallel()
	fc, la, lb, _ := pausedHolder(t)
	// Resume with only one renew interval of local time passing (a clock
	// that stood still): the renewal finds the lease granted to another.
	fc.Advance(la.Deadline().Sub(fc.Now()) / 2)
	if fc.Now().After(la.Deadline()) {
		t.Fatal("test bug: advanced past the deadline")
	}
	if !closedWithin(la.Done(), 5*time.Second) {
		t.Fatal("Done not closed by the first renewal after resuming")
	}
	if !errors.Is(la.Err(), lease.ErrLost) || !strings.Contains(la.Err().Error(), "another owner") {
		t.Fatalf("Err = %v; want ErrLost found by renewal", la.Err())
	}
	// The stale holder's release must not free the new owner's lease.
	pgtest.Must(t, la.Release(pgtest.Context(t)))
	if lb.Renew(pgtest.Context(t)) != nil {
		t.Fatalf("new owner lost its lease after the stale holder released: %v", lb.Err())
	}
}

func TestDatabaseGoneLeaseLostByLocalDeadlineThenRecovers(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	cl := pgtest.Cluster(t)
	pool := pgtest.PoolURL(t, cl.URL("postgres"))
	pgtest.Must(t, pgtest.Open(t, pool, leasehold.Config{}).Migrate(ctx))
	var losses sync.WaitGroup
	losses.Add(1)
	c := newClient(t, pool, lease.Config{TTL: 2 * time.Second, MaxBackoff: 100 * time.Millisecond,
		Hooks: lease.Hooks{OnLoss: func(lease.LossEvent) { losses.Done() }}})
	l, err := c.TryAcquire(ctx, "job")
	pgtest.Must(t, err)

	pgtest.Must(t, cl.Stop())
	deadline := l.Deadline()
	if !closedWithin(l.Done(), 10*time.Second) {
		t.Fatal("Done not closed with the database gone")
	}
	lostAt := time.Now()
	if lostAt.Before(deadline) {
		t.Fatalf("lost at %v, before the local deadline %v, with no evidence of loss", lostAt, deadline)
	}
	t.Logf("lost %v after the local deadline", lostAt.Sub(deadline))
	if !errors.Is(l.Err(), lease.ErrLost) {
		t.Fatalf("Err = %v; want ErrLost", l.Err())
	}
	losses.Wait() // the loss hook ran once

	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := c.Acquire(short, "job"); err == nil || errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire with the database down = %v; want a connection error", err)
	}

	pgtest.Must(t, cl.Restart(ctx))
	l2, err := c.Acquire(ctx, "job")
	pgtest.Must(t, err)
	if l2.Token() <= l.Token() {
		t.Fatalf("token after the outage %v; want > %v", l2.Token(), l.Token())
	}
}

func TestDeleteExpiredKeepsTokensIncreasing(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	c := newClient(t, pool, lease.Config{})
	l, err := c.TryAcquire(ctx, "gc")
	pgtest.Must(t, err)
	if n, err := c.DeleteExpired(ctx, 0); err != nil || n != 0 {
		t.Fatalf("DeleteExpired with the lease held = %d, %v; want 0", n, err)
	}
	pgtest.Must(t, l.Release(ctx))
	if n, err := c.DeleteExpired(ctx, 0); err != nil || n != 1 {
		t.Fatalf("DeleteExpired = %d, %v; want 1", n, err)
	}
	if _, err := c.Inspect(ctx, "gc"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Inspect after DeleteExpired = %v; want ErrNotFound", err)
	}
	l2, err := c.TryAcquire(ctx, "gc")
	pgtest.Must(t, err)
	if l2.Token() <= l.Token() {
		t.Fatalf("token after clean-up %v; want > %v", l2.Token(), l.Token())
	}
}

// A network partition: bytes stop flowing (no reset, no error), so the
// renewal hangs instead of failing. The local deadline must still end the
// lease, and after the partition heals the Client acquires again.
func TestPartitionedHolderLosesByDeadlineAndRecovers(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	pool, proxy := pgtest.ProxiedPool(t, url)

	c := newClient(t, pool, lease.Config{Owner: "partitioned", TTL: 2 * time.Second, MaxBackoff: 100 * time.Millisecond})
	l, err := c.TryAcquire(ctx, "job")
	pgtest.Must(t, err)
	proxy.Blackhole()
	if !closedWithin(l.Done(), 10*time.Second) {
		t.Fatal("Done not closed during a partition")
	}
	if !errors.Is(l.Err(), lease.ErrLost) || time.Now().Before(l.Deadline()) {
		t.Fatalf("Err = %v at %v (deadline %v); want ErrLost at the deadline", l.Err(), time.Now(), l.Deadline())
	}
	// Meanwhile, another owner with a healthy connection takes over.
	other := newClient(t, pgtest.PoolURL(t, url), lease.Config{Owner: "other", MaxBackoff: 100 * time.Millisecond})
	lo, err := other.Acquire(ctx, "job")
	pgtest.Must(t, err)
	pgtest.Must(t, lo.Release(ctx))

	proxy.Heal()
	l2, err := c.Acquire(ctx, "job")
	pgtest.Must(t, err)
	if l2.Token() <= lo.Token() {
		t.Fatalf("token after healing %v; want > %v", l2.Token(), lo.Token())
	}
}

// After an acquire whose outcome is unknown, a grant to this owner that no
// *Lease holds would block everyone until it expired. The Client frees it.
func TestIndeterminateAcquireFreesOrphanGrant(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	proxied, proxy := pgtest.ProxiedPool(t, url)
	direct := pgtest.PoolURL(t, url)

	ttl := 20 * time.Second // far longer than the test: expiry cannot explain a release
	// The grant whose reply was "lost": committed in the database under owner w.
	committed := newClient(t, direct, lease.Config{Owner: "w", TTL: ttl})
	orphan, err := committed.TryAcquire(ctx, "job")
	pgtest.Must(t, err)

	c := newClient(t, proxied, lease.Config{Owner: "w", TTL: ttl, StatementTimeout: 2 * time.Second})
	// Open a connection through the proxy, and let the Client's first
	// grant run its token guard (one read, before any grant).
	warm, err := c.TryAcquire(ctx, "warm-up")
	pgtest.Must(t, err)
	pgtest.Must(t, warm.Release(ctx))
	proxy.Blackhole()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = c.TryAcquire(short, "job")
	cancel()
	if !fence.IsIndeterminate(err) {
		t.Fatalf("TryAcquire through a partition = %v; want an indeterminate error", err)
	}
	proxy.Heal()

	observer := newClient(t, direct, lease.Config{Owner: "observer"})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		info, err := observer.Inspect(ctx, "job")
		pgtest.Must(t, err)
		if !info.Held() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the orphan grant %+v is still held 10s after the indeterminate acquire", info)
		}
	}
	if err := orphan.Renew(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew of the freed grant = %v; want ErrLost", err)
	}
}

// A database that does not exist refuses the connection (FATAL 3D000)
// before anything is sent: Acquire reports it at once, as a known error,
// instead of retrying until its context ends.
func TestAcquireOnAMissingDatabaseFailsAtOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(pgtest.Context(t), time.Minute)
	defer cancel()
	url := pgtest.WithDatabase(pgtest.MigratedURL(t), "lh_no_such_database")
	pool, err := pgxpool.New(ctx, url)
	pgtest.Must(t, err)
	t.Cleanup(pool.Close)
	c := newClient(t, pool, lease.Config{MaxBackoff: 50 * time.Millisecond})
	_, err = c.Acquire(ctx, "x")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "3D000" || fence.IsIndeterminate(err) || ctx.Err() != nil {
		t.Fatalf("Acquire on a missing database = %v (context: %v); want the server's 3D000, known, before the context ends",
			err, ctx.Err())
	}
}

package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

func TestTryAcquireHeldReleaseAndTokenOrder(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	a := newClient(t, pool, lease.Config{Owner: "a"})
	b := newClient(t, pool, lease.Config{Owner: "b"})

	la, err := a.TryAcquire(ctx, "job")
	pgtest.Must(t, err)
	if !la.Token().Valid() || la.Owner() != "a" || la.Name() != "job" || la.Err() != nil {
		t.Fatalf("lease = token %v owner %q name %q err %v", la.Token(), la.Owner(), la.Name(), la.Err())
	}
	if _, err := b.TryAcquire(ctx, "job"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second owner TryAcquire = %v; want ErrHeld", err)
	}
	if _, err := a.TryAcquire(ctx, "job"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("same client TryAcquire of a held name = %v; want ErrHeld", err)
	}
	info, err := b.Inspect(ctx, "job")
	pgtest.Must(t, err)
	if info.Owner != "a" || info.Token != la.Token() || !info.Held() || info.Age() < 0 {
		t.Fatalf("Inspect = %+v; want held by a with token %v", info, la.Token())
	}

	pgtest.Must(t, la.Release(ctx))
	if !closedWithin(la.Done(), time.Second) || !errors.Is(la.Err(), lease.ErrReleased) {
		t.Fatalf("after Release: Err = %v; want ErrReleased and Done closed", la.Err())
	}
	pgtest.Must(t, la.Release(ctx)) // idempotent

	lb, err := b.TryAcquire(ctx, "job")
	pgtest.Must(t, err)
	if lb.Token() <= la.Token() {
		t.Fatalf("token after release = %v; want > %v", lb.Token(), la.Token())
	}
	// A stale release (a's old token) must not free b's lease.
	pgtest.Must(t, la.Release(ctx))
	if info, _ := b.Inspect(ctx, "job"); !info.Held() || info.Owner != "b" {
		t.Fatalf("after a stale release: %+v; want still held by b", info)
	}
	if _, err := b.Inspect(ctx, "never"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Inspect(never) = %v; want ErrNotFound", err)
	}
}

// An acquire whose reply was lost is retried by the same owner: it must
// succeed (idempotent for the owner) with a new token that fences the old.
func TestSameOwnerRetrySupersedesWithNewToken(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	first := newClient(t, pool, lease.Config{Owner: "w1"})
	l1, err := first.TryAcquire(ctx, "job")
	pgtest.Must(t, err)

	retry := newClient(t, pool, lease.Config{Owner: "w1"}) // same owner, reply of l1 "lost"
	l2, err := retry.TryAcquire(ctx, "job")
	pgtest.Must(t, err)
	if l2.Token() <= l1.Token() {
		t.Fatalf("retry token %v; want > %v", l2.Token(), l1.Token())
	}
	// The superseded grant learns it is lost at its next renewal.
	if err := l1.Renew(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew of superseded grant = %v; want ErrLost", err)
	}
	if !closedWithin(l1.Done(), time.Second) {
		t.Fatal("superseded grant's Done not closed")
	}
	pgtest.Must(t, l2.Renew(ctx))
}

func TestAcquireWaitsForReleaseAndHonoursContext(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	a := newClient(t, pool, lease.Config{Owner: "a"})
	b := newClient(t, pool, lease.Config{Owner: "b", MaxBackoff: 50 * time.Millisecond})
	la, err := a.Acquire(ctx, "job")
	pgtest.Must(t, err)
	// b's token guard (run before its first grant) is not what the short
	// deadline below measures: on a loaded machine it once took the whole
	// 300ms, and Acquire never saw the lease held.
	pgtest.Must(t, b.GuardTokens(ctx, 0))

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = b.Acquire(short, "job")
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire past ctx deadline = %v; want DeadlineExceeded and ErrHeld", err)
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Fatalf("Acquire returned %v after its ctx deadline of 300ms", waited)
	}

	got := make(chan *lease.Lease, 1)
	go func() {
		lb, err := b.Acquire(ctx, "job")
		if err != nil {
			t.Errorf("Acquire: %v", err)
		}
		got <- lb
	}()
	time.Sleep(100 * time.Millisecond)
	pgtest.Must(t, la.Release(ctx))
	lb := <-got
	if lb == nil || lb.Token() <= la.Token() {
		t.Fatalf("Acquire after release: %v", lb)
	}
}

func TestAcquireManyIsAllOrNothingInCallerOrder(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	a := newClient(t, pool, lease.Config{Owner: "a"})
	b := newClient(t, pool, lease.Config{Owner: "b"})
	lb, err := b.TryAcquire(ctx, "m/b")
	pgtest.Must(t, err)

	if _, err := a.TryAcquireMany(ctx, "m/c", "m/a", "m/b"); !errors.Is(err, lease.ErrHeld) || !strings.Contains(err.Error(), "m/b") {
		t.Fatalf("TryAcquireMany with one held = %v; want ErrHeld naming m/b", err)
	}
	for _, n := range []string{"m/a", "m/c"} { // rolled back: nothing taken
		if info, err := a.Inspect(ctx, n); err == nil && info.Held() {
			t.Fatalf("%s held after a failed all-or-nothing acquire: %+v", n, info)
		}
	}
	pgtest.Must(t, lb.Release(ctx))
	ls, err := a.AcquireMany(ctx, "m/c", "m/a", "m/b")
	pgtest.Must(t, err)
	for i, want := range []string{"m/c", "m/a", "m/b"} {
		if ls[i].Name() != want || ls[i].Err() != nil {
			t.Fatalf("lease %d = %q (err %v); want %q held", i, ls[i].Name(), ls[i].Err(), want)
		}
		if info, _ := b.Inspect(ctx, want); info.Owner != "a" || info.Token != ls[i].Token() {
			t.Fatalf("%s in database = %+v; want owner a token %v", want, info, ls[i].Token())
		}
	}
	if len(a.Held()) != 3 {
		t.Fatalf("Held() = %d leases; want 3", len(a.Held()))
	}
}

func TestBadInputGetsTypedErrors(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	c := newClient(t, pool, lease.Config{})
	for _, name := range []string{"", strings.Repeat("x", lease.MaxNameLen+1), "nul\x00byte", "bad\xffutf8"} {
		if _, err := c.TryAcquire(ctx, name); !errors.Is(err, lease.ErrInvalidName) {
			t.Errorf("TryAcquire(%q) = %v; want ErrInvalidName", name, err)
		}
		if _, err := c.Acquire(ctx, name); !errors.Is(err, lease.ErrInvalidName) {
			t.Errorf("Acquire(%q) = %v; want ErrInvalidName at once", name, err)
		}
	}
	if _, err := c.TryAcquireMany(ctx, "x", "y", "x"); !errors.Is(err, lease.ErrInvalidName) {
		t.Errorf("TryAcquireMany with a duplicate = %v; want ErrInvalidName", err)
	}
	if _, err := c.TryAcquireMany(ctx); !errors.Is(err, lease.ErrInvalidName) {
		t.Errorf("TryAcquireMany() = %v; want ErrInvalidName", err)
	}
	if _, err := c.DeleteExpired(ctx, -time.Second); !errors.Is(err, lease.ErrInvalidConfig) {
		t.Errorf("DeleteExpired(-1s) = %v; want ErrInvalidConfig", err)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none") // lazy: no I/O
	pgtest.Must(t, err)
	defer pool.Close()
	for _, tc := range []struct {
		field string
		cfg   lease.Config
	}{
		{"TTL", lease.Config{TTL: -time.Second}},
		{"TTL", lease.Config{TTL: 500 * time.Millisecond}},
		{"RenewInterval", lease.Config{TTL: 3 * time.Second, RenewInterval: 3 * time.Second}},
		{"RenewInterval", lease.Config{TTL: 3 * time.Second, RenewInterval: 2900 * time.Millisecond}},
		{"SafetyMargin", lease.Config{TTL: 2 * time.Second, SafetyMargin: 2 * time.Second}},
		{"StatementTimeout", lease.Config{TTL: 2 * time.Second, StatementTimeout: 5 * time.Second}},
		{"MaxBackoff", lease.Config{MinBackoff: time.Second, MaxBackoff: time.Millisecond}},
		{"MaxConns", lease.Config{MaxConns: -1}},
		{"Owner", lease.Config{Owner: strings.Repeat("o", 300)}},
	} {
		_, err := lease.New(pgtest.Open(t, pool, leasehold.Config{}), tc.cfg)
		var ce *lease.ConfigError
		if !errors.Is(err, lease.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("New(%+v) = %v; want *ConfigError for %s", tc.cfg, err, tc.field)
		}
	}
	if _, err := lease.New(nil, lease.Config{}); !errors.Is(err, lease.ErrInvalidConfig) {
		t.Errorf("New(nil db) = %v; want ErrInvalidConfig", err)
	}
	c, err := lease.New(pgtest.Open(t, pool, leasehold.Config{}), lease.Config{})
	pgtest.Must(t, err)
	defer c.Close(context.Background())
	cfg := c.Config()
	if cfg.TTL != 15*time.Second || cfg.RenewInterval != 5*time.Second || cfg.SafetyMargin != 1500*time.Millisecond ||
		cfg.StatementTimeout != 5*time.Second || cfg.MaxConns != 4 || cfg.Owner == "" {
		t.Fatalf("defaults = %+v", cfg)
	}
}

func TestUnmigratedDatabaseAndClosedClient(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	bare := pgtest.PoolURL(t, pgtest.URL(t)) // never migrated
	c := newClient(t, bare, lease.Config{})
	start := time.Now()
	if _, err := c.Acquire(ctx, "x"); !errors.Is(err, leasehold.ErrNotMigrated) {
		t.Fatalf("Acquire on an unmigrated database = %v; want ErrNotMigrated", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("Acquire retried a permanent error")
	}

	pool := pgtest.Pool(t)
	d := newClient(t, pool, lease.Config{})
	l, err := d.TryAcquire(ctx, "x")
	pgtest.Must(t, err)
	pgtest.Must(t, d.Close(ctx))
	if !closedWithin(l.Done(), time.Second) || !errors.Is(l.Err(), lease.ErrReleased) {
		t.Fatalf("lease after Close: %v; want released", l.Err())
	}
	if _, err := d.TryAcquire(ctx, "y"); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("TryAcquire after Close = %v; want ErrClosed", err)
	}
	e := newClient(t, pool, lease.Config{})
	if info, err := e.Inspect(ctx, "x"); err != nil || info.Held() {
		t.Fatalf("after Close the lease must be free: %+v, %v", info, err)
	}
}

func TestTryAcquireAnyTakesWhatIsFreeAndInspectMany(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	a := newClient(t, pool, lease.Config{Owner: "a"})
	b := newClient(t, pool, lease.Config{Owner: "b"})
	held, err := b.TryAcquire(ctx, "any/2")
	pgtest.Must(t, err)
	mine, err := a.TryAcquire(ctx, "any/3")
	pgtest.Must(t, err)

	ls, err := a.TryAcquireAny(ctx, "any/1", "any/2", "any/3", "any/4")
	pgtest.Must(t, err)
	if len(ls) != 2 || ls[0].Name() != "any/1" || ls[1].Name() != "any/4" {
		t.Fatalf("TryAcquireAny granted %v; want any/1 and any/4 (any/2 held by b, any/3 already mine)", ls)
	}
	if mine.Err() != nil {
		t.Fatalf("TryAcquireAny superseded a lease this client already held: %v", mine.Err())
	}
	if ls, err := a.TryAcquireAny(ctx, "any/2"); err != nil || len(ls) != 0 {
		t.Fatalf("TryAcquireAny of a held name = %v, %v; want nothing, no error", ls, err)
	}
	infos, err := a.InspectMany(ctx, "any/4", "any/2", "none")
	pgtest.Must(t, err)
	if len(infos) != 2 || infos[0].Name != "any/4" || infos[0].Owner != "a" || infos[1].Owner != "b" || infos[1].Token != held.Token() {
		t.Fatalf("InspectMany = %+v", infos)
	}
}

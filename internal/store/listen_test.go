package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
)

// sub records what a store.Subscriber is told.
type sub struct {
	store.Subscriber
	mu        sync.Mutex
	payloads  []string
	connected int
	failed    []int
}

func newSub(channel string) *sub {
	s := &sub{}
	s.Subscriber = store.Subscriber{Channel: channel,
		Notify:    func(p string) { s.mu.Lock(); s.payloads = append(s.payloads, p); s.mu.Unlock() },
		Connected: func() { s.mu.Lock(); s.connected++; s.mu.Unlock() },
		Failed:    func(_ error, attempt int) { s.mu.Lock(); s.failed = append(s.failed, attempt); s.mu.Unlock() },
		Delay:     func(int) time.Duration { return 10 * time.Millisecond }}
	return s
}

func (s *sub) read() (payloads []string, connected int, failed []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.payloads...), s.connected, append([]int(nil), s.failed...)
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for start := time.Now(); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("after 10s: %s", what)
		}
	}
}

// listening counts the sessions of the test's database that listen.
func listening(t *testing.T, admin *pgxpool.Pool) int {
	var n int
	pgtest.Must(t, admin.QueryRow(pgtest.Context(t), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`).Scan(&n))
	return n
}

// The subscribers of one pool and schema share one listening session, each
// told its own channel's notifications only, and all told again after a
// reconnect; the last to leave closes it. A subscriber of another pool gets
// a session of its own (the control that the count sees sessions).
func TestListenSharesOneSessionPerPool(t *testing.T) {
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	pool, other, admin := pgtest.PoolURL(t, url), pgtest.PoolURL(t, url), pgtest.PoolURL(t, url)
	schema := store.DefaultSchema
	jobs, parts := newSub(store.QueueChannel(schema)), newSub(store.PartitionChannel(schema))
	stopJobs := store.Listen(store.Session{Pool: pool}, schema, &jobs.Subscriber)
	stopParts := store.Listen(store.Session{Pool: pool}, schema, &parts.Subscriber)
	eventually(t, "both subscribers connected", func() bool {
		_, a, _ := jobs.read()
		_, b, _ := parts.read()
		return a == 1 && b == 1
	})
	if n := listening(t, admin); n != 1 {
		t.Fatalf("%d listening sessions for two subscribers of one pool; want 1", n)
	}
	elsewhere := newSub(store.QueueChannel(schema))
	stopElsewhere := store.Listen(store.Session{Pool: other}, schema, &elsewhere.Subscriber)
	eventually(t, "a subscriber of another pool listening on its own session", func() bool { return listening(t, admin) == 2 })
	stopElsewhere()

	_, err := admin.Exec(ctx, `SELECT pg_notify($1, 'job'), pg_notify($2, 'group')`, jobs.Channel, parts.Channel)
	pgtest.Must(t, err)
	eventually(t, "each subscriber told its channel's notification", func() bool {
		a, _, _ := jobs.read()
		b, _, _ := parts.read()
		return len(a) == 1 && len(b) == 1
	})
	if a, _, _ := jobs.read(); a[0] != "job" {
		t.Fatalf("queue channel's subscriber got %q; want [job]", a)
	}
	if b, _, _ := parts.read(); b[0] != "group" {
		t.Fatalf("partition channel's subscriber got %q; want [group]", b)
	}

	// The session dies: both are told of the failure and connected again.
	_, err = admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`)
	pgtest.Must(t, err)
	eventually(t, "both subscribers reconnected", func() bool {
		_, a, fa := jobs.read()
		_, b, fb := parts.read()
		return a == 2 && b == 2 && len(fa) == 1 && len(fb) == 1 && fa[0] == 1
	})

	// One leaves: the other is still told; the last closes the session.
	stopJobs()
	_, err = admin.Exec(ctx, `SELECT pg_notify($1, 'job'), pg_notify($2, 'group2')`, jobs.Channel, parts.Channel)
	pgtest.Must(t, err)
	eventually(t, "the remaining subscriber told", func() bool { b, _, _ := parts.read(); return len(b) == 2 })
	if a, _, _ := jobs.read(); len(a) != 1 {
		t.Fatalf("a subscriber that left was told %q", a)
	}
	stopParts()
	eventually(t, "no listening session once the last subscriber left", func() bool { return listening(t, admin) == 0 })
}

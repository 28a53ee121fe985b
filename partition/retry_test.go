package partition_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/logtest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// A claim the server refuses (here the lease table is locked in SHARE
// mode, so the claim's insert waits past its statement timeout) is tried
// again after a short backoff, not at the next scheduled read, which while
// listening is a TTL away (a minute here): the member holds its
// partitions within seconds of the lock's end. (64 workers starting
// together on a loaded server had claims time out, and sat out the TTL.)
func TestFailedClaimIsTriedAgainSoon(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	unlock := lockTable(t, pool, "leasehold.leases")
	failed := make(chan struct{})
	var once sync.Once
	startWith(t, pool, partition.Config{Partitions: 4, ID: "a", PollInterval: 200 * time.Millisecond,
		Run: func(ctx context.Context, _ partition.Ownership) { <-ctx.Done() },
		Lease: lease.Config{TTL: time.Minute, StatementTimeout: 300 * time.Millisecond,
			Hooks: lease.Hooks{OnAcquire: func(e lease.AcquireEvent) {
				if e.Err != nil {
					once.Do(func() { close(failed) })
				}
			}}}})
	select {
	case <-failed:
	case <-time.After(20 * time.Second):
		t.Fatal("no claim failed while the lease table was locked")
	}
	unlock()
	if d := converged(t, pool, []string{"a"}, 30*time.Second); d > 5*time.Second {
		t.Errorf("the member held its partitions %v after the lock's end; want a retry within seconds, not at the next read (a TTL, 1m)", d)
	}
}

// A heartbeat the server holds up past the statement timeout (here the
// membership table is locked in SHARE mode for 5/6 of a TTL, right after
// a heartbeat) times out, is tried again soon, and is then given until the
// membership would expire: the membership never lapses (the same
// incarnation, the same join time), so the group does not rebalance around
// a live member. The timed-out heartbeat in the log is the control that
// the lock held heartbeats up past the statement timeout.
func TestSlowHeartbeatKeepsTheMembership(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	rec, log := logtest.New(slog.LevelWarn)
	// Heartbeats every 2 s: without the retry, the ones at 2 s and 4.3 s
	// after the lock time out and the next, at 6.6 s, finds the
	// membership lapsed at 6 s.
	const ttl = 6 * time.Second
	m, err := partition.New(pgtest.Open(t, pool, leasehold.Config{Logger: log}), partition.Config{Group: "g", Partitions: 2, ID: "a",
		Run:   func(ctx context.Context, _ partition.Ownership) { <-ctx.Done() },
		Lease: lease.Config{TTL: ttl, StatementTimeout: 300 * time.Millisecond}})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(ctx))
	t.Cleanup(func() { stopMember(t, m) })
	member := func() (joined, beat time.Time, inc string) {
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT joined_at, heartbeat_at, incarnation FROM leasehold.members
			WHERE group_name = 'g' AND id = 'a'`).Scan(&joined, &beat, &inc))
		return joined, beat, inc
	}
	joined, beat, inc := member()
	for _, b, _ := member(); b.Equal(beat); _, b, _ = member() { // just after a heartbeat
		time.Sleep(5 * time.Millisecond)
	}
	unlock := lockTable(t, pool, "leasehold.members")
	time.Sleep(ttl * 5 / 6)
	unlock()
	time.Sleep(ttl / 2) // the held heartbeat commits; another one follows
	j, b, i := member()
	if i != inc || !j.Equal(joined) || !b.After(beat) {
		t.Errorf("membership after the slow heartbeats: incarnation %s, joined %v, heartbeat %v; want %s, %v, after %v (it lapsed and was joined again)",
			i, j, b, inc, joined, beat)
	}
	timedOut := false
	for _, r := range rec.Records() {
		timedOut = timedOut || r.Message == "partition: heartbeat failed"
	}
	if !timedOut {
		t.Error("no heartbeat timed out while the membership table was locked: the test shows nothing")
	}
}

// lockTable locks table in SHARE mode (reads go on, writes wait) in a
// transaction of its own until unlock, or the test's end.
func lockTable(t *testing.T, pool *pgxpool.Pool, table string) (unlock func()) {
	t.Helper()
	ctx := pgtest.Context(t)
	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctx, `LOCK TABLE `+table+` IN SHARE MODE`)
	pgtest.Must(t, err)
	return func() { pgtest.Must(t, tx.Rollback(ctx)) }
}

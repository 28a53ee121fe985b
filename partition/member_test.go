package partition_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/internal/history"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

func TestJoinLeaveConvergeWithGracefulHandoff(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	pgtest.Must(t, history.Install(pgtest.Context(t), pool, ""))
	rec := &recorder{}
	const n = 16
	a := startMember(t, pool, "worker-1", n, rec.run("worker-1"))
	startMember(t, pool, "worker-2", n, rec.run("worker-2"))
	startMember(t, pool, "worker-3", n, rec.run("worker-3"))
	t.Logf("3 members: converged in %v", converged(t, pool, []string{"worker-1", "worker-2", "worker-3"}, 15*time.Second))

	startMember(t, pool, "worker-4", n, rec.run("worker-4"))
	join := converged(t, pool, []string{"worker-1", "worker-2", "worker-3", "worker-4"}, 15*time.Second)
	stopMember(t, a)
	leave := converged(t, pool, []string{"worker-2", "worker-3", "worker-4"}, 15*time.Second)
	t.Logf("join converged in %v, graceful leave in %v", join, leave)
	// Graceful changes need no lease to expire: well under one TTL.
	if join >= testTTL || leave >= testTTL {
		t.Errorf("graceful join %v / leave %v took a TTL (%v) or more: a handoff waited for expiry", join, leave, testTTL)
	}

	// Per partition, Run spans of successive grants never overlap (the old
	// Run returned before the lease was released), tokens increase, and
	// every end before the test's own stops was a graceful handoff.
	spans := rec.snapshot()
	byPart := map[int][]span{}
	for _, s := range spans {
		byPart[s.partition] = append(byPart[s.partition], s)
	}
	handoffs := 0
	for p, ss := range byPart {
		slices.SortFunc(ss, func(a, b span) int { return a.start.Compare(b.start) })
		for i := 1; i < len(ss); i++ {
			prev, cur := ss[i-1], ss[i]
			if prev.end.IsZero() || cur.start.Before(prev.end) {
				t.Fatalf("partition %d: %s's Run (token %v) started before %s's (token %v) returned",
					p, cur.member, cur.token, prev.member, prev.token)
			}
			if cur.token <= prev.token {
				t.Fatalf("partition %d: token %v after %v", p, cur.token, prev.token)
			}
			if !errors.Is(prev.cause, partition.ErrHandoff) && !errors.Is(prev.cause, partition.ErrStopped) {
				t.Fatalf("partition %d: grant ended by %v; want a graceful handoff", p, prev.cause)
			}
			handoffs++
		}
	}
	if handoffs == 0 {
		t.Fatal("no partition changed hands: the test proves nothing")
	}
	vs, err := history.Load(pgtest.Context(t), pool, "")
	pgtest.Must(t, err)
	if r := history.Check(vs); !r.OK() || r.Superseded != 0 {
		t.Fatalf("lease history: %+v", r)
	}
}

func TestPartitionCountIsFixedPerGroup(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	startMember(t, pool, "worker-1", 8, (&recorder{}).run("worker-1"))
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "g", Partitions: 16, ID: "worker-2", Run: (&recorder{}).run("")})
	pgtest.Must(t, err)
	err = m.Start(pgtest.Context(t))
	var ce *partition.CountError
	if !errors.Is(err, partition.ErrPartitionCount) || !errors.As(err, &ce) || ce.Stored != 8 || ce.Configured != 16 {
		t.Fatalf("Start with another partition count = %v; want *CountError 16 vs 8", err)
	}
}

func TestDuplicateLiveMemberIDIsRefused(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	startMember(t, pool, "worker-1", 4, (&recorder{}).run("worker-1"))
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "g", Partitions: 4, ID: "worker-1", Run: (&recorder{}).run("")})
	pgtest.Must(t, err)
	if err := m.Start(pgtest.Context(t)); !errors.Is(err, partition.ErrDuplicateMember) {
		t.Fatalf("Start with a live member's id = %v; want ErrDuplicateMember", err)
	}
}

func TestConfigErrors(t *testing.T) {
	pool := pgtest.Pool(t)
	run := (&recorder{}).run("")
	for _, cfg := range []partition.Config{
		{Partitions: 4, Run: run},
		{Group: "g", Partitions: 0, Run: run},
		{Group: "g", Partitions: partition.MaxPartitions + 1, Run: run},
		{Group: "g", Partitions: 4},
		{Group: "g", Partitions: 4, Run: run, PollInterval: -time.Second},
	} {
		if _, err := partition.New(pgtest.DBOn(t, pool), cfg); !errors.Is(err, partition.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v; want ErrInvalidConfig", cfg, err)
		}
	}
	if _, err := partition.Inspect(pgtest.Context(t), pgtest.DBOn(t, pool), "nope"); !errors.Is(err, partition.ErrGroupNotFound) {
		t.Errorf("Inspect(unknown group) = %v; want ErrGroupNotFound", err)
	}
}

// blockedMember returns a member of group "g" (TTL 1s), not started, and
// a transaction that ran block (rolled back when the test ends).
func blockedMember(t *testing.T, block string) (*partition.Member, pgx.Tx) {
	t.Helper()
	pool := pgtest.Pool(t)
	ctx := pgtest.Context(t)
	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctx, block)
	pgtest.Must(t, err)
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "g", Partitions: 4, ID: "worker-1",
		Run: (&recorder{}).run("worker-1"), Lease: lease.Config{TTL: time.Second}})
	pgtest.Must(t, err)
	return m, tx
}

// startBlocked starts a member of group "g" (TTL 1s: the member pool's
// statement and lock timeouts are 333 ms) while a transaction that ran
// block holds the groups table or a row of it for hold, then ends that
// transaction (commit or not), and returns Start's error. It fails the
// test if Start returns while blocked.
func startBlocked(t *testing.T, block string, hold time.Duration, commit bool) error {
	t.Helper()
	ctx := pgtest.Context(t)
	m, tx := blockedMember(t, block)
	t.Cleanup(func() { stopMember(t, m) })
	started := make(chan error, 1)
	go func() { started <- m.Start(ctx) }()
	select {
	case err := <-started:
		t.Fatalf("Start returned while blocked by %q: %v", block, err)
	case <-time.After(hold):
	}
	if commit {
		pgtest.Must(t, tx.Commit(ctx))
	} else {
		pgtest.Must(t, tx.Rollback(ctx))
	}
	return <-started
}

// Start waits for a concurrent creator of the group longer than one renew
// interval (the member pool's statement and lock timeout): a loaded server
// or a slow commit must not fail Start, which its ctx bounds instead.
func TestStartWaitsForConcurrentGroupCreator(t *testing.T) {
	t.Parallel()
	// The creator's row lock, held for several renew intervals.
	if err := startBlocked(t, `INSERT INTO leasehold.groups (name, partitions) VALUES ('g', 4)`, time.Second, true); err != nil {
		t.Fatalf("Start after a slow concurrent creator: %v", err)
	}
}

// Start tries its group creation again when the server times it out
// before the creation's own timeouts apply (here: preparing its statements
// waits for a lock on the groups table past the member pool's lock
// timeout, a third of the TTL).
func TestStartRetriesAGroupCreationTimedOutByTheServer(t *testing.T) {
	t.Parallel()
	if err := startBlocked(t, `LOCK TABLE leasehold.groups IN ACCESS EXCLUSIVE MODE`, 600*time.Millisecond, false); err != nil {
		t.Fatalf("Start after the lock was released: %v", err)
	}
}

// Start tries its join (the first heartbeat, under the member pool's
// timeouts of a third of the TTL) again when the server times it out: a
// starved server must not fail Start (it did under CI's load). Here the
// members table is locked past the pool's timeouts; control: locked past
// every attempt, Start fails with the server's timeout rather than waiting
// on.
func TestStartRetriesAJoinTimedOutByTheServer(t *testing.T) {
	t.Parallel()
	lock := `LOCK TABLE leasehold.members IN SHARE MODE`
	if err := startBlocked(t, lock, 600*time.Millisecond, false); err != nil {
		t.Fatalf("Start after the lock was released: %v", err)
	}

	ctx := pgtest.Context(t)
	m, _ := blockedMember(t, lock)
	defer m.Stop(ctx)
	var pe *pgconn.PgError
	if err := m.Start(ctx); !errors.As(err, &pe) || (pe.Code != "57014" && pe.Code != "55P03") {
		t.Fatalf("Start while the members table stays locked = %v; want the server's timeout (57014 or 55P03)", err)
	}
}

package partition_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// waitListening waits until m's listener listens.
func waitListening(t *testing.T, m *partition.Member) {
	t.Helper()
	for start := time.Now(); !partition.Listening(m); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the member's listener did not listen within 10s")
		}
	}
}

// A member that listens reads the membership when told to (notifications,
// expiries), not every PollInterval: an idle fleet's members were reading it
// every second each for nothing.
func TestListeningMemberReadsMembershipOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	const poll = 50 * time.Millisecond
	m := startWith(t, pool, partition.Config{
		Partitions: 4, ID: "worker-1", Run: (&recorder{}).run("worker-1"), PollInterval: poll,
		Lease: lease.Config{TTL: 5 * time.Second},
	})
	waitListening(t, m)
	converged(t, pool, []string{"worker-1"}, 10*time.Second)
	time.Sleep(100 * time.Millisecond) // the read the listener's Connected asked for
	before := partition.MembershipReads(m)
	const window = time.Second
	time.Sleep(window)
	reads := partition.MembershipReads(m) - before
	t.Logf("%d membership reads in %v while listening (PollInterval %v)", reads, window, poll)
	if reads > 1 {
		t.Errorf("%d membership reads in %v while listening, with nothing changed; want at most 1 (a read per PollInterval would be %d)",
			reads, window, window/poll)
	}
	// Control: a join is still seen at once, by notification.
	startWith(t, pool, partition.Config{
		Partitions: 4, ID: "worker-2", Run: (&recorder{}).run("worker-2"), PollInterval: time.Hour,
		Lease: lease.Config{TTL: 5 * time.Second},
	})
	if d := converged(t, pool, []string{"worker-1", "worker-2"}, 10*time.Second); d > 2*time.Second {
		t.Errorf("a join took %v to converge; want well under the TTL", d)
	}
}

// A member that cannot listen (here its pool's one connection is taken, so
// its listener never gets one) falls back to reading the membership every
// PollInterval: a join it is not told about is seen within about that,
// not at the next expiry or TTL.
func TestMemberPollsWhileNotListening(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	ctx := pgtest.Context(t)
	cfg, err := pgxpool.ParseConfig(url)
	pgtest.Must(t, err)
	cfg.MaxConns = 1
	blocked, err := pgxpool.NewWithConfig(ctx, cfg)
	pgtest.Must(t, err)
	t.Cleanup(blocked.Close)
	held, err := blocked.Acquire(ctx)
	pgtest.Must(t, err)
	t.Cleanup(held.Release) // before blocked.Close (cleanups run last first)
	const ttl = 6 * time.Second
	m := startWith(t, blocked, partition.Config{
		Partitions: 8, ID: "worker-1", Run: (&recorder{}).run("worker-1"), PollInterval: 100 * time.Millisecond,
		Lease: lease.Config{TTL: ttl},
	})
	pool := pgtest.PoolURL(t, url)
	converged(t, pool, []string{"worker-1"}, 10*time.Second)
	if partition.Listening(m) {
		t.Fatal("the member listens: the test proves nothing")
	}
	startWith(t, pool, partition.Config{
		Partitions: 8, ID: "worker-2", Run: (&recorder{}).run("worker-2"), PollInterval: time.Hour,
		Lease: lease.Config{TTL: ttl},
	})
	// worker-2's next expiry read by worker-1 is at least TTL - RenewInterval
	// (4 s) away: converging well before it needs the poll.
	if d := converged(t, pool, []string{"worker-1", "worker-2"}, 10*time.Second); d > 2*time.Second {
		t.Errorf("a join took %v to converge at a member that cannot listen; want about PollInterval", d)
	}
}

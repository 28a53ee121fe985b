package partition_test

import (
	"context"
	"fmt"
	"slices"
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

// A release wakes only the member whose assignment wants the partition:
// here a's Run returns early on one of its partitions, which it releases
// (and keeps, after a cooldown), and b, which does not want it, reads
// nothing; a release of one of b's partitions wakes b, and a notification
// of the group's name alone (a join or a leave) wakes everyone. Each
// release used to wake every member of the fleet for a read (64 members
// started one after the other: 12,691 reads, 3,926 since).
func TestReleaseWakesOnlyTheMemberThatWantsIt(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	ctx := pgtest.Context(t)
	owners, err := partition.Assign([]string{"a", "b"}, 8)
	pgtest.Must(t, err)
	ofA, ofB := slices.Index(owners, "a"), slices.Index(owners, "b")
	giveUp := make(chan struct{})
	cfg := func(id string) partition.Config {
		// A TTL long enough that no read comes due within the test, and
		// no polling: reads come from notifications alone.
		return partition.Config{Partitions: 8, ID: id, PollInterval: time.Hour, Lease: lease.Config{TTL: time.Minute},
			Run: func(ctx context.Context, o partition.Ownership) {
				if id == "a" && o.Partition == ofA {
					select {
					case <-giveUp:
						return // early: released, claimed again after a cooldown
					case <-ctx.Done():
					}
				}
				<-ctx.Done()
			}}
	}
	// a's releases all notify (a prompt one would not: see
	// TestPromptReleasesDoNotNotify), so that b hears a's release of a's
	// own partition.
	ca := cfg("a")
	ca.Group = "g"
	a, err := partition.New(pgtest.DBOn(t, pool), ca)
	pgtest.Must(t, err)
	partition.SetLateRelease(a, 0)
	pgtest.Must(t, a.Start(ctx))
	t.Cleanup(func() { stopMember(t, a) })
	b := startWith(t, pool, cfg("b"))
	waitListening(t, a)
	waitListening(t, b)
	converged(t, pool, []string{"a", "b"}, 10*time.Second)
	// readsBy returns how many times b read the membership during a
	// quiet spell after do.
	readsBy := func(m *partition.Member, do func()) int64 {
		time.Sleep(200 * time.Millisecond)
		before := partition.MembershipReads(m)
		do()
		time.Sleep(300 * time.Millisecond)
		return partition.MembershipReads(m) - before
	}
	db := pgtest.DBOn(t, pool)
	released := func(p int) bool {
		st, err := partition.Inspect(ctx, db, "g")
		pgtest.Must(t, err)
		return st.Partitions[p].Released
	}
	if n := readsBy(b, func() {
		close(giveUp)
		for start := time.Now(); !released(ofA); time.Sleep(10 * time.Millisecond) {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("a did not release partition %d after its Run returned", ofA)
			}
		}
	}); n != 0 {
		t.Errorf("a's release of its own partition %d woke b for %d membership reads; want none", ofA, n)
	}
	notify := func(payload string) func() {
		return func() {
			_, err := pool.Exec(ctx, `SELECT pg_notify($1, $2)`, partition.NotifyChannel(""), payload)
			pgtest.Must(t, err)
		}
	}
	for _, c := range []struct {
		what    string
		payload string
	}{
		{"a release of one of b's partitions", fmt.Sprintf("g\n%d", ofB)},
		{"a release of a range holding one of b's partitions", "g\n0-7"},
		{"the group's name (a join or a leave)", "g"},
		{"a release b cannot parse", "g\nx"},
	} {
		if n := readsBy(b, notify(c.payload)); n == 0 {
			t.Errorf("%s (payload %q) did not wake b", c.what, c.payload)
		}
	}
	if n := readsBy(b, notify(fmt.Sprintf("h\n%d", ofB))); n != 0 {
		t.Errorf("another group's release woke b for %d reads", n)
	}
}

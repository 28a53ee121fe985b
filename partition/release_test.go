package partition_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// A member handing off many partitions at once releases them in a few
// statements, not one each: a Stop of a member holding 32 partitions, and
// a join that takes half of them away. (Released one by one, a fleet's
// first member gave back a thousand partitions through its few
// connections, past their statement timeouts: each unconfirmed release
// left its partition unowned for a lease TTL.) The counts include the
// single-lease statement, so they cannot pass by sending that instead.
func TestHandoffsReleaseTogether(t *testing.T) {
	t.Parallel()
	const parts = 32
	pool, count := pgtest.CountingPool(t, nil)
	st, err := store.For("")
	pgtest.Must(t, err)
	releases := func() int { return count.Count(st.Lease.Release, st.Lease.ReleaseMany) }
	blockRun := func(ctx context.Context, _ partition.Ownership) { <-ctx.Done() }

	a := startMember(t, pool, "worker-1", parts, blockRun)
	converged(t, pool, []string{"worker-1"}, 15*time.Second)
	before := releases()
	startMember(t, pool, "worker-2", parts, blockRun)
	converged(t, pool, []string{"worker-1", "worker-2"}, 15*time.Second)
	moved := releases() - before
	if moved < 1 || moved > 4 {
		t.Fatalf("a join that moved about %d partitions off worker-1 took %d release statements; want 1 to 4", parts/2, moved)
	}
	before = releases()
	stopMember(t, a)
	converged(t, pool, []string{"worker-2"}, 15*time.Second)
	if n := releases() - before; n < 1 || n > 4 {
		t.Fatalf("Stop of a member holding about %d partitions took %d release statements; want 1 to 4", parts/2, n)
	}
}

// A rebalance's prompt release sends no notification (PostgreSQL 15 wakes
// every listening backend of the database for each, and a join made one
// per member giving the joiner a partition): the joiner, which saw the
// same join, claims its partitions by trying again every 25 ms. A release
// that comes late (a Run slow to return) and a leaving member's do notify.
// The TTL is a minute and PollInterval an hour, so nothing else could hand
// the joiners their partitions within the test's bounds.
func TestPromptReleasesDoNotNotify(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := pgtest.Context(t)
	conn, err := pool.Acquire(ctx)
	pgtest.Must(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `LISTEN `+partition.NotifyChannel(""))
	pgtest.Must(t, err)
	// releases returns the release notifications received within wait
	// (joins and leaves, the group's name alone, are skipped).
	releases := func(wait time.Duration) []string {
		var got []string
		for end := time.Now().Add(wait); time.Now().Before(end); {
			wctx, cancel := context.WithDeadline(ctx, end)
			n, err := conn.Conn().WaitForNotification(wctx)
			cancel()
			if err != nil {
				break
			}
			if strings.HasPrefix(n.Payload, "g\n") {
				got = append(got, n.Payload)
			}
		}
		return got
	}
	var slow atomic.Bool
	start := func(id string, late time.Duration) *partition.Member {
		m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "g", Partitions: 8, ID: id,
			PollInterval: time.Hour, Lease: lease.Config{TTL: time.Minute},
			Run: func(ctx context.Context, o partition.Ownership) {
				<-ctx.Done()
				if slow.Load() {
					time.Sleep(300 * time.Millisecond)
				}
			}})
		pgtest.Must(t, err)
		partition.SetLateRelease(m, late)
		pgtest.Must(t, m.Start(ctx))
		t.Cleanup(func() { stopMember(t, m) })
		return m
	}
	// a's releases notify only when a Run takes 10 s to return: under any
	// load, its prompt releases stay prompt.
	start("a", 10*time.Second)
	converged(t, pool, []string{"a"}, 10*time.Second)
	start("b", 0)
	converged(t, pool, []string{"a", "b"}, 5*time.Second)
	if got := releases(300 * time.Millisecond); len(got) > 0 {
		t.Errorf("a's prompt release of b's partitions notified: %q", got)
	}

	// The controls: a late release, and a leaving member's, notify.
	slow.Store(true)
	c := start("c", 100*time.Millisecond)
	converged(t, pool, []string{"a", "b", "c"}, 5*time.Second)
	if got := releases(time.Second); len(got) == 0 {
		t.Error("b's release of c's partitions, 300 ms after b's Runs were told to end, did not notify")
	}
	slow.Store(false)
	stopMember(t, c)
	converged(t, pool, []string{"a", "b"}, 5*time.Second)
	if got := releases(time.Second); len(got) == 0 {
		t.Error("c's Stop released its partitions without a notification")
	}
}

// A member's handoff polls start afresh at each handoff: the count of
// polls in a row, which sets the backoff, goes back to zero once a round
// finds no wanted partition held by a live member. (It did only when one
// was held by a member that was not live, so a long-lived member's later
// handoffs started at the slow end of the backoff: a prompt release, which
// does not notify, waited up to PollInterval.)
func TestHandoffPollsStartAfreshAtEachHandoff(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := pgtest.Context(t)
	var slow atomic.Bool
	start := func(id string) *partition.Member {
		m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "g", Partitions: 8, ID: id,
			PollInterval: time.Hour, Lease: lease.Config{TTL: time.Minute},
			Run: func(ctx context.Context, o partition.Ownership) {
				<-ctx.Done()
				if slow.Load() {
					time.Sleep(time.Second)
				}
			}})
		pgtest.Must(t, err)
		partition.SetLateRelease(m, time.Hour) // releases never notify: b must poll
		pgtest.Must(t, m.Start(ctx))
		t.Cleanup(func() { stopMember(t, m) })
		return m
	}
	start("a")
	converged(t, pool, []string{"a"}, 10*time.Second)
	slow.Store(true)
	b := start("b")
	var most int64
	db := pgtest.DBOn(t, pool)
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		most = max(most, partition.HandoffPolls(b))
		st, err := partition.Inspect(ctx, db, "g")
		pgtest.Must(t, err)
		if isConverged(st, []string{"a", "b"}) {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("not converged on a and b within 10s: %+v", st)
		}
	}
	slow.Store(false)
	// a's Runs took a second to return: b polled many times in a row.
	if most < 5 {
		t.Fatalf("b polled %d times in a row for a's partitions; want at least 5 (a's Runs took 1 s)", most)
	}
	// The round that claimed the last of them ends the handoff.
	for start := time.Now(); partition.HandoffPolls(b) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("b's handoff polls still count %d after it claimed every partition it wanted", partition.HandoffPolls(b))
		}
	}
}

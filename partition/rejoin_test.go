package partition_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// A supervisor restarts a member with a fixed ID right after it crashed:
// the crashed incarnation's membership row (not deregistered, no longer
// heartbeating) has not expired yet. Start waits for it to expire and then
// joins, instead of failing with ErrDuplicateMember (a crash loop). The new
// incarnation never overlaps the old one: it joins no earlier than the old
// row's expiry on the database clock.
func TestRestartWithinOneTTLOfACrashWaitsForTheStaleMembership(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	// What a crash leaves: the group, and the member's row, live for one
	// more TTL, that nobody heartbeats any more.
	var expires time.Time
	pgtest.Must(t, pool.QueryRow(ctx, `
		WITH g AS (INSERT INTO leasehold.groups (name, partitions) VALUES ('g', 4))
		INSERT INTO leasehold.members (group_name, id, incarnation, joined_at, heartbeat_at, expires_at)
		VALUES ('g', 'worker-1', 'crashed', clock_timestamp(), clock_timestamp(), clock_timestamp() + $1 * interval '1 microsecond')
		RETURNING expires_at`, testTTL.Microseconds()).Scan(&expires))

	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "g", Partitions: 4, ID: "worker-1",
		Run: (&recorder{}).run("worker-1"), Lease: lease.Config{TTL: testTTL}})
	pgtest.Must(t, err)
	if err := m.Start(ctx); err != nil {
		t.Fatalf("Start right after a crash of the same ID = %v; want it to wait for the stale membership and join", err)
	}
	t.Cleanup(func() { stopMember(t, m) })
	var inc string
	var joined time.Time
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT incarnation, joined_at FROM leasehold.members WHERE group_name = 'g' AND id = 'worker-1'`).
		Scan(&inc, &joined))
	if inc == "crashed" || joined.Before(expires) {
		t.Fatalf("membership after Start: incarnation %q joined at %v; want a new incarnation joined no earlier than the crashed one's expiry %v",
			inc, joined, expires)
	}
	if err := m.Err(); err != nil {
		t.Fatalf("member Err = %v; want nil", err)
	}
}

// Negative control: the same ID held by a live twin that keeps
// heartbeating is refused with ErrDuplicateMember once Start sees the twin
// renew its membership, and the twin keeps its membership and partitions.
func TestStartRefusesAnIDALiveTwinKeepsRenewing(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	twin := startMember(t, pool, "worker-1", 4, (&recorder{}).run("worker-1"))
	var before string
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT incarnation FROM leasehold.members WHERE id = 'worker-1'`).Scan(&before))

	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "g", Partitions: 4, ID: "worker-1",
		Run: (&recorder{}).run("second"), Lease: lease.Config{TTL: testTTL}})
	pgtest.Must(t, err)
	if err := m.Start(ctx); !errors.Is(err, partition.ErrDuplicateMember) {
		t.Fatalf("Start with a live twin's id = %v; want ErrDuplicateMember", err)
	}
	var after string
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT incarnation FROM leasehold.members WHERE id = 'worker-1'`).Scan(&after))
	if after != before || twin.Err() != nil {
		t.Fatalf("after the refused Start: membership incarnation %q (was %q), twin Err %v; want the twin untouched", after, before, twin.Err())
	}
}

// The wait for a stale membership respects Start's context: it ends with
// the context's error (not ErrDuplicateMember: the row may be a crash's),
// and leaves the row alone.
func TestStartWaitingForAStaleMembershipHonoursItsContext(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	_, err := pool.Exec(ctx, `
		INSERT INTO leasehold.groups (name, partitions) VALUES ('g', 4);
		INSERT INTO leasehold.members (group_name, id, incarnation, joined_at, heartbeat_at, expires_at)
		VALUES ('g', 'worker-1', 'crashed', clock_timestamp(), clock_timestamp(), clock_timestamp() + interval '1 minute')`)
	pgtest.Must(t, err)
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "g", Partitions: 4, ID: "worker-1",
		Run: (&recorder{}).run("worker-1"), Lease: lease.Config{TTL: time.Minute}})
	pgtest.Must(t, err)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = m.Start(short)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, partition.ErrDuplicateMember) {
		t.Fatalf("Start cut short while waiting = %v; want the context's error", err)
	}
	var inc string
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT incarnation FROM leasehold.members WHERE id = 'worker-1'`).Scan(&inc))
	if inc != "crashed" {
		t.Fatalf("the stale membership's incarnation is %q after the cut-short Start; want it untouched", inc)
	}
}

package partition_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/history"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// A member cut off from the database (packets held, no errors) loses its
// partitions by its leases' local deadlines, without being told; the other
// member takes them over once they expire; when the network heals, the cut
// member rejoins and the group converges again. The history shows no
// overlap.
func TestDatabaseOutageOfOneMember(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	pgtest.Must(t, history.Install(ctx, pool, ""))
	cut, proxy := pgtest.ProxiedPool(t, url)

	rec := &recorder{}
	start := func(p *pgxpool.Pool, id string) {
		m, err := partition.New(pgtest.DBOn(t, p), partition.Config{Group: "g", Partitions: 8, ID: id, Run: rec.run(id),
			Lease: lease.Config{TTL: testTTL}})
		pgtest.Must(t, err)
		pgtest.Must(t, m.Start(ctx))
		t.Cleanup(func() { stopMember(t, m) })
	}
	start(cut, "cut")
	start(pool, "steady")
	converged(t, pool, []string{"cut", "steady"}, 15*time.Second)
	// The database's view (converged) can run ahead of the member's: a
	// lease the cut member has already given up locally (a renewal that
	// timed out on a loaded machine) still shows as held until it expires.
	// Cut only once the cut member is running partitions, or the test
	// would show nothing.
	for deadline := time.Now().Add(15 * time.Second); !rec.running("cut"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cut member runs no partition 15s after the group converged")
		}
	}

	cutAt := time.Now()
	proxy.Blackhole()
	outage := converged(t, pool, []string{"steady"}, 15*time.Second)
	t.Logf("partitions of the cut member owned again %v after the outage began", outage)
	during := 0
	for _, s := range rec.snapshot() {
		if s.member != "cut" || (!s.end.IsZero() && s.end.Before(cutAt)) {
			continue // earlier grants, handed off when "steady" joined
		}
		during++
		if s.end.IsZero() {
			t.Fatalf("partition %d: the cut member's Run is still running after its partitions moved", s.partition)
		}
		if !errors.Is(s.cause, lease.ErrLost) {
			t.Fatalf("partition %d: the cut member's Run ended with %v; want a lost lease", s.partition, s.cause)
		}
	}
	if during == 0 {
		t.Fatal("the cut member held nothing when the outage began: the test shows nothing")
	}

	proxy.Heal()
	converged(t, pool, []string{"cut", "steady"}, 20*time.Second)
	vs, err := history.Load(ctx, pool, "")
	pgtest.Must(t, err)
	if r := history.Check(vs); !r.OK() {
		t.Fatalf("lease history violations: %v", r.Violations)
	}
}

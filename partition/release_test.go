package partition_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
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

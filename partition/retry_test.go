package partition_test

import (
	"context"
	"sync"
	"testing"
	"time"

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
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctx, `LOCK TABLE leasehold.leases IN SHARE MODE`)
	pgtest.Must(t, err)
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
	pgtest.Must(t, tx.Rollback(ctx))
	if d := converged(t, pool, []string{"a"}, 30*time.Second); d > 5*time.Second {
		t.Errorf("the member held its partitions %v after the lock's end; want a retry within seconds, not at the next read (a TTL, 1m)", d)
	}
}

package partition_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// A Run that panics or returns before its context is cancelled gives the
// partition up; it is claimed again after a backoff, not wedged for good.
func TestRunReturningEarlyIsRetriedAfterABackoff(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	const poll = 200 * time.Millisecond
	var mu sync.Mutex
	var calls []time.Time
	run := func(ctx context.Context, o partition.Ownership) {
		mu.Lock()
		calls = append(calls, time.Now())
		n := len(calls)
		mu.Unlock()
		switch n {
		case 1:
			panic("handler bug")
		case 2:
			return // gave up by itself
		}
		<-ctx.Done()
	}
	startWith(t, pool, partition.Config{Partitions: 1, ID: "worker-1", Run: run, PollInterval: poll,
		Lease: lease.Config{TTL: testTTL}})
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Run called %d times in 10s; want a third call after two early returns", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if gap1, gap2 := calls[1].Sub(calls[0]), calls[2].Sub(calls[1]); gap1 < poll || gap2 < 2*poll {
		t.Fatalf("retries after %v and %v; want backoffs of at least %v and %v", gap1, gap2, poll, 2*poll)
	}
	converged(t, pool, []string{"worker-1"}, 5*time.Second) // held again, by a Run that stays
}

// A member that can no longer take part (here: the group was recreated
// with another partition count) leaves the group, so the others do not keep
// assigning it partitions it will never claim.
func TestFailedMemberLeavesTheGroup(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := pgtest.Context(t)
	old := startMember(t, pool, "old", 16, (&recorder{}).run("old"))
	converged(t, pool, []string{"old"}, 10*time.Second)
	_, err := pool.Exec(ctx, `DELETE FROM leasehold.groups WHERE name = 'g'; INSERT INTO leasehold.groups (name, partitions) VALUES ('g', 8)`)
	pgtest.Must(t, err)
	startMember(t, pool, "new", 8, (&recorder{}).run("new"))
	converged(t, pool, []string{"new"}, 10*time.Second)
	var ce *partition.CountError
	if err := old.Err(); !errors.As(err, &ce) {
		t.Fatalf("old member's Err = %v; want *CountError", err)
	}
}

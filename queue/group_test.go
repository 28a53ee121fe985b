package queue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// A producer deployed before any worker: enqueueing into a group nobody
// created is refused (the control), EnsureGroup creates it, after which
// the enqueue succeeds, on the partition the count gives; and a worker
// started later with the same count joins it.
func TestEnsureGroupLetsAProducerDeployFirst(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	c, err := queue.New(db, queue.Config{})
	pgtest.Must(t, err)
	job := queue.Job{Group: "mail", Key: "user-42", Args: email{To: "a"}}
	if _, err := c.Enqueue(ctx, job); !errors.Is(err, queue.ErrUnknownGroup) || !strings.Contains(err.Error(), "EnsureGroup") {
		t.Fatalf("enqueue into a group nobody created: %v; want ErrUnknownGroup naming EnsureGroup", err)
	}
	created, err := c.EnsureGroup(ctx, "mail", 16)
	if err != nil || !created {
		t.Fatalf("EnsureGroup = %v, %v; want created", created, err)
	}
	res, err := c.Enqueue(ctx, job)
	pgtest.Must(t, err)
	if res.Partition != partition.OfString("user-42", 16) {
		t.Errorf("job on partition %d; want %d", res.Partition, partition.OfString("user-42", 16))
	}
	// A worker (member) with the same count starts on the group.
	m, err := partition.New(db, partition.Config{Group: "mail", Partitions: 16,
		Run: func(ctx context.Context, _ partition.Ownership) { <-ctx.Done() }})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(ctx))
	pgtest.Must(t, m.Stop(ctx))
}

// EnsureGroup is idempotent, also when racing with itself; another count
// than the group's is a *partition.CountError, also for a client that
// never saw the group; bad input wraps ErrInvalidGroup and creates nothing.
func TestEnsureGroupIsIdempotentAndRefusesAnotherCount(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	const racers = 8
	var wg sync.WaitGroup
	results := make([]bool, racers)
	errs := make([]error, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := queue.New(db, queue.Config{})
			if err != nil {
				errs[i] = err
				return
			}
			results[i], errs[i] = c.EnsureGroup(ctx, "g", 8)
		}()
	}
	wg.Wait()
	creators := 0
	for i := range racers {
		pgtest.Must(t, errs[i])
		if results[i] {
			creators++
		}
	}
	if creators != 1 {
		t.Errorf("%d of %d racing EnsureGroup calls report creating the group; want exactly 1", creators, racers)
	}
	c, err := queue.New(db, queue.Config{})
	pgtest.Must(t, err)
	if created, err := c.EnsureGroup(ctx, "g", 8); err != nil || created {
		t.Errorf("EnsureGroup of an existing group, same count = %v, %v; want not created, no error", created, err)
	}
	_, err = c.EnsureGroup(ctx, "g", 9)
	var ce *partition.CountError
	if !errors.As(err, &ce) || ce.Stored != 8 || ce.Configured != 9 || !errors.Is(err, partition.ErrPartitionCount) {
		t.Errorf("EnsureGroup with another count = %v; want a *partition.CountError (8 stored, 9 asked)", err)
	}
	for _, bad := range []struct {
		group string
		n     int
	}{{"", 4}, {strings.Repeat("x", 101), 4}, {"h", 0}, {"h", -1}, {"h", partition.MaxPartitions + 1}} {
		if _, err := c.EnsureGroup(ctx, bad.group, bad.n); !errors.Is(err, queue.ErrInvalidGroup) {
			t.Errorf("EnsureGroup(%.10q, %d) = %v; want ErrInvalidGroup", bad.group, bad.n, err)
		}
	}
	var n int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.groups`).Scan(&n))
	if n != 1 {
		t.Errorf("%d groups; want only g", n)
	}
}

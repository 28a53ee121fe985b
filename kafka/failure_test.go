package kafka_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/lease"
)

// An owner whose lease was taken over while its handler ran is refused at
// commit even though the new owner has committed nothing yet (so the
// conditional offset write alone would let it through): the lease check
// refuses it, none of its effects commit, and the partition is consumed
// exactly once by the next grant.
func TestStaleCommitIsRefusedBeforeTheNewOwnerCommits(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 1, "t")
	produced := produceTo(t, brokers, "t", 0, 5)
	pool := newLedger(t)
	ctx := pgtest.ContextFor(t, time.Minute)
	inside, release := make(chan fence.Token, 1), make(chan struct{})
	var calls atomic.Int32
	inner := ledgerHandler("w")
	c := start(t, pool, "g", "w", kafka.Config{Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 1,
		Fence: lease.FenceConfig{IdleTimeout: 30 * time.Second},
		Handler: func(ctx context.Context, tx pgx.Tx, b *kafka.Batch) error {
			if err := inner(ctx, tx, b); err != nil {
				return err
			}
			if calls.Add(1) == 1 {
				inside <- b.Token
				<-release // a pause: the lease is taken over meanwhile
			}
			return nil
		}})
	stale := <-inside
	var usurper int64
	pgtest.Must(t, pool.QueryRow(ctx, `UPDATE leasehold.leases SET token = nextval('leasehold.lease_token_seq'), owner = 'usurper'
		WHERE name = 'partition/g/0' RETURNING token`).Scan(&usurper))
	if usurper <= int64(stale) {
		t.Fatalf("usurper token %d not above %d", usurper, stale)
	}
	close(release)
	eventually(t, 20*time.Second, "the stale commit refused", func() bool { return c.Stats().Fenced == 1 })
	// The usurper's lease expires unrenewed; the next grant consumes.
	waitOffsets(t, pool, "g", "t", map[int32]int64{0: 5}, 30*time.Second)
	rows := ledger(t, pool)
	for _, r := range rows {
		if r.token == int64(stale) {
			t.Fatalf("a row of the stale owner (token %d) was committed: %+v", stale, r)
		}
	}
	if bad := checkLedger("t", produced, rows); len(bad) > 0 {
		t.Fatal(bad)
	}
}

// A handler error and a handler panic roll the batch back, and the same
// records are handled again (after a backoff) until the handler succeeds:
// nothing of the failed attempts commits, nothing is skipped.
func TestHandlerErrorsAndPanicsRetryTheBatch(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 1, "t")
	produced := produceTo(t, brokers, "t", 0, 30)
	pool := newLedger(t)
	inner := ledgerHandler("w")
	var mu sync.Mutex
	attempts := 0 // handler calls whose batch starts at offset 0
	c := start(t, pool, "g", "w", kafka.Config{Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 1,
		MaxBatch: 10, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond,
		Handler: func(ctx context.Context, tx pgx.Tx, b *kafka.Batch) error {
			if err := inner(ctx, tx, b); err != nil {
				return err
			}
			if b.Records[0].Offset != 0 {
				return nil
			}
			mu.Lock()
			attempts++
			n := attempts
			mu.Unlock()
			switch n {
			case 1:
				return errors.New("boom")
			case 2:
				panic("kaboom")
			}
			return nil
		}})
	waitOffsets(t, pool, "g", "t", map[int32]int64{0: 30}, 30*time.Second)
	if bad := checkLedger("t", produced, ledger(t, pool)); len(bad) > 0 {
		t.Fatal(bad)
	}
	mu.Lock()
	defer mu.Unlock()
	if attempts != 3 {
		t.Errorf("the first batch was handled %d times, want 3 (error, panic, success)", attempts)
	}
	if s := c.Stats(); s.Failed != 2 || s.Fenced != 0 {
		t.Errorf("stats %+v, want 2 failed batches (the error and the panic)", s)
	}
}

// A batch whose handler returns after the partition's context was
// cancelled (the worker's Stop) still commits, fenced: Stop lets a batch in
// flight finish.
func TestBatchFinishingDuringStopCommits(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 1, "t")
	produceTo(t, brokers, "t", 0, 20)
	pool := newLedger(t)
	inside := make(chan int64, 1)
	var calls atomic.Int32
	inner := ledgerHandler("w")
	c := start(t, pool, "g", "w", kafka.Config{Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 1,
		MaxBatch: 5,
		Handler: func(ctx context.Context, tx pgx.Tx, b *kafka.Batch) error {
			if err := inner(ctx, tx, b); err != nil {
				return err
			}
			if calls.Add(1) == 1 {
				inside <- b.Next()
				<-ctx.Done() // Stop was called: finish the batch
			}
			return nil
		}})
	next := <-inside
	stop(t, c)
	if got := storedOffset(t, pool, "g", "t", 0); got != next {
		t.Fatalf("stored offset %d after Stop, want %d (the batch in flight committed)", got, next)
	}
	if s := c.Stats(); s.Batches != 1 || s.Records != next || s.Failed != 0 {
		t.Fatalf("stats %+v, want the one batch in flight committed", s)
	}
	if n := len(ledger(t, pool)); int64(n) != next {
		t.Fatalf("ledger holds %d rows, want %d", n, next)
	}
}

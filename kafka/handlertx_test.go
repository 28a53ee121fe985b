package kafka_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/lease"
)

// A handler cannot commit (or roll back) the batch's transaction itself:
// that would commit its effects without the offset, and every retry would
// apply them again. Commit and Rollback return ErrTxManaged; the consumer
// commits effects and offset together.
func TestHandlerCannotCommitTheTransaction(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 1, "t")
	produced := produceTo(t, brokers, "t", 0, 20)
	pool := newLedger(t)
	inner := ledgerHandler("w")
	errs := make(chan error, 100)
	c := start(t, pool, "g", "w", kafka.Config{Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 1,
		MaxBatch: 5, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond,
		Handler: func(ctx context.Context, tx pgx.Tx, b *kafka.Batch) error {
			if err := inner(ctx, tx, b); err != nil {
				return err
			}
			errs <- tx.Commit(ctx) // a mistake: reported, ignored by this handler
			errs <- tx.Rollback(ctx)
			return nil
		}})
	waitOffsets(t, pool, "g", "t", map[int32]int64{0: 20}, 30*time.Second)
	if bad := checkLedger("t", produced, ledger(t, pool)); len(bad) > 0 {
		t.Fatal(bad)
	}
	if err := <-errs; !errors.Is(err, lease.ErrTxManaged) {
		t.Fatalf("tx.Commit in a handler = %v, want ErrTxManaged", err)
	}
	if err := <-errs; !errors.Is(err, lease.ErrTxManaged) {
		t.Fatalf("tx.Rollback in a handler = %v, want ErrTxManaged", err)
	}
	if s := c.Stats(); s.Failed != 0 {
		t.Fatalf("stats %+v: no batch should fail", s)
	}
}

// A handler that ends the batch's transaction itself with a raw COMMIT
// (tx.Exec, which the managed transaction cannot refuse) fails its batch
// with lease.ErrTxEnded: the fence check and the offset advance do not run
// in autocommit after it, so the batch runs again (its effects committed
// unfenced are the handler's bug, reported at ERROR).
func TestHandlerRawCommitFailsTheBatch(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 1, "t")
	produceTo(t, brokers, "t", 0, 20)
	pool := newLedger(t)
	inner := ledgerHandler("w")
	var mu sync.Mutex
	runs := map[int64]int{} // batch's first offset → runs
	c := start(t, pool, "g", "w", kafka.Config{Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 1,
		MaxBatch: 5, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond,
		Handler: func(ctx context.Context, tx pgx.Tx, b *kafka.Batch) error {
			if err := inner(ctx, tx, b); err != nil {
				return err
			}
			mu.Lock()
			first := b.Records[0].Offset
			runs[first]++
			n := runs[first]
			mu.Unlock()
			if first == 0 && n == 1 {
				_, err := tx.Exec(ctx, "COMMIT") // the bug
				return err
			}
			return nil
		}})
	waitOffsets(t, pool, "g", "t", map[int32]int64{0: 20}, 30*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if s := c.Stats(); s.Failed != 1 || runs[0] != 2 {
		t.Fatalf("stats %+v, batch at offset 0 ran %d times; want 1 failed batch, run twice", s, runs[0])
	}
}

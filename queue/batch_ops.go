package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/internal/store"
)

// batches runs the statements that finish batches.
type batches struct {
	q       store.BatchSQL
	channel string // the NOTIFY channel of new jobs
}

// finish finishes, in tx, the batches ids that may have finished: tx
// changed the state of their items so that a partition has every item
// finished (see batchDrained in internal/store). It locks them (finishing
// transactions take turns), then, in a new statement that sees what the
// transactions before it committed, enqueues the follow-ups of those that
// have finished (see batchFinish). It is a no-op without ids.
func (b batches) finish(ctx context.Context, tx pgx.Tx, ids []int64, log *slog.Logger) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, b.q.Lock, ids); err != nil {
		return fmt.Errorf("queue: lock batches %v: %w", ids, err)
	}
	rows, err := tx.Query(ctx, b.q.Finish, ids, b.channel)
	if err != nil {
		return fmt.Errorf("queue: finish batches %v: %w", ids, err)
	}
	var id, complete, success *int64
	var finishes, succeeds bool
	_, err = pgx.ForEachRow(rows, []any{&id, &complete, &success, &finishes, &succeeds}, func() error {
		log.Info("queue: batch finished (at commit)", "batch", *id, "finished", finishes, "succeeded", succeeds,
			"complete_job", deref(complete), "success_job", deref(success))
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue: finish batches %v: %w", ids, err)
	}
	return nil
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// batchChunk is how many items one statement of CancelBatch or RetryBatch
// changes: each is its own transaction, so that owners' completions wait
// for none for long.
const batchChunk = 1000

// SealBatch seals batch name of group: its items are all added, and its
// progress final once they finish. It waits for the chunks being added.
// Sealing a sealed batch changes nothing. If every item is finished
// already, the batch finishes now, and its follow-ups are enqueued by the
// same transaction. It returns the batch as sealed.
func (c *Client) SealBatch(ctx context.Context, group, name string) (BatchInfo, error) {
	id, _, err := c.lockAndFinish(ctx, "seal", c.batches.q.Seal, group, name)
	if err != nil {
		return BatchInfo{}, err
	}
	return c.BatchByID(ctx, id)
}

// lockAndFinish locks batch name of group (batchLockName), runs stmt
// (batchSeal or batchCancel) on it and, in the same transaction, finishes
// it if it has finished. It returns the batch's id and whether stmt
// changed it.
func (c *Client) lockAndFinish(ctx context.Context, op, stmt, group, name string) (id int64, changed bool, err error) {
	if err := checkBatchName(group, name); err != nil {
		return 0, false, err
	}
	err = c.inTx(ctx, op+" batch", name, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, c.batches.q.LockName, group, name).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %q in group %q", ErrUnknownBatch, name, group)
		}
		if err != nil {
			return err
		}
		changed = false
		if err := tx.QueryRow(ctx, stmt, id).Scan(&changed); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return c.batches.finish(ctx, tx, []int64{id}, c.log)
	})
	return id, changed, err
}

// CancelBatch cancels batch name of group: it is sealed, its pending items
// are cancelled (in transactions of a thousand items), and it finishes
// once every item is finished (completed, discarded or cancelled) in the
// database: its on-complete follow-up still runs, once; its on-success
// follow-up never does. Items running when it is cancelled are as jobs
// cancelled while they run (see Cancel): they count as cancelled at once,
// and their handlers are told to stop (by notification); a transactional
// handler's effects roll back, but a plain handler's may already have
// happened, or still happen after the batch finished and its on-complete
// follow-up ran: nothing waits for a plain handler to return (see
// docs/batches.md). It returns how many items it cancelled.
//
// Cancelling a batch that has finished and has no pending item (none
// retried since) changes nothing: it stays finished, or succeeded.
func (c *Client) CancelBatch(ctx context.Context, group, name string) (int64, error) {
	id, marked, err := c.lockAndFinish(ctx, "cancel", c.batches.q.Cancel, group, name)
	if err != nil || !marked {
		return 0, err // not marked: finished, with nothing pending
	}
	var cancelled int64
	after := ""
	for {
		var last *string
		var read, n int64
		err := c.inTx(ctx, "cancel batch", name, func(tx pgx.Tx) error {
			var drained []int64
			if err := tx.QueryRow(ctx, c.batches.q.CancelItems, id, after, batchChunk).Scan(&last, &read, &n, &drained); err != nil {
				return err
			}
			return c.batches.finish(ctx, tx, drained, c.log)
		})
		if err != nil {
			return cancelled, err
		}
		cancelled += n
		if last == nil || read < batchChunk {
			return cancelled, nil
		}
		after = *last
	}
}

// RetryBatch puts the batch's discarded items back to pending, due now,
// with their attempts reset (their recorded errors are kept), in
// transactions of a thousand items, and returns how many. Once they all
// complete, the batch's on-success follow-up is enqueued (its on-complete
// follow-up, enqueued when it first finished, is not enqueued again). A
// cancelled batch gives an error wrapping ErrBatchCancelled.
func (c *Client) RetryBatch(ctx context.Context, group, name string) (int64, error) {
	b, err := c.Batch(ctx, group, name)
	if err != nil {
		return 0, err
	}
	if b.CancelledAt != nil {
		return 0, fmt.Errorf("%w: %q in group %q: its items are not retried", ErrBatchCancelled, name, group)
	}
	var retried int64
	after := ""
	for {
		var live bool
		var last *string
		var read, n int64
		err := c.inTx(ctx, "retry batch", name, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, c.batches.q.RetryItems, b.ID, after, batchChunk, c.q.Channel, group).Scan(&live, &last, &read, &n)
		})
		if err != nil {
			return retried, err
		}
		if !live { // cancelled meanwhile
			return retried, fmt.Errorf("%w: %q in group %q: its items are not retried (%d were before it was cancelled)", ErrBatchCancelled, name, group, retried)
		}
		retried += n
		if last == nil || read < batchChunk {
			return retried, nil
		}
		after = *last
	}
}

// DeleteBatch deletes batch name of group, finished, with no item pending:
// its items left (retention may have deleted them), its row and its
// counters, in one transaction; its name can then be taken again.
// Its follow-up jobs are left to retention, like any job. It returns how
// many items it deleted. A batch that is not finished, or has items
// pending again (retried since), gives an error wrapping
// ErrBatchNotFinished; an unknown one, ErrUnknownBatch. Finished batches
// are also deleted by retention (ProcessorConfig.BatchRetention).
func (c *Client) DeleteBatch(ctx context.Context, group, name string) (int64, error) {
	if err := checkBatchName(group, name); err != nil {
		return 0, err
	}
	var items int64
	err := c.inTx(ctx, "delete batch", name, func(tx pgx.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, c.batches.q.LockName, group, name).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %q in group %q", ErrUnknownBatch, name, group)
		}
		if err != nil {
			return err
		}
		var done bool
		if err := tx.QueryRow(ctx, c.batches.q.Deletable, id).Scan(&done); err != nil {
			return err
		}
		if !done {
			return fmt.Errorf("%w: %q in group %q: it has items pending, or is not sealed (cancel it first)", ErrBatchNotFinished, name, group)
		}
		return tx.QueryRow(ctx, c.batches.q.Delete, id).Scan(&items)
	})
	if err != nil {
		return 0, err
	}
	c.log.Info("queue: batch deleted", "group", group, "batch", name, "items", items)
	return items, nil
}

// inTx runs fn in a transaction and commits it, trying again (up to 5
// times) when the server aborted it to break a deadlock with an owner's
// completion of the same items.
func (c *Client) inTx(ctx context.Context, op, resource string, fn func(pgx.Tx) error) error {
	for try := 0; ; try++ {
		err := c.inTxOnce(ctx, op, resource, fn)
		var pe *pgconn.PgError
		if try < 4 && errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001") && ctx.Err() == nil {
			time.Sleep(time.Duration(10*(try+1)) * time.Millisecond)
			continue
		}
		return err
	}
}

func (c *Client) inTxOnce(ctx context.Context, op, resource string, fn func(pgx.Tx) error) error {
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return store.Classify("queue", op, resource, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // after the commit: a no-op
	if err := fn(tx); err != nil {
		if errors.Is(err, ErrUnknownBatch) || errors.Is(err, ErrBatchNotFinished) {
			return err
		}
		return store.Classify("queue", op, resource, err)
	}
	if err := store.Commit(ctx, tx, "queue: "+op, resource); err != nil {
		return store.ClassifyCommit("queue", op, resource, err)
	}
	return nil
}

package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/store"
)

// BatchState is the state of a batch, as BatchInfo.State derives it.
type BatchState string

const (
	// BatchOpen: items may still be added (not sealed).
	BatchOpen BatchState = "open"
	// BatchRunning: sealed, with items not finished.
	BatchRunning BatchState = "running"
	// BatchSucceeded: every item completed.
	BatchSucceeded BatchState = "succeeded"
	// BatchFinished: every item finished, some discarded or cancelled.
	BatchFinished BatchState = "finished"
	// BatchCancelled: cancelled by an operator (its items may still be
	// finishing: see Pending).
	BatchCancelled BatchState = "cancelled"
)

// BatchInfo is a batch and its progress, read at one moment.
type BatchInfo struct {
	ID          int64
	Group       string
	Name        string
	Description string
	CreatedAt   time.Time
	SealedAt    *time.Time
	CancelledAt *time.Time
	// FinishedAt is when the batch first had every item finished (its
	// on-complete follow-up was enqueued then).
	FinishedAt *time.Time
	// SucceededAt is when the batch first had every item completed (its
	// on-success follow-up was enqueued then).
	SucceededAt *time.Time
	// CompleteJob and SuccessJob are the ids of the follow-up jobs once
	// enqueued (0: not, or none).
	CompleteJob, SuccessJob int64
	// Total is how many items were added; Pending are not finished yet.
	Total, Pending int64
	// Completed, Failed (discarded) and Cancelled count the finished items.
	Completed, Failed, Cancelled int64
	// ReadAt is when the progress was read (the database's clock).
	ReadAt time.Time
}

// Sealed reports whether the batch is sealed: its Total is final.
func (b BatchInfo) Sealed() bool { return b.SealedAt != nil }

// State derives the batch's state: from its counts, and from whether it
// was finished (FinishedAt, SucceededAt), so that a batch that counts no
// pending item but was never finished shows as running, not done.
func (b BatchInfo) State() BatchState {
	switch {
	case b.CancelledAt != nil:
		return BatchCancelled
	case b.SealedAt == nil:
		return BatchOpen
	case b.Pending > 0 || b.FinishedAt == nil:
		return BatchRunning
	case b.SucceededAt != nil && b.Failed == 0 && b.Cancelled == 0:
		return BatchSucceeded
	}
	return BatchFinished
}

// Rate is the batch's items finished per second since it was created
// (0 before any finished). For the current rate, compare two reads:
// (b2.Total-b2.Pending) - (b1.Total-b1.Pending) over b2.ReadAt-b1.ReadAt.
func (b BatchInfo) Rate() float64 {
	d := b.ReadAt.Sub(b.CreatedAt).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(b.Total-b.Pending) / d
}

// ETA estimates the time left until every item is finished at rate items
// a second (Rate, or one measured between two reads); 0 with nothing
// pending, and -1 when it cannot be estimated (no rate yet).
func (b BatchInfo) ETA(rate float64) time.Duration {
	switch {
	case b.Pending <= 0:
		return 0
	case rate <= 0:
		return -1
	}
	return time.Duration(float64(b.Pending) / rate * float64(time.Second))
}

// Batch reads batch name of group with its progress: a read of two rows
// per partition of the group, whatever the batch's size. An unknown batch
// gives an error wrapping ErrUnknownBatch.
func (c *Client) Batch(ctx context.Context, group, name string) (BatchInfo, error) {
	if err := checkBatchName(group, name); err != nil {
		return BatchInfo{}, err
	}
	b, err := scanBatch(c.pool.QueryRow(ctx, c.batches.q.Progress, group, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return BatchInfo{}, fmt.Errorf("%w: %q in group %q", ErrUnknownBatch, name, group)
	}
	if err != nil {
		return BatchInfo{}, store.ClassifyRead("queue", "batch", name, err)
	}
	return b, nil
}

// BatchByID reads batch id with its progress, as Batch.
func (c *Client) BatchByID(ctx context.Context, id int64) (BatchInfo, error) {
	b, err := scanBatch(c.pool.QueryRow(ctx, c.batches.q.ByID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return BatchInfo{}, fmt.Errorf("%w: id %d", ErrUnknownBatch, id)
	}
	if err != nil {
		return BatchInfo{}, store.ClassifyRead("queue", "batch", fmt.Sprint(id), err)
	}
	return b, nil
}

// BatchGroups returns the groups that have a batch named name, in name
// order: for tools given a batch's name alone.
func (c *Client) BatchGroups(ctx context.Context, name string) ([]string, error) {
	rows, err := c.pool.Query(ctx, c.batches.q.Named, name)
	if err != nil {
		return nil, store.ClassifyRead("queue", "batch", name, err)
	}
	groups, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, store.ClassifyRead("queue", "batch", name, err)
	}
	return groups, nil
}

// BatchFilter selects the batches Batches returns.
type BatchFilter struct {
	// Group, if set, selects the batches of that group. Defaults to every
	// group.
	Group string
	// Before, if set, selects batches with an id below it: pass the last id
	// of a page to get the next. Defaults to no bound.
	Before int64
	// Limit is the most batches returned, 1 to MaxListLimit. Defaults to 50.
	Limit int
}

// Batches returns the batches f selects, newest first, each with its
// progress.
func (c *Client) Batches(ctx context.Context, f BatchFilter) ([]BatchInfo, error) {
	switch {
	case f.Limit < 0 || f.Limit > MaxListLimit:
		return nil, fmt.Errorf("%w: Limit %d is not in 0..%d", ErrInvalidBatch, f.Limit, MaxListLimit)
	case f.Before < 0:
		return nil, fmt.Errorf("%w: Before %d is negative", ErrInvalidBatch, f.Before)
	}
	if f.Limit == 0 {
		f.Limit = 50
	}
	var group *string
	if f.Group != "" {
		group = &f.Group
	}
	var before *int64
	if f.Before > 0 {
		before = &f.Before
	}
	rows, err := c.pool.Query(ctx, c.batches.q.List, group, before, f.Limit)
	if err != nil {
		return nil, store.ClassifyRead("queue", "batches", f.Group, err)
	}
	bs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BatchInfo, error) { return scanBatch(r) })
	if err != nil {
		return nil, store.ClassifyRead("queue", "batches", f.Group, err)
	}
	return bs, nil
}

// scanBatch reads a row of store's batchColumns.
func scanBatch(r pgx.Row) (BatchInfo, error) {
	var b BatchInfo
	err := r.Scan(&b.ID, &b.Group, &b.Name, &b.Description, &b.CreatedAt, &b.SealedAt, &b.CancelledAt, &b.FinishedAt,
		&b.SucceededAt, &b.CompleteJob, &b.SuccessJob, &b.Total, &b.Completed, &b.Failed, &b.Cancelled, &b.ReadAt)
	b.Pending = b.Total - b.Completed - b.Failed - b.Cancelled
	return b, err
}

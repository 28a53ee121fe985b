package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence"
)

// ErrNotFound is returned by JobInfo for an unknown job id.
var ErrNotFound = errors.New("queue: job not found")

// JobInfo is a job as stored, for inspection.
type JobInfo struct {
	ID          int64
	Group       string
	Partition   int
	Key         string
	Kind        string
	Args        json.RawMessage
	State       string // pending, completed, discarded or cancelled
	Attempt     int    // runs recorded so far
	MaxAttempts int
	RunAt       time.Time
	CreatedAt   time.Time
	FinishedAt  *time.Time
	// FinishedToken is the fencing token of the grant that finished the job.
	FinishedToken *fence.Token
	// Errors holds one entry per failed attempt: {"attempt", "at", "error"}.
	Errors    json.RawMessage
	UniqueKey string
}

// JobInfo reads job id. It returns an error wrapping ErrNotFound for an
// unknown id (or one deleted by retention).
func (c *Client) JobInfo(ctx context.Context, id int64) (JobInfo, error) {
	j := JobInfo{ID: id}
	var tok *int64
	err := c.pool.QueryRow(ctx, c.q.inspect, id).Scan(&j.Group, &j.Partition, &j.Key, &j.Kind, &j.Args, &j.State,
		&j.Attempt, &j.MaxAttempts, &j.RunAt, &j.CreatedAt, &j.FinishedAt, &tok, &j.Errors, &j.UniqueKey)
	if errors.Is(err, pgx.ErrNoRows) {
		return JobInfo{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	if err != nil {
		return JobInfo{}, fmt.Errorf("queue: job %d: %w", id, err)
	}
	if tok != nil {
		t := fence.Token(*tok)
		j.FinishedToken = &t
	}
	return j, nil
}

// Retry puts discarded or cancelled jobs back to pending, due now, with
// their attempts reset (their recorded errors are kept), and returns the ids
// it changed. Other ids (pending, completed, unknown, or whose unique key is
// pending again) are left alone.
func (c *Client) Retry(ctx context.Context, ids ...int64) ([]int64, error) {
	rows, err := c.pool.Query(ctx, c.q.retry, ids)
	if err != nil {
		return nil, fmt.Errorf("queue: retry: %w", err)
	}
	changed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("queue: retry: %w", err)
	}
	return changed, nil
}

// Cancel finishes pending jobs as cancelled, with the error "cancelled by
// an operator" recorded (finished_token stays empty: no grant finished
// them), and returns the ids it changed, in increasing order. Other ids
// (finished, unknown) are left alone. Retry puts a cancelled job back.
//
// A job may be running when it is cancelled: its owner fetched it without
// marking it, and its completion only changes pending jobs. So a
// transactional handler's effects roll back (its completion finds the job
// finished), whereas a plain handler's external effects may already have
// happened; its outcome is not recorded. A completion in flight (an owner's
// transaction holding the job's row) makes Cancel wait for it; if it
// committed, the job is finished and not cancelled.
func (c *Client) Cancel(ctx context.Context, ids ...int64) ([]int64, error) {
	rows, err := c.pool.Query(ctx, c.q.cancel, ids)
	if err != nil {
		return nil, fmt.Errorf("queue: cancel: %w", err)
	}
	changed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("queue: cancel: %w", err)
	}
	slices.Sort(changed)
	return changed, nil
}

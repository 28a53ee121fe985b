package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/queue"
)

// ChangeResult is one job of RetryJobs or CancelJobs, as `jobs retry
// --json` and `jobs cancel --json` print it.
type ChangeResult struct {
	ID      int64 `json:"id"`
	Changed bool  `json:"changed"`
	// State is the job's state as read after the change; "" if not found.
	State string `json:"state"`
	// Reason says why the job was left alone.
	Reason string `json:"reason,omitempty"`
}

// RetryJobs puts discarded or cancelled jobs back to pending, due now, with
// their attempts reset, and returns a result per id, in order. When it
// leaves some alone, it returns the results with a *NotChangedError.
func RetryJobs(ctx context.Context, db *leasehold.DB, ids []int64) ([]ChangeResult, error) {
	return change(ctx, db, ids, "retried", (*queue.Client).Retry, func(j queue.JobInfo) string {
		switch j.State {
		case queue.StatePending:
			return "pending: nothing to retry"
		case queue.StateCompleted:
			return "completed: nothing to retry"
		}
		if j.UniqueKey != "" {
			return fmt.Sprintf("a pending job of the group has its unique key %q", j.UniqueKey)
		}
		return "changed by someone else meanwhile"
	})
}

// CancelJobs finishes pending jobs as cancelled and returns a result per
// id, in order. When it leaves some alone, it returns the results with a
// *NotChangedError.
func CancelJobs(ctx context.Context, db *leasehold.DB, ids []int64) ([]ChangeResult, error) {
	return change(ctx, db, ids, "cancelled", (*queue.Client).Cancel, func(j queue.JobInfo) string {
		if j.State != queue.StatePending {
			return "already " + string(j.State)
		}
		return "changed by someone else meanwhile"
	})
}

// change runs op on the jobs ids, then reads the jobs back: their states,
// and, for those it left alone, why.
func change(ctx context.Context, db *leasehold.DB, ids []int64, verb string,
	op func(*queue.Client, context.Context, ...int64) ([]int64, error), why func(queue.JobInfo) string) ([]ChangeResult, error) {
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return nil, err
	}
	changed, err := op(q, ctx, ids...)
	if err != nil {
		return nil, err
	}
	res := make([]ChangeResult, len(ids))
	left := 0
	for i, id := range ids {
		r := ChangeResult{ID: id, Changed: slices.Contains(changed, id)}
		j, err := q.JobInfo(ctx, id)
		switch {
		case errors.Is(err, queue.ErrNotFound):
			r.Reason = "not found (never enqueued, or deleted by retention)"
		case err != nil:
			return nil, fmt.Errorf("%s %v; reading the jobs back: %w", verb, changed, err)
		default:
			r.State = string(j.State)
			if !r.Changed {
				r.Reason = why(j)
			}
		}
		if !r.Changed {
			left++
		}
		res[i] = r
	}
	if left > 0 {
		return res, &NotChangedError{Left: left, Total: len(ids), Verb: verb}
	}
	return res, nil
}

package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// EnqueueBatch is how many jobs one statement of Enqueue inserts.
const EnqueueBatch = 1000

// EnqueueResult is one enqueued job, as `leasehold enqueue --json` prints
// it.
type EnqueueResult struct {
	Line      int    `json:"line,omitempty"` // the input line; absent for a job given by flags
	Group     string `json:"group"`
	ID        int64  `json:"id"` // 0 for a duplicate
	Partition int    `json:"partition"`
	Duplicate bool   `json:"duplicate"` // a pending job of the group has the unique key: nothing enqueued
}

// Enqueue enqueues jobs in one transaction, in statements of EnqueueBatch:
// all of them or, on any error, none. A job of a group that does not exist
// yet, or that the queue refuses, is an error naming its input line.
func Enqueue(ctx context.Context, db *leasehold.DB, jobs []InputJob) ([]EnqueueResult, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	if err := checkGroups(ctx, db, jobs); err != nil {
		return nil, err
	}
	if err := applyDelays(ctx, db, jobs); err != nil {
		return nil, err
	}
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return nil, err
	}
	out := make([]EnqueueResult, 0, len(jobs))
	err = pgx.BeginFunc(ctx, db.Pool(), func(tx pgx.Tx) error {
		for start := 0; start < len(jobs); start += EnqueueBatch {
			batch := jobs[start:min(start+EnqueueBatch, len(jobs))]
			qj := make([]queue.Job, len(batch))
			for i, j := range batch {
				qj[i] = j.Job
			}
			res, err := q.EnqueueTx(ctx, tx, qj...)
			var je *queue.JobError
			if errors.As(err, &je) && je.Index >= 0 && je.Index < len(batch) {
				return jobErr(batch[je.Index].Line, je)
			}
			if err != nil {
				return err
			}
			for i, r := range res {
				out = append(out, EnqueueResult{Line: batch[i].Line, Group: batch[i].Job.Group,
					ID: r.ID, Partition: r.Partition, Duplicate: r.Duplicate})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkGroups refuses the jobs unless each one's group exists.
func checkGroups(ctx context.Context, db *leasehold.DB, jobs []InputJob) error {
	known, err := partition.Groups(ctx, db)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if !slices.Contains(known, j.Job.Group) {
			return inputErr(j.Line, fmt.Errorf("%w: %q (create it with `leasehold groups create %s --partitions N`, or start a worker of it)", queue.ErrUnknownGroup, j.Job.Group, j.Job.Group))
		}
	}
	return nil
}

// applyDelays turns the jobs' delays into run-at times on the database
// clock.
func applyDelays(ctx context.Context, db *leasehold.DB, jobs []InputJob) error {
	if !slices.ContainsFunc(jobs, func(j InputJob) bool { return j.Delay > 0 }) {
		return nil
	}
	now, err := dbNow(ctx, db)
	if err != nil {
		return err
	}
	for i := range jobs {
		if jobs[i].Delay > 0 {
			jobs[i].Job.RunAt = now.Add(jobs[i].Delay)
		}
	}
	return nil
}

// jobErr reports a job the queue refused, by its input line.
func jobErr(line int, je *queue.JobError) error {
	reason := strings.ToLower(je.Field) + ": " + je.Reason
	if je.Err != nil {
		reason += ": " + je.Err.Error()
	}
	return &LineError{Line: line, Reason: reason, Err: je}
}

// inputErr names the input line of a job that cannot be enqueued.
func inputErr(line int, err error) error {
	if line == 0 {
		return fmt.Errorf("%w (nothing was enqueued)", err)
	}
	return fmt.Errorf("line %d: %w (nothing was enqueued)", line, err)
}

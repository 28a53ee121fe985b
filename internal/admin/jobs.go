package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/queue"
)

// JobView is a job as `leasehold jobs --json` prints it.
type JobView struct {
	ID          int64           `json:"id"`
	Group       string          `json:"group"`
	Partition   int             `json:"partition"`
	Key         string          `json:"key"`
	Kind        string          `json:"kind"`
	Args        json.RawMessage `json:"args"`
	State       string          `json:"state"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	// DefaultMaxAttempts reports that MaxAttempts is the enqueuing client's
	// default, the job having been enqueued without a limit: the kind's
	// policy (queue.Policy.MaxAttempts), which workers apply, may replace it.
	DefaultMaxAttempts bool `json:"default_max_attempts"`
	// Priority is 1 (first) to 4.
	Priority   int        `json:"priority"`
	RunAt      time.Time  `json:"run_at"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// FinishedToken is the fencing token of the grant that finished the job.
	FinishedToken *int64 `json:"finished_token"`
	// Errors has one {"attempt", "at", "error"} object per recorded error.
	Errors    []queue.AttemptError `json:"errors"`
	UniqueKey string               `json:"unique_key"`
	// Ordering is "strict" or "non-blocking": what the job does to the later
	// jobs of its key while it waits (ignored for a job without a key).
	Ordering string `json:"ordering"`
	// WaitingBehind is the id of the earlier pending job of the same key
	// that this pending job waits behind. It is omitted when the job waits
	// for no job, and always by `jobs list`, which does not look.
	WaitingBehind int64 `json:"waiting_behind,omitempty"`
	// Running says where the job runs now, as its partition's owner
	// published it (see docs/running.md); omitted when it is not known to
	// run, and by `jobs list` unless it lists --state running.
	Running *RunningView `json:"running,omitempty"`
}

// RunningView is where a job runs: the worker, since when (the worker's
// clock), and the token of its grant.
type RunningView struct {
	Worker string    `json:"worker"`
	Since  time.Time `json:"since"`
	Token  int64     `json:"token"`
}

func viewOf(j queue.JobInfo) JobView {
	v := JobView{ID: j.ID, Group: j.Group, Partition: j.Partition, Key: j.Key, Kind: j.Kind, Args: json.RawMessage(j.Args),
		State: string(j.State), Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, DefaultMaxAttempts: j.DefaultMaxAttempts, Priority: j.Priority, RunAt: j.RunAt, CreatedAt: j.CreatedAt,
		FinishedAt: j.FinishedAt, Errors: j.Errors, UniqueKey: j.UniqueKey, Ordering: j.Ordering.String(),
		WaitingBehind: j.WaitingBehind}
	if j.FinishedToken != nil {
		t := int64(*j.FinishedToken)
		v.FinishedToken = &t
	}
	if r := j.Running; r != nil {
		v.Running = &RunningView{Worker: r.Worker, Since: r.Since, Token: int64(r.Token)}
	}
	return v
}

// ParseIDs parses job ids given as arguments.
func ParseIDs(args []string) ([]int64, error) {
	ids := make([]int64, len(args))
	for i, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("job id %q: not a positive integer", a)
		}
		ids[i] = id
	}
	return ids, nil
}

// ShowJobs reads the jobs ids, in their order. Ids not found are left out
// of the views and reported by a *MissingError, returned with the views of
// the others.
func ShowJobs(ctx context.Context, db *leasehold.DB, ids []int64) ([]JobView, error) {
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return nil, err
	}
	views := []JobView{}
	var missing []int64
	for _, id := range ids {
		j, err := q.JobInfo(ctx, id)
		if errors.Is(err, queue.ErrNotFound) {
			missing = append(missing, id)
			continue
		}
		if err != nil {
			return nil, err
		}
		views = append(views, viewOf(j))
	}
	if len(missing) > 0 {
		return views, &MissingError{IDs: missing}
	}
	return views, nil
}

// ListJobs lists the jobs that f selects, newest first.
func ListJobs(ctx context.Context, db *leasehold.DB, f queue.Filter) ([]JobView, error) {
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return nil, err
	}
	jobs, err := q.List(ctx, f)
	if err != nil {
		return nil, err
	}
	views := make([]JobView, len(jobs))
	for i, j := range jobs {
		views[i] = viewOf(j)
	}
	return views, nil
}

package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/store"
)

var (
	// ErrNotFound is returned by JobInfo for an unknown job id.
	ErrNotFound = errors.New("queue: job not found")
	// ErrInvalidFilter is returned by List for an invalid Filter.
	ErrInvalidFilter = errors.New("queue: invalid filter")
)

// JobState is the state of a stored job.
type JobState string

const (
	// StatePending: the job waits to run, runs, or waits for a retry.
	StatePending JobState = "pending"
	// StateCompleted: a run of the job succeeded.
	StateCompleted JobState = "completed"
	// StateDiscarded: the job ran out of attempts, or its args did not
	// decode.
	StateDiscarded JobState = "discarded"
	// StateCancelled: the job was cancelled, by its handler (Cancel) or by
	// an operator (Client.Cancel).
	StateCancelled JobState = "cancelled"
)

// JobStates are the states a job can be in, in their lifecycle's order.
var JobStates = []JobState{StatePending, StateCompleted, StateDiscarded, StateCancelled}

// StateRunning is not a stored state but a pseudo-state for Filter.State:
// the pending jobs that a partition's owner publishes as running (see
// docs/running.md).
const StateRunning JobState = "running"

// RunningInfo says where a job runs, as its partition's owner published
// it (at most PublishInterval late).
type RunningInfo struct {
	// Worker is the member id of the partition's owner running the job.
	Worker string
	// Since is when the handler started (the worker's clock).
	Since time.Time
	// Token is the fencing token of the owner's grant.
	Token fence.Token
}

// AttemptError is one error recorded on a job: the failed attempt, when it
// failed, and the error's text.
type AttemptError struct {
	// Attempt is the job's attempt count when the error was recorded: the
	// attempt that failed, from 1; for a snooze or a cancellation by an
	// operator, the attempts spent so far (0 before any run).
	Attempt int `json:"attempt"`
	// At is when the error was recorded (database clock).
	At time.Time `json:"at"`
	// Error is the error's text.
	Error string `json:"error"`
}

// RawArgs is a job's arguments as stored: JSON text. It is a
// json.RawMessage (it marshals as the JSON it holds, and converts to one)
// that prints as its text, so that fmt's %v and %+v of a JobInfo show the
// arguments rather than a list of bytes.
type RawArgs json.RawMessage

// String returns the arguments' JSON text.
func (a RawArgs) String() string { return string(a) }

// MarshalJSON returns the arguments' JSON text ("null" when empty).
func (a RawArgs) MarshalJSON() ([]byte, error) { return json.RawMessage(a).MarshalJSON() }

// UnmarshalJSON stores a copy of data.
func (a *RawArgs) UnmarshalJSON(data []byte) error {
	return (*json.RawMessage)(a).UnmarshalJSON(data)
}

// JobInfo is a job as stored, for inspection.
type JobInfo struct {
	ID        int64
	Group     string
	Partition int
	Key       string
	Kind      string
	// Args is the job's arguments as stored: JSON.
	Args        RawArgs
	State       JobState
	Attempt     int // runs recorded so far
	MaxAttempts int
	// DefaultMaxAttempts reports that MaxAttempts is the client's default,
	// the job having been enqueued without one: the Policy.MaxAttempts of
	// the kind's handler, if it declares one, replaces it when the job runs.
	DefaultMaxAttempts bool
	// Priority is the job's priority, 1 (highest) to 4 (see Job).
	Priority   int
	RunAt      time.Time
	CreatedAt  time.Time
	FinishedAt *time.Time
	// FinishedToken is the fencing token of the grant that finished the job.
	FinishedToken *fence.Token
	// Errors holds the errors recorded on the job, oldest first: one per
	// failed attempt (an error repeated on a snooze is recorded once), and
	// the cancellation by an operator. Never nil.
	Errors    []AttemptError
	UniqueKey string
	// Ordering is the job's Ordering (see Job).
	Ordering Ordering
	// Batch is the id of the job's batch, for an item or a follow-up (0:
	// none); Item is its item key ("": not an item); FollowUp says which
	// follow-up of its batch the job is ("complete", "success"; "": none).
	Batch    int64
	Item     string
	FollowUp string
	// WaitingBehind, from JobInfo, is the id of the earlier pending job of
	// the same key that this pending job waits behind (0: it waits for no
	// job). List leaves it 0.
	WaitingBehind int64
	// Running, from JobInfo and from List filtering StateRunning, says
	// where the job runs; nil when it is not known to run (List with
	// another filter always leaves it nil). It is what the owner published
	// last: a job that started less than ProcessorConfig.PublishInterval
	// ago may not be listed yet, one that just ended may still be.
	Running *RunningInfo
}

// JobInfo reads job id. It returns an error wrapping ErrNotFound for an
// unknown id (or one deleted by retention).
func (c *Client) JobInfo(ctx context.Context, id int64) (JobInfo, error) {
	j, err := scanJob(c.pool.QueryRow(ctx, c.q.Inspect, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return JobInfo{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	if err != nil {
		return JobInfo{}, store.ClassifyRead("queue", "job", strconv.FormatInt(id, 10), err)
	}
	return j, nil
}

// scanJob reads a row of the Inspect and List statements.
func scanJob(r pgx.Row) (JobInfo, error) {
	var j JobInfo
	var tok, behind, runTok *int64
	var holds, maxSet bool
	var prio int16
	var errs []byte
	var worker *string
	var since *time.Time
	err := r.Scan(&j.ID, &j.Group, &j.Partition, &j.Key, &j.Kind, &j.Args, &j.State,
		&j.Attempt, &j.MaxAttempts, &j.RunAt, &j.CreatedAt, &j.FinishedAt, &tok, &errs, &j.UniqueKey, &holds, &j.Batch, &j.Item, &j.FollowUp, &prio, &maxSet, &behind,
		&worker, &since, &runTok)
	if err != nil {
		return j, err
	}
	j.Priority, j.DefaultMaxAttempts = int(prio), !maxSet
	if worker != nil && since != nil && runTok != nil {
		j.Running = &RunningInfo{Worker: *worker, Since: *since, Token: fence.Token(*runTok)}
	}
	j.Errors = []AttemptError{}
	if len(errs) > 0 {
		if err := json.Unmarshal(errs, &j.Errors); err != nil {
			return j, fmt.Errorf("queue: job %d: recorded errors: %w", j.ID, err)
		}
	}
	if !holds {
		j.Ordering = OrderNonBlocking
	}
	if behind != nil {
		j.WaitingBehind = *behind
	}
	if tok != nil {
		t := fence.Token(*tok)
		j.FinishedToken = &t
	}
	return j, nil
}

// Filter selects the jobs List returns.
type Filter struct {
	// Group is the jobs' group. Required.
	Group string
	// State, if set, selects jobs in that state (one of JobStates), or
	// the pending jobs published as running (StateRunning; see
	// docs/running.md). Defaults to any state.
	State JobState
	// Kind, if set, selects jobs of that kind. Defaults to any kind.
	Kind string
	// Key, if set, selects jobs of that key. Defaults to any key.
	Key string
	// Partitions, if set, selects jobs of those partitions. Defaults to
	// every partition.
	Partitions []int
	// Batch, if set, selects the items and follow-ups of the batch with
	// that id (BatchInfo.ID). Defaults to any job.
	Batch int64
	// Before, if set, selects jobs with an id below it: pass the last id of
	// a page to get the next. Defaults to no bound.
	Before int64
	// Limit is the most jobs returned, 1 to MaxListLimit. Defaults to 50.
	Limit int
	// Scan bounds how many jobs Page reads to fill a page, 1 to
	// MaxListLimit*10. Defaults to DefaultScan. List ignores it.
	Scan int
}

// MaxListLimit is the largest Filter.Limit.
const MaxListLimit = 10_000

// List returns the jobs f selects, newest (highest id) first. An unknown
// group gives an error wrapping ErrUnknownGroup, an invalid filter (a
// partition the group does not have, too) one wrapping ErrInvalidFilter.
// It reads jobs from the newest id, filtering, until Limit match: cheap
// when matches are common among recent jobs, but a filter matching few of
// many retained jobs reads many rows (all of the group's when none
// matches). Page bounds that read.
func (c *Client) List(ctx context.Context, f Filter) ([]JobInfo, error) {
	a, err := c.listArgs(ctx, f, false)
	if err != nil {
		return nil, err
	}
	stmt := c.q.List
	if f.State == StateRunning {
		stmt = c.run.List
	}
	rows, err := c.pool.Query(ctx, stmt, a.group, a.state, a.kind, a.parts, a.before, a.limit, a.batch, a.key)
	if err != nil {
		return nil, store.ClassifyRead("queue", "list", f.Group, err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (JobInfo, error) { return scanJob(r) })
	if err != nil {
		return nil, store.ClassifyRead("queue", "list", f.Group, err)
	}
	if len(jobs) == 0 {
		if err := c.groupExists(ctx, f.Group, "list"); err != nil {
			return nil, err
		}
	}
	return jobs, nil
}

// listArgs are a Filter's values as the list statements take them: NULL
// (nil) for a filter not set.
type listArgs struct {
	group            string
	state, kind, key *string
	parts            []int32 // nil: every partition
	before, batch    *int64
	limit, scan      int
	partCount        int // the group's partitions, when parts or (for Page) key is set
}

// listArgs validates f (Scan too when page is set: Page's) and returns its
// values for the list statements, defaults applied.
func (c *Client) listArgs(ctx context.Context, f Filter, page bool) (listArgs, error) {
	switch {
	case f.Group == "":
		return listArgs{}, fmt.Errorf("%w: Group required", ErrInvalidFilter)
	case f.State != "" && f.State != StateRunning && !slices.Contains(JobStates, f.State):
		return listArgs{}, fmt.Errorf("%w: State %q is not one of %v or %q", ErrInvalidFilter, f.State, JobStates, StateRunning)
	case f.Limit < 0 || f.Limit > MaxListLimit:
		return listArgs{}, fmt.Errorf("%w: Limit %d is not in 0..%d", ErrInvalidFilter, f.Limit, MaxListLimit)
	case f.Before < 0:
		return listArgs{}, fmt.Errorf("%w: Before %d is negative", ErrInvalidFilter, f.Before)
	case f.Batch < 0:
		return listArgs{}, fmt.Errorf("%w: Batch %d is negative", ErrInvalidFilter, f.Batch)
	case page && (f.Scan < 0 || f.Scan > MaxListLimit*10):
		return listArgs{}, fmt.Errorf("%w: Scan %d is not in 0..%d", ErrInvalidFilter, f.Scan, MaxListLimit*10)
	}
	a := listArgs{group: f.Group, limit: f.Limit, scan: f.Scan}
	if a.limit == 0 {
		a.limit = 50
	}
	if a.scan == 0 {
		a.scan = DefaultScan
	}
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	a.state, a.kind, a.key = opt(string(f.State)), opt(f.Kind), opt(f.Key)
	if len(f.Partitions) > 0 || page && f.Key != "" {
		n, err := c.groupCount(ctx, f.Group)
		if err != nil {
			return listArgs{}, err
		}
		a.partCount = n
		for _, p := range f.Partitions {
			if p < 0 || p >= n || p > math.MaxInt32 {
				return listArgs{}, fmt.Errorf("%w: partition %d: group %q has %d partitions (0 to %d)", ErrInvalidFilter, p, f.Group, n, n-1)
			}
			a.parts = append(a.parts, int32(p))
		}
	}
	if f.Before > 0 {
		a.before = &f.Before
	}
	if f.Batch > 0 {
		a.batch = &f.Batch
	}
	return a, nil
}

// groupExists returns nil if group exists, an error wrapping
// ErrUnknownGroup if it does not; op names the caller in other errors.
func (c *Client) groupExists(ctx context.Context, group, op string) error {
	var n int
	err := c.pool.QueryRow(ctx, c.q.Groups, []string{group}).Scan(new(string), &n)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %q", ErrUnknownGroup, group)
	}
	if err != nil {
		return store.ClassifyRead("queue", op, group, err)
	}
	return nil
}

// groupCount returns the partition count of group, an error wrapping
// ErrUnknownGroup if it does not exist.
func (c *Client) groupCount(ctx context.Context, group string) (int, error) {
	c.mu.Lock()
	n, ok := c.counts[group]
	c.mu.Unlock()
	if ok {
		return n, nil
	}
	err := c.pool.QueryRow(ctx, c.q.Groups, []string{group}).Scan(new(string), &n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: %q", ErrUnknownGroup, group)
	}
	if err != nil {
		return 0, store.ClassifyRead("queue", "list", group, err)
	}
	c.mu.Lock()
	c.counts[group] = n
	c.mu.Unlock()
	return n, nil
}

// Retry puts discarded or cancelled jobs back to pending, due now, with
// their attempts reset (their recorded errors are kept), and returns the ids
// it changed. Other ids (pending, completed, unknown, or whose unique key is
// pending again) are left alone. A discarded or cancelled item of a
// cancelled batch is never put back (its batch is over, as RetryBatch
// refuses it): if ids hold any, nothing is retried, and the error is a
// *CancelledItemsError naming them, wrapping ErrBatchCancelled.
func (c *Client) Retry(ctx context.Context, ids ...int64) ([]int64, error) {
	rows, err := c.pool.Query(ctx, c.q.Retry, ids)
	if err != nil {
		return nil, store.Classify("queue", "retry", "", err)
	}
	var changed, refused []int64
	var id int64
	var no bool
	if _, err := pgx.ForEachRow(rows, []any{&id, &no}, func() error {
		if no {
			refused = append(refused, id)
		} else {
			changed = append(changed, id)
		}
		return nil
	}); err != nil {
		return nil, store.Classify("queue", "retry", "", err)
	}
	if len(refused) > 0 {
		slices.Sort(refused)
		return nil, &CancelledItemsError{IDs: refused}
	}
	if changed == nil {
		changed = []int64{}
	}
	return changed, nil
}

// Cancel finishes pending jobs as cancelled, with the error "cancelled by
// an operator" recorded (finished_token stays empty: no grant finished
// them), and returns the ids it changed, in increasing order. Other ids
// (finished, unknown) are left alone. Retry puts a cancelled job back.
//
// A job may be running when it is cancelled: its owner is notified (at
// commit, on the queue's NOTIFY channel; without Listen, or if the
// notification is lost, its publisher finds out within about
// ProcessorConfig.PublishInterval) and cancels the handler's context with
// the cause ErrJobCancelled; a job it holds but has not started does not
// start. Its completion only changes pending jobs, so
// the job stays cancelled whatever the handler returns: a transactional
// handler's effects roll back, whereas a plain handler's external effects
// done before it stopped have happened. The run is reported as
// OutcomeCancelled, and not retried. See docs/running.md. A completion in flight (an owner's
// transaction holding the job's row) makes Cancel wait for it; if it
// committed, the job is finished and not cancelled.
//
// Cancelling a batch's last pending item finishes the batch (see
// CancelBatch), in the same transaction.
func (c *Client) Cancel(ctx context.Context, ids ...int64) ([]int64, error) {
	var changed []int64
	err := c.inTx(ctx, "cancel", "", func(tx pgx.Tx) error {
		changed = []int64{}
		var drained []int64
		rows, err := tx.Query(ctx, c.q.Cancel, ids, c.q.Channel)
		if err != nil {
			return err
		}
		var id int64
		if _, err := pgx.ForEachRow(rows, []any{&id, &drained}, func() error {
			changed = append(changed, id)
			return nil
		}); err != nil {
			return err
		}
		return c.batches.finish(ctx, tx, drained, c.log)
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(changed)
	return changed, nil
}

// RunningJob is a job running now, as its partition's owner published it.
type RunningJob struct {
	ID        int64
	Kind      string
	Partition int
	// Worker is the member id of the partition's owner running the job.
	Worker string
	// Since is when the handler started (the worker's clock).
	Since time.Time
	// Token is the fencing token of the owner's grant.
	Token fence.Token
	// PublishedAt is when the owner last published the partition's
	// running set (database clock).
	PublishedAt time.Time
}

// Running returns the jobs of group running now, by partition and id, as
// their owners published them: at most ProcessorConfig.PublishInterval
// late (see docs/running.md). Only rows of live grants count: a row whose
// grant's lease ended or was granted anew is ignored, and so are jobs no
// longer pending. An unknown group has none.
func (c *Client) Running(ctx context.Context, group string) ([]RunningJob, error) {
	rows, err := c.pool.Query(ctx, c.run.Jobs, group)
	if err != nil {
		return nil, store.ClassifyRead("queue", "running", group, err)
	}
	js, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RunningJob, error) {
		var j RunningJob
		var tok int64
		err := r.Scan(&j.Partition, &tok, &j.Worker, &j.PublishedAt, &j.ID, &j.Kind, &j.Since)
		j.Token = fence.Token(tok)
		return j, err
	})
	if err != nil {
		return nil, store.ClassifyRead("queue", "running", group, err)
	}
	return js, nil
}

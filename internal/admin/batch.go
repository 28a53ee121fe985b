package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/queue"
)

// ErrAmbiguousBatch is wrapped by the *AmbiguousBatchError of a batch
// named without its group when several groups have a batch of that name.
var ErrAmbiguousBatch = errors.New("several groups have a batch of that name")

// AmbiguousBatchError reports a batch named without its group that several
// groups have: the command needs the group. It wraps ErrAmbiguousBatch and
// ErrBadInput.
type AmbiguousBatchError struct {
	Name   string
	Groups []string // the groups having a batch of that name, in name order
}

// Error names the groups and says how to give one.
func (e *AmbiguousBatchError) Error() string {
	return fmt.Sprintf("%v: %q is in groups %s: give the group before the name (e.g. %s %s)",
		ErrAmbiguousBatch, e.Name, strings.Join(e.Groups, ", "), e.Groups[0], e.Name)
}

// Unwrap returns ErrAmbiguousBatch and ErrBadInput.
func (e *AmbiguousBatchError) Unwrap() []error { return []error{ErrAmbiguousBatch, ErrBadInput} }

// BatchView is a batch and its progress, as `leasehold batch status --json`
// prints it (and `batch list --json`, an array of them).
type BatchView struct {
	ID          int64  `json:"id"`
	Group       string `json:"group"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// State is open, running, succeeded, finished or cancelled
	// (queue.BatchState).
	State string `json:"state"`
	// Sealed reports whether every item is added: Total is final.
	Sealed bool `json:"sealed"`
	// Total counts the items added; Pending those not finished yet;
	// Completed, Failed (discarded) and Cancelled the finished ones.
	Total     int64     `json:"total"`
	Pending   int64     `json:"pending"`
	Completed int64     `json:"completed"`
	Failed    int64     `json:"failed"`
	Cancelled int64     `json:"cancelled"`
	CreatedAt time.Time `json:"created_at"`
	// SealedAt, CancelledAt, FinishedAt (every item first finished) and
	// SucceededAt (every item first completed) are null until then.
	SealedAt    *time.Time `json:"sealed_at"`
	CancelledAt *time.Time `json:"cancelled_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	SucceededAt *time.Time `json:"succeeded_at"`
	// CompleteJob and SuccessJob are the ids of the follow-up jobs, null
	// until enqueued (or when the batch has none).
	CompleteJob *int64 `json:"complete_job"`
	SuccessJob  *int64 `json:"success_job"`
	// Rate is items finished per second (see AverageRate and RateMeter).
	Rate float64 `json:"rate"`
	// ETASeconds estimates the seconds until every item is finished at
	// Rate: 0 with nothing pending, null when it cannot be estimated (no
	// item finished yet).
	ETASeconds *float64 `json:"eta_seconds"`
	// ReadAt is when the progress was read, on the database clock.
	ReadAt time.Time `json:"read_at"`
}

// Done counts the finished items.
func (v BatchView) Done() int64 { return v.Total - v.Pending }

// Over reports whether the batch will change no more by itself: sealed,
// with every item finished.
func (v BatchView) Over() bool { return v.Sealed && v.Pending == 0 }

// ViewOf returns the view of b, with rate as its rate (items finished per
// second) and the ETA that follows from it.
func ViewOf(b queue.BatchInfo, rate float64) BatchView {
	v := BatchView{ID: b.ID, Group: b.Group, Name: b.Name, Description: b.Description, State: string(b.State()),
		Sealed: b.Sealed(), Total: b.Total, Pending: b.Pending, Completed: b.Completed, Failed: b.Failed,
		Cancelled: b.Cancelled, CreatedAt: b.CreatedAt, SealedAt: b.SealedAt, CancelledAt: b.CancelledAt,
		FinishedAt: b.FinishedAt, SucceededAt: b.SucceededAt, Rate: rate, ReadAt: b.ReadAt}
	if b.CompleteJob != 0 {
		v.CompleteJob = &b.CompleteJob
	}
	if b.SuccessJob != 0 {
		v.SuccessJob = &b.SuccessJob
	}
	if eta := b.ETA(rate); eta >= 0 {
		s := eta.Seconds()
		v.ETASeconds = &s
	}
	return v
}

// AverageRate is b's items finished per second since it was created: up
// to when it last finished, for a sealed batch with nothing pending (so
// that the rate of a batch finished long ago does not decay), else up to
// the read.
func AverageRate(b queue.BatchInfo) float64 {
	end := b.ReadAt
	if b.Sealed() && b.Pending == 0 && b.FinishedAt != nil {
		end = *b.FinishedAt
		if b.SucceededAt != nil && b.SucceededAt.After(end) { // after a retry
			end = *b.SucceededAt
		}
	}
	d := end.Sub(b.CreatedAt).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(b.Total-b.Pending) / d
}

// RateMeter measures a batch's current rate from its successive reads: the
// items finished between the oldest and the newest read of the last Span
// (by their ReadAt), over the time between them. One meter may be fed by
// several readers (the UI's tabs, each polling): the reads are kept in
// ReadAt order whatever order they arrive in, and many readers make the
// window denser, not shorter. It is not safe for concurrent use.
type RateMeter struct {
	// Span is how far back from the newest read the rate looks. Defaults
	// to 30s.
	Span  time.Duration
	reads []queue.BatchInfo // by ReadAt
}

// maxReads bounds the reads a RateMeter keeps, however many readers feed
// it.
const maxReads = 1000

// Add records read b and returns the current rate: AverageRate(b) until
// two reads apart in time are recorded, and once b has nothing pending; 0
// when items went back to pending (a retry).
func (m *RateMeter) Add(b queue.BatchInfo) float64 {
	rate, _ := m.Measure(b)
	return rate
}

// Measure records read b and returns the current rate as Add does, and
// whether it is a measurement over the window's reads rather than
// AverageRate(b): the reads are apart in time, b has items pending, and an
// item finished between the window's oldest and newest reads. A window that saw
// no item finish (reads a moment apart, or a batch whose items run long)
// has measured nothing: its 0 would show a running batch as "–", where
// the average since creation still says something (and falls as the batch
// stalls).
func (m *RateMeter) Measure(b queue.BatchInfo) (rate float64, measured bool) {
	span := m.Span
	if span <= 0 {
		span = 30 * time.Second
	}
	// After the reads at the same time or earlier: a read that arrives
	// late (a slower concurrent request) takes its place by ReadAt.
	i := sort.Search(len(m.reads), func(i int) bool { return m.reads[i].ReadAt.After(b.ReadAt) })
	m.reads = slices.Insert(m.reads, i, b)
	last := m.reads[len(m.reads)-1]
	cut := sort.Search(len(m.reads), func(i int) bool { return !m.reads[i].ReadAt.Before(last.ReadAt.Add(-span)) })
	cut = max(cut, len(m.reads)-maxReads)
	m.reads = slices.Delete(m.reads, 0, cut)
	first := m.reads[0]
	d := last.ReadAt.Sub(first.ReadAt).Seconds()
	if d <= 0 || b.Pending == 0 || last.Pending == 0 {
		return AverageRate(b), false
	}
	finished := (last.Total - last.Pending) - (first.Total - first.Pending)
	return max(0, float64(finished)/d), finished > 0
}

// BatchGroup returns the group of batch name: group if given, else the one
// group having a batch of that name. No such group is an error wrapping
// queue.ErrUnknownBatch; several, an *AmbiguousBatchError.
func BatchGroup(ctx context.Context, db *leasehold.DB, group, name string) (string, error) {
	if group != "" {
		return group, nil
	}
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return "", err
	}
	groups, err := q.BatchGroups(ctx, name)
	switch {
	case err != nil:
		return "", err
	case len(groups) == 0:
		return "", fmt.Errorf("%w: no group has a batch named %q (`leasehold batch list` lists the batches)", queue.ErrUnknownBatch, name)
	case len(groups) > 1:
		return "", &AmbiguousBatchError{Name: name, Groups: groups}
	}
	return groups[0], nil
}

// ReadBatch reads batch name of group (see BatchGroup for group ""), with
// its progress.
func ReadBatch(ctx context.Context, db *leasehold.DB, group, name string) (queue.BatchInfo, error) {
	group, err := BatchGroup(ctx, db, group, name)
	if err != nil {
		return queue.BatchInfo{}, err
	}
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return queue.BatchInfo{}, err
	}
	return q.Batch(ctx, group, name)
}

// ListBatches lists the batches f selects, newest first, each with its
// average rate.
func ListBatches(ctx context.Context, db *leasehold.DB, f queue.BatchFilter) ([]BatchView, error) {
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return nil, err
	}
	bs, err := q.Batches(ctx, f)
	if errors.Is(err, queue.ErrInvalidBatch) {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	if err != nil {
		return nil, err
	}
	out := make([]BatchView, len(bs))
	for i, b := range bs {
		out[i] = ViewOf(b, AverageRate(b))
	}
	return out, nil
}

// SealBatch seals batch name of group (see BatchGroup for group "") and
// returns it as sealed.
func SealBatch(ctx context.Context, db *leasehold.DB, group, name string) (BatchView, error) {
	group, err := BatchGroup(ctx, db, group, name)
	if err != nil {
		return BatchView{}, err
	}
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return BatchView{}, err
	}
	b, err := q.SealBatch(ctx, group, name)
	if err != nil {
		return BatchView{}, err
	}
	return ViewOf(b, AverageRate(b)), nil
}

// BatchChange is what `leasehold batch cancel` or `batch retry` did, as
// their --json prints it.
type BatchChange struct {
	Group string `json:"group"`
	Name  string `json:"name"`
	// Cancelled counts the items cancel cancelled (absent for retry);
	// Retried the items retry put back to pending (absent for cancel).
	Cancelled *int64 `json:"cancelled,omitempty"`
	Retried   *int64 `json:"retried,omitempty"`
}

// CancelBatch cancels batch name of group (see BatchGroup for group "";
// queue.Client.CancelBatch) and returns how many pending items it
// cancelled.
func CancelBatch(ctx context.Context, db *leasehold.DB, group, name string) (BatchChange, error) {
	return changeBatch(ctx, db, group, name, (*queue.Client).CancelBatch, false)
}

// RetryBatch puts the discarded items of batch name of group back to
// pending (see BatchGroup for group ""; queue.Client.RetryBatch) and
// returns how many.
func RetryBatch(ctx context.Context, db *leasehold.DB, group, name string) (BatchChange, error) {
	return changeBatch(ctx, db, group, name, (*queue.Client).RetryBatch, true)
}

func changeBatch(ctx context.Context, db *leasehold.DB, group, name string,
	op func(*queue.Client, context.Context, string, string) (int64, error), retry bool) (BatchChange, error) {
	group, err := BatchGroup(ctx, db, group, name)
	if err != nil {
		return BatchChange{}, err
	}
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return BatchChange{}, err
	}
	n, err := op(q, ctx, group, name)
	if err != nil {
		if n > 0 { // each chunk of items is its own transaction
			verb := map[bool]string{false: "cancelled", true: "retried"}[retry]
			return BatchChange{}, fmt.Errorf("%w (%d items %s before it: run the command again to finish)", err, n, verb)
		}
		return BatchChange{}, err
	}
	c := BatchChange{Group: group, Name: name}
	if retry {
		c.Retried = &n
	} else {
		c.Cancelled = &n
	}
	return c, nil
}

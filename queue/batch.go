package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// A batch is a named set of jobs, its items, in one group (see
// docs/batches.md). CreateBatch creates it with its follow-ups; AddItems
// and SubmitItems add items, each with an item key unique in the batch,
// so that a producer that crashed halfway submits again without
// duplicates; SealBatch says every item is added. A sealed batch finishes
// when every item is finished: the transaction that finishes its last item
// (an owner's fenced completion, or an operator's cancel) enqueues its
// on-complete follow-up, and its on-success follow-up if every item
// completed, each exactly once.

var (
	// ErrInvalidBatch is returned for a BatchSpec, batch name or
	// BatchFilter out of range.
	ErrInvalidBatch = errors.New("queue: invalid batch")
	// ErrUnknownBatch means the group has no batch of that name.
	ErrUnknownBatch = errors.New("queue: unknown batch")
	// ErrBatchExists is returned by CreateBatch for a name the group has a
	// batch of, created with another description or other follow-ups.
	ErrBatchExists = errors.New("queue: a batch of that name exists with another spec")
	// ErrBatchSealed is returned for items added to a sealed batch.
	ErrBatchSealed = errors.New("queue: batch is sealed")
	// ErrBatchCancelled is returned for items added to a cancelled batch,
	// by RetryBatch for one, and wrapped by the *CancelledItemsError of
	// Client.Retry.
	ErrBatchCancelled = errors.New("queue: batch is cancelled")
	// ErrBatchNotFinished is returned by DeleteBatch for a batch that is
	// not finished, or has items pending again (retried since).
	ErrBatchNotFinished = errors.New("queue: batch is not finished")
	// ErrInvalidItem is wrapped by the *ItemError of an item that cannot
	// be added (a missing item key, args that do not encode).
	ErrInvalidItem = errors.New("queue: invalid item")
	// ErrItemConflict is wrapped by the *ItemError of an item whose item
	// key the batch has, with another kind, key or args.
	ErrItemConflict = errors.New("queue: item key already in the batch with other contents")
	// ErrNoHandler is wrapped by the *KindError of a batch whose items or
	// follow-ups have a kind no worker of the group has a handler for.
	ErrNoHandler = errors.New("queue: no worker of the group has a handler for the kind")
)

// ItemError reports an item that cannot be added. Nothing of its chunk
// was added (the chunks before it were).
type ItemError struct {
	Index  int    // the item's position in the call (in SubmitItems, in the sequence)
	Item   string // the item key
	Reason string
	Err    error // ErrInvalidItem or ErrItemConflict, and the underlying error if any
}

// Error returns the error message.
func (e *ItemError) Error() string {
	return fmt.Sprintf("queue: item %d (%q): %s", e.Index, e.Item, e.Reason)
}

// Unwrap returns the errors the ItemError wraps.
func (e *ItemError) Unwrap() error { return e.Err }

// KindError reports kinds that no worker of a group has a handler for:
// the workers of a group record their handlers' kinds when they start, and
// a batch is refused jobs (items or follow-ups) of other kinds, which would
// never run and so never let it finish.
type KindError struct {
	Group string
	Kinds []string
}

// Error returns the error message.
func (e *KindError) Error() string {
	return fmt.Sprintf("queue: group %q: no worker has a handler for kind(s) %s (start a worker of the group with one first)",
		e.Group, strings.Join(e.Kinds, ", "))
}

// Unwrap returns ErrNoHandler.
func (e *KindError) Unwrap() error { return ErrNoHandler }

// CancelledItemsError is returned by Client.Retry for ids that are items
// of a cancelled batch, which are never put back to pending: their batch
// is over (its on-complete follow-up may have run already). Nothing of the
// call was retried.
type CancelledItemsError struct {
	IDs []int64 // the items of cancelled batches among the ids, in increasing order
}

// Error returns the error message.
func (e *CancelledItemsError) Error() string {
	return fmt.Sprintf("queue: jobs %v are items of a cancelled batch: not retried (nothing was)", e.IDs)
}

// Unwrap returns ErrBatchCancelled.
func (e *CancelledItemsError) Unwrap() error { return ErrBatchCancelled }

// FollowUp is a job a batch enqueues when it finishes.
type FollowUp struct {
	// Args are the job's arguments. Required.
	Args Args
	// Key is the job's key (see Job.Key). Defaults to none.
	Key string
	// MaxAttempts is the job's attempt limit. Defaults to the kind's
	// Policy.MaxAttempts (see WithPolicy), else Config.MaxAttempts.
	MaxAttempts int
	// Priority is the job's priority, as Job.Priority: 1 (the highest) to
	// MaxPriority. Defaults to 1.
	Priority int
}

// BatchSpec describes a batch to create.
type BatchSpec struct {
	// Group is the group whose workers run the batch's items and
	// follow-ups. It must exist. Required.
	Group string
	// Name names the batch, uniquely in its group and for good (a
	// finished batch keeps its name): 1 to 255 bytes of UTF-8. Use one
	// name per run ("reprice-2026-12-01"). Required.
	Name string
	// Description is free text, at most 4096 bytes. Defaults to none.
	Description string
	// OnComplete, if set, is enqueued once, when the sealed batch first
	// has every item finished (completed, discarded or cancelled),
	// including when it was cancelled.
	OnComplete *FollowUp
	// OnSuccess, if set, is enqueued once, when the sealed batch first has
	// every item completed (after a RetryBatch of its failed items, say);
	// never for a cancelled batch.
	OnSuccess *FollowUp
}

// followSpec is a FollowUp as stored with its batch, resolved: its
// partition is chosen when the batch is created.
type followSpec struct {
	Kind        string          `json:"kind"`
	Args        json.RawMessage `json:"args"`
	Key         string          `json:"key"`
	Partition   int             `json:"partition"`
	MaxAttempts int             `json:"max_attempts"`
	// DefaultMax: MaxAttempts is Config.MaxAttempts, the FollowUp having
	// none, so the kind's policy may replace it. (Omitted: set, as stored
	// before the field existed.)
	DefaultMax bool `json:"default_max,omitempty"`
	Priority   int  `json:"priority,omitempty"` // omitted: 1
}

// CreateBatch creates a batch, unsealed and empty. Creating it again with
// the same spec returns the batch as it is (a producer that crashed runs
// again from the start); with another description or follow-ups, an error
// wrapping ErrBatchExists. Follow-ups must have a kind some worker of the
// group has a handler for (*KindError).
func (c *Client) CreateBatch(ctx context.Context, spec BatchSpec) (BatchInfo, error) {
	if err := checkBatchName(spec.Group, spec.Name); err != nil {
		return BatchInfo{}, err
	}
	if len(spec.Description) > 4096 || !utf8.ValidString(spec.Description) || strings.ContainsRune(spec.Description, 0) {
		return BatchInfo{}, fmt.Errorf("%w: Description must be at most 4096 bytes of UTF-8 without NUL", ErrInvalidBatch)
	}
	n, err := c.groupCount(ctx, spec.Group)
	if err != nil {
		return BatchInfo{}, err
	}
	var kinds []string
	specs := make([]*string, 2) // JSON text (a string: any query mode sends it as is); nil: none
	for i, f := range []*FollowUp{spec.OnComplete, spec.OnSuccess} {
		if f == nil {
			continue
		}
		which := [...]string{"complete", "success"}[i]
		field := [...]string{"OnComplete", "OnSuccess"}[i]
		j := Job{Group: spec.Group, Key: f.Key, Args: f.Args, MaxAttempts: f.MaxAttempts, Priority: f.Priority}
		if err := c.check(i, j); err != nil {
			return BatchInfo{}, fmt.Errorf("%w: %s: %w", ErrInvalidBatch, field, err)
		}
		args, err := json.Marshal(f.Args)
		if err != nil {
			return BatchInfo{}, fmt.Errorf("%w: %s: Args cannot be encoded as JSON: %w", ErrInvalidBatch, field, err)
		}
		if strings.ContainsRune(f.Key, 0) || hasNUL(args) {
			return BatchInfo{}, fmt.Errorf("%w: %s: Key or Args hold a NUL character, which PostgreSQL cannot store", ErrInvalidBatch, field)
		}
		fs := followSpec{Kind: f.Args.Kind(), Args: args, Key: f.Key, MaxAttempts: c.cfg.MaxAttempts, DefaultMax: true}
		if f.MaxAttempts > 0 {
			fs.MaxAttempts, fs.DefaultMax = f.MaxAttempts, false
		}
		if f.Priority > 1 {
			fs.Priority = f.Priority
		}
		// A keyless follow-up's partition follows from the batch's name, so
		// that creating the batch again resolves it the same.
		fs.Partition = partition.OfString(f.Key, n)
		if f.Key == "" {
			fs.Partition = partition.OfString("batch\x00"+spec.Name+"\x00"+which, n)
		}
		b, err := json.Marshal(fs)
		if err != nil {
			return BatchInfo{}, fmt.Errorf("%w: %s: %w", ErrInvalidBatch, field, err)
		}
		js := string(b)
		specs[i] = &js
		kinds = append(kinds, fs.Kind)
	}
	if err := c.checkKinds(ctx, spec.Group, kinds); err != nil {
		return BatchInfo{}, err
	}
	var id int64
	err = c.pool.QueryRow(ctx, c.batches.q.Create, spec.Group, spec.Name, spec.Description, specs[0], specs[1]).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		// It exists: the same batch, or another by the same name.
		var desc string
		var onComplete, onSuccess []byte
		err = c.pool.QueryRow(ctx, c.batches.q.Spec, spec.Group, spec.Name).Scan(&id, &desc, &onComplete, &onSuccess)
		if err != nil {
			return BatchInfo{}, store.Classify("queue", "create batch", spec.Name, err)
		}
		switch {
		case desc != spec.Description:
			return BatchInfo{}, fmt.Errorf("%w: %q in group %q has description %q", ErrBatchExists, spec.Name, spec.Group, desc)
		case !sameJSON(onComplete, bytesOf(specs[0])):
			return BatchInfo{}, fmt.Errorf("%w: %q in group %q has OnComplete %s", ErrBatchExists, spec.Name, spec.Group, orNone(onComplete))
		case !sameJSON(onSuccess, bytesOf(specs[1])):
			return BatchInfo{}, fmt.Errorf("%w: %q in group %q has OnSuccess %s", ErrBatchExists, spec.Name, spec.Group, orNone(onSuccess))
		}
	} else if err != nil {
		return BatchInfo{}, enqueueErr(err)
	}
	return c.BatchByID(ctx, id)
}

func checkBatchName(group, name string) error {
	switch {
	case group == "":
		return fmt.Errorf("%w: Group required", ErrInvalidBatch)
	case name == "" || len(name) > 255 || !utf8.ValidString(name) || strings.ContainsRune(name, 0):
		return fmt.Errorf("%w: name %q must be 1 to 255 bytes of UTF-8 without NUL", ErrInvalidBatch, name)
	}
	return nil
}

// bytesOf returns the bytes of JSON text s; nil for none.
func bytesOf(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}

// sameJSON reports whether a and b are the same JSON value (nil: none).
func sameJSON(a, b []byte) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func orNone(b []byte) string {
	if b == nil {
		return "none"
	}
	return string(b)
}

// checkKinds returns a *KindError for the kinds no worker of group has a
// handler for. Kinds found are cached: a kind once handled stays handled.
func (c *Client) checkKinds(ctx context.Context, group string, kinds []string) error {
	v, _ := c.kinds.LoadOrStore(group, new(sync.Map))
	known := v.(*sync.Map)
	var unknown []string
	for _, k := range kinds {
		if _, ok := known.Load(k); !ok && !slices.Contains(unknown, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	rows, err := c.pool.Query(ctx, c.batches.q.Kinds, group, unknown)
	if err != nil {
		return store.ClassifyRead("queue", "kinds", group, err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return store.ClassifyRead("queue", "kinds", group, err)
	}
	var missing []string
	for _, k := range unknown {
		if slices.Contains(found, k) {
			known.Store(k, true)
		} else {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return &KindError{Group: group, Kinds: missing}
	}
	return nil
}

// RecordKinds records that this Processor handles its kinds in group
// (Config.Workers), so that Client.AddItems accepts batch items of those
// kinds (see KindError). The group must exist (a partition.Member creates
// it at Start). Serve records them at a grant if it was not done: a
// worker.Worker calls RecordKinds at Start, so that items added once Start
// has returned are accepted. Once recorded, a later call does nothing.
func (p *Processor) RecordKinds(ctx context.Context, group string) error {
	if _, done := p.kinds.Load(group); done {
		return nil
	}
	// One statement per Processor and group: the grants of a start ask
	// together (64 workers x 1,024 partitions sent 403 of them, queued on
	// the one row each).
	p.kindsMu.Lock()
	defer p.kindsMu.Unlock()
	if _, done := p.kinds.Load(group); done {
		return nil
	}
	kinds := make([]string, 0, len(p.cfg.Workers.handlers))
	limits := make([]string, 0, len(p.cfg.Workers.handlers))
	for k, h := range p.cfg.Workers.handlers {
		kinds = append(kinds, k)
		limits = append(limits, declaredLimits(h.opts.policy))
	}
	if _, err := p.pool.Exec(ctx, p.batches.q.RegisterKinds, group, kinds, limits); err != nil {
		return store.Classify("queue", "kinds", group, err)
	}
	p.kinds.Store(group, true)
	return nil
}

// declaredLimits is the JSON of the limits policy pol declares, as
// RecordKinds records them for `leasehold status` (see DeclaredLimits):
// KeyConcurrency as it applies (0 is 1).
func declaredLimits(pol Policy) string {
	b, _ := json.Marshal(DeclaredLimits{KeyConcurrency: max(pol.KeyConcurrency, 1), KeyRateStarts: pol.KeyRate.Starts,
		KeyRatePerMS: pol.KeyRate.Per.Milliseconds(), GroupConcurrency: pol.GroupConcurrency}) // cannot fail: ints
	return string(b)
}

// registerKinds is RecordKinds at a grant: a failure is logged, and the
// next grant tries again.
func (p *Processor) registerKinds(ctx context.Context, o partition.Ownership) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := p.RecordKinds(ctx, o.Group); err != nil && ctx.Err() == nil {
		p.fail("kinds", o, "queue: recording the kinds this worker handles failed", "err", err)
	}
}

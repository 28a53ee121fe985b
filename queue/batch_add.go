package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// Item is one item of a batch: a job with an item key.
type Item struct {
	// ID is the item's key, unique in its batch: adding an item whose ID
	// the batch has is a no-op if its kind, key and args are the same, an
	// error wrapping ErrItemConflict if not. 1 to 255 bytes of UTF-8.
	// Required.
	ID string
	// Key is the job's key (see Job.Key): items sharing one run one at a
	// time, in the order they were added. Defaults to none; a keyless
	// item's partition follows from its ID.
	Key string
	// Args are the job's arguments. Required.
	Args Args
	// MaxAttempts is how many times the item may run before it is
	// discarded. Defaults to the kind's Policy.MaxAttempts (see
	// WithPolicy), else Config.MaxAttempts.
	MaxAttempts int
	// Priority orders the item among its partition's due jobs, as
	// Job.Priority: 1 (the highest) to MaxPriority. Defaults to 1.
	Priority int
}

// Added counts what adding items did.
type Added struct {
	// Items is how many items the call stored or found stored (Added +
	// Duplicates): every item given, unless the call failed; then those of
	// the chunks committed before the error (none for AddItems).
	Items int
	// Added is how many items were new.
	Added int
	// Duplicates is how many items the batch had already (a producer
	// submitting again).
	Duplicates int
}

// AddItems adds items to batch name of group, in one transaction: all of
// them, or, on any error, none. Items the batch has already are counted
// as Duplicates. An unknown batch gives an error wrapping
// ErrUnknownBatch; a sealed or cancelled one, ErrBatchSealed or
// ErrBatchCancelled; an invalid or conflicting item, an *ItemError; a kind
// no worker of the group handles, a *KindError.
func (c *Client) AddItems(ctx context.Context, group, name string, items ...Item) (Added, error) {
	a, _, err := c.AddItemJobs(ctx, group, name, items...)
	return a, err
}

// AddItemJobs is AddItems, and also returns the job id of each item, in
// the order given (a duplicate's is the id of the item the batch has), so
// that a producer can follow or cancel one item (Client.JobInfo,
// Client.Cancel) without listing the batch. On error it returns no ids.
func (c *Client) AddItemJobs(ctx context.Context, group, name string, items ...Item) (Added, []int64, error) {
	ch, err := c.newChunk(group, name, len(items))
	if err != nil {
		return Added{}, nil, err
	}
	ch.wantJobs = true
	for i, it := range items {
		if err := ch.add(c, i, it); err != nil {
			return Added{}, nil, err
		}
	}
	a, err := c.addChunk(ctx, ch)
	if err != nil {
		return Added{}, nil, err
	}
	a.Items = len(items)
	ids := make([]int64, len(items))
	for i, j := range ch.pos {
		ids[i] = ch.jobs[j]
	}
	return a, ids, nil
}

// SubmitItems adds the items that seq yields to batch name of group, in
// chunks of Config.SubmitChunk items, one transaction each, holding no
// more than one chunk in memory. It stops at the first error (of seq, or
// of a chunk, as AddItems) and returns what the chunks before it added:
// run it again with the same items to resume, and the items added already
// count as Duplicates.
func (c *Client) SubmitItems(ctx context.Context, group, name string, seq iter.Seq2[Item, error]) (Added, error) {
	ch, err := c.newChunk(group, name, c.cfg.SubmitChunk)
	if err != nil {
		return Added{}, err
	}
	var total Added
	flush := func() error {
		a, err := c.addChunk(ctx, ch)
		if err != nil {
			return err
		}
		total.Added += a.Added
		total.Duplicates += a.Duplicates
		total.Items = ch.base + ch.n()
		ch.reset(total.Items)
		return nil
	}
	i := 0
	for it, err := range seq {
		if err != nil {
			return total, fmt.Errorf("queue: submit batch %q: item %d: %w", name, i, err)
		}
		if err := ch.add(c, i, it); err != nil {
			return total, err
		}
		i++
		if ch.n() >= c.cfg.SubmitChunk {
			if err := flush(); err != nil {
				return total, err
			}
		}
	}
	if ch.n() > 0 {
		if err := flush(); err != nil {
			return total, err
		}
	}
	return total, nil
}

// chunk is the items of one transaction, as the statement takes them.
type chunk struct {
	group, name string
	base        int // how many items of the call came before the chunk
	parts       []int32
	keys, kinds []string
	args        []string // JSON text
	maxes       []int32
	ids         []string
	holds       []bool
	prios       []int16
	maxSet      []bool         // the producer set the item's MaxAttempts
	at          []int          // each item's index in the call
	seen        map[string]int // item key -> position in the chunk
	dups        int            // items repeated within the chunk
	pos         []int          // each item given's position in the chunk (a repeat's: its first's)
	jobs        []int64        // each position's job id (set by addChunk; a skipped item's only if wantJobs)
	wantJobs    bool           // the caller wants the skipped items' job ids (AddItemJobs)
}

func (c *Client) newChunk(group, name string, size int) (*chunk, error) {
	if err := checkBatchName(group, name); err != nil {
		return nil, err
	}
	return &chunk{group: group, name: name, parts: make([]int32, 0, size), keys: make([]string, 0, size),
		kinds: make([]string, 0, size), args: make([]string, 0, size), maxes: make([]int32, 0, size),
		ids: make([]string, 0, size), holds: make([]bool, 0, size), prios: make([]int16, 0, size), maxSet: make([]bool, 0, size),
		at: make([]int, 0, size), seen: make(map[string]int, size)}, nil
}

func (ch *chunk) n() int { return len(ch.ids) + ch.dups }

func (ch *chunk) reset(base int) {
	ch.base = base
	ch.parts, ch.keys, ch.kinds, ch.args = ch.parts[:0], ch.keys[:0], ch.kinds[:0], ch.args[:0]
	ch.maxes, ch.ids, ch.holds, ch.at = ch.maxes[:0], ch.ids[:0], ch.holds[:0], ch.at[:0]
	ch.prios, ch.maxSet = ch.prios[:0], ch.maxSet[:0]
	ch.pos, ch.jobs = ch.pos[:0], ch.jobs[:0]
	clear(ch.seen)
	ch.dups = 0
}

// add checks item i and appends it (its partition is set by addChunk).
func (ch *chunk) add(c *Client, i int, it Item) error {
	bad := func(err error, format string, a ...any) error {
		return &ItemError{Index: i, Item: it.ID, Reason: fmt.Sprintf(format, a...), Err: err}
	}
	switch {
	case it.ID == "" || len(it.ID) > 255 || !utf8.ValidString(it.ID) || strings.ContainsRune(it.ID, 0):
		return bad(ErrInvalidItem, "the item key must be 1 to 255 bytes of UTF-8 without NUL")
	case strings.ContainsRune(it.Key, 0):
		return bad(ErrInvalidItem, "Key: contains NUL")
	}
	if err := c.check(i, Job{Group: ch.group, Key: it.Key, Args: it.Args, MaxAttempts: it.MaxAttempts, Priority: it.Priority}); err != nil {
		return bad(errors.Join(ErrInvalidItem, err), "%v", err)
	}
	b, err := json.Marshal(it.Args)
	if err != nil {
		return bad(errors.Join(ErrInvalidItem, err), "Args cannot be encoded as JSON: %v", err)
	}
	if hasNUL(b) {
		return bad(ErrInvalidItem, "Args: PostgreSQL cannot store a NUL character")
	}
	max := int32(c.cfg.MaxAttempts)
	if it.MaxAttempts > 0 {
		max = int32(it.MaxAttempts)
	}
	if j, ok := ch.seen[it.ID]; ok {
		// Repeated within the chunk: the same item, or a conflict.
		if ch.kinds[j] != it.Args.Kind() || ch.keys[j] != it.Key || !sameJSON([]byte(ch.args[j]), b) {
			return bad(ErrItemConflict, "item key repeated (item %d) with another kind, key or args", ch.at[j])
		}
		ch.dups++
		ch.pos = append(ch.pos, j)
		return nil
	}
	ch.pos = append(ch.pos, len(ch.ids))
	ch.seen[it.ID] = len(ch.ids)
	ch.keys, ch.kinds, ch.args = append(ch.keys, it.Key), append(ch.kinds, it.Args.Kind()), append(ch.args, string(b))
	ch.maxes, ch.ids, ch.holds = append(ch.maxes, max), append(ch.ids, it.ID), append(ch.holds, true)
	prio := int16(1)
	if it.Priority > 1 {
		prio = int16(it.Priority)
	}
	ch.prios, ch.maxSet = append(ch.prios, prio), append(ch.maxSet, it.MaxAttempts > 0)
	ch.at = append(ch.at, i)
	return nil
}

// addChunk adds a chunk's items in one transaction.
func (c *Client) addChunk(ctx context.Context, ch *chunk) (Added, error) {
	if len(ch.ids) == 0 {
		return Added{Duplicates: ch.dups}, nil
	}
	if err := c.checkKinds(ctx, ch.group, uniq(ch.kinds)); err != nil {
		return Added{}, err
	}
	n, err := c.groupCount(ctx, ch.group)
	if err != nil {
		return Added{}, err
	}
	ch.parts = ch.parts[:0]
	for i, id := range ch.ids {
		key := ch.keys[i]
		if key == "" {
			key = id // a keyless item's partition follows from its item key
		}
		ch.parts = append(ch.parts, int32(partition.OfString(key, n)))
	}
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return Added{}, store.Classify("queue", "add items", ch.name, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // after the commit: a no-op
	var id int64
	var sealed, cancelled bool
	err = tx.QueryRow(ctx, c.batches.q.LockAdd, ch.group, ch.name).Scan(&id, &sealed, &cancelled)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Added{}, fmt.Errorf("%w: %q in group %q", ErrUnknownBatch, ch.name, ch.group)
	case err != nil:
		return Added{}, store.Classify("queue", "add items", ch.name, err)
	case cancelled:
		return Added{}, fmt.Errorf("%w: %q in group %q: no items can be added", ErrBatchCancelled, ch.name, ch.group)
	case sealed:
		return Added{}, fmt.Errorf("%w: %q in group %q: no items can be added", ErrBatchSealed, ch.name, ch.group)
	}
	rows, err := tx.Query(ctx, c.batches.q.Add, id, ch.group, ch.parts, ch.keys, ch.kinds, ch.args, ch.maxes, ch.ids, ch.holds, c.q.Channel, ch.prios, ch.maxSet)
	if err != nil {
		return Added{}, store.Classify("queue", "add items", ch.name, err)
	}
	ch.jobs = ch.jobs[:0]
	var skipped []int64
	var ord int64
	var job *int64
	_, err = pgx.ForEachRow(rows, []any{&ord, &job}, func() error {
		if job == nil {
			skipped = append(skipped, ord)
			ch.jobs = append(ch.jobs, 0) // set by itemJobs
		} else {
			ch.jobs = append(ch.jobs, *job)
		}
		return nil
	})
	if err != nil {
		return Added{}, store.Classify("queue", "add items", ch.name, err)
	}
	if len(skipped) > 0 {
		if err := c.conflicts(ctx, tx, id, ch, skipped); err != nil {
			return Added{}, err
		}
		if ch.wantJobs {
			if err := c.itemJobs(ctx, tx, id, ch, skipped); err != nil {
				return Added{}, err
			}
		}
	}
	if err := store.Commit(ctx, tx, "queue: add items", ch.name); err != nil {
		return Added{}, store.ClassifyCommit("queue", fmt.Sprintf("add %d item(s) to batch", len(ch.ids)), ch.name, err)
	}
	return Added{Added: len(ch.ids) - len(skipped), Duplicates: len(skipped) + ch.dups}, nil
}

// conflicts returns an *ItemError for the first of the skipped items (by
// 1-based position in the chunk) that the batch has with another kind, key
// or args.
func (c *Client) conflicts(ctx context.Context, tx pgx.Tx, id int64, ch *chunk, skipped []int64) error {
	ids, kinds, keys, args := make([]string, len(skipped)), make([]string, len(skipped)), make([]string, len(skipped)), make([]string, len(skipped))
	for i, n := range skipped {
		j := n - 1
		ids[i], kinds[i], keys[i], args[i] = ch.ids[j], ch.kinds[j], ch.keys[j], ch.args[j]
	}
	var n int64
	var kind, key string
	var stored []byte
	err := tx.QueryRow(ctx, c.batches.q.Conflicts, id, ids, kinds, keys, args).Scan(&n, &kind, &key, &stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // every one is the same item
	}
	if err != nil {
		return store.Classify("queue", "add items", ch.name, err)
	}
	i := int(n) - 1
	j := int(skipped[i]) - 1
	var diff string
	switch {
	case kind != kinds[i]:
		diff = fmt.Sprintf("kind %q, not %q", kind, kinds[i])
	case key != keys[i]:
		diff = fmt.Sprintf("key %q, not %q", key, keys[i])
	default:
		diff = fmt.Sprintf("args %s, not %s", stored, args[i])
	}
	return &ItemError{Index: ch.at[j], Item: ids[i], Err: ErrItemConflict,
		Reason: fmt.Sprintf("batch %q has this item key with %s", ch.name, diff)}
}

// itemJobs sets the job ids of the skipped items (by 1-based position in
// the chunk) to those of the items the batch has.
func (c *Client) itemJobs(ctx context.Context, tx pgx.Tx, id int64, ch *chunk, skipped []int64) error {
	keys := make([]string, len(skipped))
	for i, n := range skipped {
		keys[i] = ch.ids[n-1]
	}
	rows, err := tx.Query(ctx, c.batches.q.ItemJobs, id, keys)
	if err != nil {
		return store.Classify("queue", "add items", ch.name, err)
	}
	found := 0
	var n, job int64
	_, err = pgx.ForEachRow(rows, []any{&n, &job}, func() error {
		found++
		ch.jobs[skipped[n-1]-1] = job
		return nil
	})
	if err != nil {
		return store.Classify("queue", "add items", ch.name, err)
	}
	if found != len(skipped) {
		// Skipped by the insert, yet not there: an item is never deleted
		// while its batch takes items, so this is a bug, reported.
		return fmt.Errorf("queue: add items to batch %q: %d of %d items already added not found", ch.name, len(skipped)-found, len(skipped))
	}
	return nil
}

// hasNUL reports whether JSON text b holds a NUL character, raw or
// escaped, which PostgreSQL's text and jsonb cannot store.
func hasNUL(b []byte) bool {
	return bytes.IndexByte(b, 0) >= 0 || bytes.Contains(b, []byte(`\u0000`))
}

// uniq returns the distinct values of s, in order of first appearance.
func uniq(s []string) []string {
	var out []string
	seen := make(map[string]bool)
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

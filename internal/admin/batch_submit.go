package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/queue"
)

// maxItemLine is the longest input line SubmitBatch accepts.
const maxItemLine = 1 << 20

// SubmitSpec says what `leasehold batch submit` creates and submits.
type SubmitSpec struct {
	// Group and Name name the batch.
	Group, Name string
	// Description is the batch's description.
	Description string
	// OnComplete and OnSuccess are the kinds of the batch's follow-ups (""
	// for none); OnCompleteArgs and OnSuccessArgs their arguments, a JSON
	// object ("" for {}).
	OnComplete, OnCompleteArgs string
	OnSuccess, OnSuccessArgs   string
	// Seal seals the batch after the last line.
	Seal bool
	// Chunk is how many items one transaction adds; 0 for the queue's
	// default (queue.Config.SubmitChunk).
	Chunk int
	// StepTimeout bounds each step's database work: creating the batch,
	// adding a chunk, sealing. 0 for no bound. (The whole command is not
	// bounded: standard input may be a slow producer's.)
	StepTimeout time.Duration
}

// SubmitResult is what SubmitBatch did, as `leasehold batch submit --json`
// prints it.
type SubmitResult struct {
	Group string `json:"group"`
	Name  string `json:"name"`
	ID    int64  `json:"id"`
	// Items counts the items read; Added the new ones, Duplicates those
	// the batch had already (a submission run again).
	Items      int `json:"items"`
	Added      int `json:"added"`
	Duplicates int `json:"duplicates"`
	// Sealed reports whether the batch is sealed (by --seal or before).
	Sealed bool `json:"sealed"`
	// State and Total are the batch's after the submission.
	State string `json:"state"`
	Total int64  `json:"total"`
}

// SubmitError reports where SubmitBatch stopped. The chunks before it were
// added (Added); running the same command again resumes, the items added
// already counting as duplicates.
type SubmitError struct {
	// Line is the input line at fault; 0 when it is not one line.
	Line int
	// First and Last are the input lines of the chunk refused as a whole
	// (a sealed or cancelled batch); 0 when Line is set.
	First, Last int
	// Reason says what is wrong.
	Reason string
	// Added counts what the chunks before it did.
	Added queue.Added
	// Err is the underlying error: a malformed line wraps ErrBadInput, an
	// item the queue refused is a *queue.ItemError, a kind without a
	// handler a *queue.KindError.
	Err error
}

// Error names the line, says why, how many items were added before it and
// that running the command again resumes.
func (e *SubmitError) Error() string {
	where := ""
	switch {
	case e.Line > 0:
		where = fmt.Sprintf("line %d: ", e.Line)
	case e.First > 0 && e.First == e.Last:
		where = fmt.Sprintf("line %d: ", e.First)
	case e.First > 0:
		where = fmt.Sprintf("lines %d to %d: ", e.First, e.Last)
	}
	if errors.Is(e.Err, queue.ErrBatchSealed) || errors.Is(e.Err, queue.ErrBatchCancelled) || errors.Is(e.Err, queue.ErrUnknownBatch) {
		// Running the command again would meet the same batch.
		return fmt.Sprintf("%s%s (%d items added before it, %d were there already)",
			where, e.Reason, e.Added.Added, e.Added.Duplicates)
	}
	return fmt.Sprintf("%s%s (%d items added before it, %d were there already; "+
		"run the same command again to resume: the items added count as duplicates)",
		where, e.Reason, e.Added.Added, e.Added.Duplicates)
}

// Unwrap returns the underlying error.
func (e *SubmitError) Unwrap() error { return e.Err }

// itemLine is one JSON line of `leasehold batch submit`.
type itemLine struct {
	Item        string          `json:"item"`
	Kind        string          `json:"kind"`
	Key         string          `json:"key"`
	Args        json.RawMessage `json:"args"`
	MaxAttempts int             `json:"max_attempts"`
	Priority    int             `json:"priority"`
}

// parseItem parses one line of `leasehold batch submit`.
func parseItem(text []byte) (queue.Item, error) {
	var l itemLine
	if err := decodeObject(text, &l, `{"item":…,"kind":…,"key":…,"args":{…}}`); err != nil {
		return queue.Item{}, err
	}
	switch {
	case l.Item == "":
		return queue.Item{}, errors.New(`no item (the item's key in the batch, e.g. "item":"user-42")`)
	case l.Kind == "":
		return queue.Item{}, errors.New("no kind")
	case l.MaxAttempts < 0 || l.MaxAttempts > queue.MaxAttempts:
		return queue.Item{}, fmt.Errorf("max_attempts %d is not in 0..%d", l.MaxAttempts, queue.MaxAttempts)
	case l.Priority < 0 || l.Priority > queue.MaxPriority:
		return queue.Item{}, fmt.Errorf("priority %d is not in 1..%d (0: the default, 1)", l.Priority, queue.MaxPriority)
	}
	args, err := objectArgs("args", l.Args)
	if err != nil {
		return queue.Item{}, err
	}
	return queue.Item{ID: l.Item, Key: l.Key, Args: rawArgs{l.Kind, args}, MaxAttempts: l.MaxAttempts, Priority: l.Priority}, nil
}

// objectArgs checks that raw, arguments named what, is a JSON object;
// absent or null is {}.
func objectArgs(what string, raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}"), nil
	}
	if raw[0] != '{' || !json.Valid(raw) {
		return nil, fmt.Errorf("%s %s: not a JSON object", what, raw)
	}
	return raw, nil
}

// followUp returns the follow-up of kind with args (JSON), nil for no
// kind. flag names it in errors.
func followUp(flag, kind, args string) (*queue.FollowUp, error) {
	if kind == "" {
		if args != "" {
			return nil, fmt.Errorf("%w: --%s-args without --%s", ErrBadInput, flag, flag)
		}
		return nil, nil
	}
	raw, err := objectArgs("--"+flag+"-args", json.RawMessage(args))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	return &queue.FollowUp{Args: rawArgs{kind, raw}}, nil
}

// seen is an item read: its input line and kind.
type seen struct {
	line int
	kind string
}

// itemReader reads the items of `leasehold batch submit`, one a line,
// remembering the lines and kinds of the last len(ring) items: enough to
// name the line of an item of the chunk being added, whatever its size
// (at most queue.MaxListLimit).
type itemReader struct {
	sc    *bufio.Scanner
	line  int    // lines read
	n     int    // items read
	ring  []seen // item i at i % len(ring)
	clock *stepClock
}

func newItemReader(r io.Reader, clock *stepClock) *itemReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxItemLine)
	return &itemReader{sc: sc, ring: make([]seen, queue.MaxListLimit), clock: clock}
}

// items yields the items read. A malformed line yields a *LineError and
// ends the sequence. The step clock runs while the consumer works on an
// item (SubmitItems adds a full chunk then), and from the end of the input
// (the last chunk).
func (r *itemReader) items() iter.Seq2[queue.Item, error] {
	return func(yield func(queue.Item, error) bool) {
		for r.sc.Scan() {
			r.line++
			text := bytes.TrimSpace(r.sc.Bytes())
			if len(text) == 0 {
				continue
			}
			it, err := parseItem(text)
			if err != nil {
				yield(queue.Item{}, &LineError{Line: r.line, Reason: err.Error()})
				return
			}
			r.ring[r.n%len(r.ring)] = seen{line: r.line, kind: it.Args.Kind()}
			r.n++
			r.clock.start()
			ok := yield(it, nil)
			r.clock.stop()
			if !ok {
				return
			}
		}
		if err := r.sc.Err(); err != nil {
			reason := fmt.Sprintf("reading standard input: %v", err)
			if errors.Is(err, bufio.ErrTooLong) {
				reason = fmt.Sprintf("longer than %d MiB", maxItemLine>>20)
			}
			yield(queue.Item{}, &LineError{Line: r.line + 1, Reason: reason})
			return
		}
		r.clock.start() // SubmitBatch stops it
	}
}

// lineOf returns the input line of item i, 0 if it is not remembered.
func (r *itemReader) lineOf(i int) int {
	if i < 0 || i >= r.n || i < r.n-len(r.ring) {
		return 0
	}
	return r.ring[i%len(r.ring)].line
}

// SubmitBatch creates batch spec.Name of spec.Group unless it exists with
// the same spec (queue.Client.CreateBatch), adds the items of r, one JSON
// object a line, in chunks of spec.Chunk items, one transaction each
// (queue.Client.SubmitItems), and with spec.Seal seals it. It holds no
// more than a chunk in memory. It stops at the first malformed line or
// refused chunk, with a *SubmitError naming the line.
func SubmitBatch(ctx context.Context, db *leasehold.DB, spec SubmitSpec, r io.Reader) (SubmitResult, error) {
	onComplete, err := followUp("on-complete", spec.OnComplete, spec.OnCompleteArgs)
	if err != nil {
		return SubmitResult{}, err
	}
	onSuccess, err := followUp("on-success", spec.OnSuccess, spec.OnSuccessArgs)
	if err != nil {
		return SubmitResult{}, err
	}
	q, err := queue.New(db, queue.Config{SubmitChunk: spec.Chunk})
	if err != nil {
		return SubmitResult{}, fmt.Errorf("%w: --chunk: %v", ErrBadInput, err)
	}
	ctx, clock := newStepClock(ctx, spec.StepTimeout)
	defer clock.close()
	clock.start()
	b, err := q.CreateBatch(ctx, queue.BatchSpec{Group: spec.Group, Name: spec.Name, Description: spec.Description,
		OnComplete: onComplete, OnSuccess: onSuccess})
	clock.stop()
	switch {
	case errors.Is(err, queue.ErrUnknownGroup):
		return SubmitResult{}, fmt.Errorf("%w (create it with `leasehold groups create %s --partitions N`, or start a worker of it)", err, spec.Group)
	case errors.Is(err, queue.ErrBatchExists):
		return SubmitResult{}, fmt.Errorf("%w (a batch's description and follow-ups are fixed when it is created: give the same, or another name)", err)
	case errors.Is(err, queue.ErrInvalidBatch):
		return SubmitResult{}, fmt.Errorf("%w: %v", ErrBadInput, err)
	case err != nil:
		return SubmitResult{}, Explain(ctx, err)
	}
	// A sealed or cancelled batch takes no items: say so before reading
	// the input. (One sealed meanwhile refuses the next chunk.)
	switch {
	case b.CancelledAt != nil:
		return SubmitResult{}, fmt.Errorf("%w: %q in group %q was cancelled at %s: it takes no more items",
			queue.ErrBatchCancelled, spec.Name, spec.Group, b.CancelledAt.Format(time.RFC3339))
	case b.Sealed():
		return SubmitResult{}, fmt.Errorf("%w: %q in group %q was sealed at %s with %d items: it takes no more "+
			"(a submission run again after its --seal has nothing to add)",
			queue.ErrBatchSealed, spec.Name, spec.Group, b.SealedAt.Format(time.RFC3339), b.Total)
	}
	in := newItemReader(r, clock)
	added, err := q.SubmitItems(ctx, spec.Group, spec.Name, in.items())
	clock.stop()
	if err != nil {
		return SubmitResult{}, in.explain(ctx, added, err)
	}
	res := SubmitResult{Group: spec.Group, Name: spec.Name, ID: b.ID, Items: added.Items, Added: added.Added,
		Duplicates: added.Duplicates}
	clock.start()
	if spec.Seal {
		b, err = q.SealBatch(ctx, spec.Group, spec.Name)
		if err != nil {
			err = fmt.Errorf("every item is added, but sealing failed: %w (`leasehold batch seal %s %s` seals it)", err, spec.Group, spec.Name)
		}
	} else {
		b, err = q.BatchByID(ctx, b.ID)
	}
	clock.stop()
	if err != nil {
		return SubmitResult{}, Explain(ctx, err)
	}
	res.Sealed, res.State, res.Total = b.Sealed(), string(b.State()), b.Total
	return res, nil
}

// explain turns the error of SubmitItems into a *SubmitError naming the
// input line at fault.
func (r *itemReader) explain(ctx context.Context, added queue.Added, err error) error {
	err = Explain(ctx, err)
	se := &SubmitError{Added: added, Err: err, Reason: err.Error()}
	start := added.Items // the refused chunk's first item
	var le *LineError
	var ie *queue.ItemError
	var ke *queue.KindError
	switch {
	case errors.As(err, &le):
		se.Line, se.Reason, se.Err = le.Line, le.Reason, fmt.Errorf("%w: %s", ErrBadInput, le.Reason)
	case errors.As(err, &ie):
		se.Line = r.lineOf(ie.Index)
		se.Reason = fmt.Sprintf("item %q: %s", ie.Item, r.relabel(ie.Reason))
	case errors.As(err, &ke):
		// The chunk's first item of a kind without a handler.
		for i := max(start, r.n-len(r.ring)); i < r.n; i++ {
			if slices.Contains(ke.Kinds, r.ring[i%len(r.ring)].kind) {
				se.Line = r.lineOf(i)
				break
			}
		}
	default:
		// The chunk as a whole was refused (a sealed or cancelled batch):
		// it began after the items added.
		if r.n > 0 {
			se.First, se.Last = r.lineOf(start), r.line
		}
	}
	return se
}

// relabel rewrites the "(item N)" of the queue's reason for an item
// repeated within a chunk into the input line of item N.
func (r *itemReader) relabel(reason string) string {
	const prefix = "item key repeated (item "
	rest, ok := strings.CutPrefix(reason, prefix)
	if !ok {
		return reason
	}
	num, tail, ok := strings.Cut(rest, ")")
	i, err := strconv.Atoi(num)
	if !ok || err != nil || r.lineOf(i) == 0 {
		return reason
	}
	return fmt.Sprintf("item key repeated (line %d)%s", r.lineOf(i), tail)
}

// stepClock bounds each step of a command's database work, rather than
// the whole command: the step's context is cancelled when a step runs
// longer than the timeout.
type stepClock struct {
	d     time.Duration
	timer *time.Timer
	stopC context.CancelCauseFunc
}

// newStepClock returns a context cancelled when a step of the clock runs
// longer than d (never for d <= 0), and the clock; close it when done.
func newStepClock(ctx context.Context, d time.Duration) (context.Context, *stepClock) {
	ctx, cancel := context.WithCancelCause(ctx)
	c := &stepClock{d: d, stopC: cancel}
	if d > 0 {
		c.timer = time.AfterFunc(time.Hour, func() {
			cancel(fmt.Errorf("a step of the database work took longer than %v (--timeout)", d))
		})
		c.timer.Stop()
	}
	return ctx, c
}

// start starts a step.
func (c *stepClock) start() {
	if c.timer != nil {
		c.timer.Reset(c.d)
	}
}

// stop ends a step.
func (c *stepClock) stop() {
	if c.timer != nil {
		c.timer.Stop()
	}
}

func (c *stepClock) close() {
	c.stop()
	c.stopC(nil)
}

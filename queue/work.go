package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence"
)

// Work is a job as its handler sees it.
type Work[T Args] struct {
	ID          int64
	Group       string
	Partition   int
	Key         string
	Attempt     int // 1 on the first run
	MaxAttempts int
	CreatedAt   time.Time
	// Token is the partition's fencing token for this run: carry it in
	// effects outside the queue's database.
	Token fence.Token
	// Batch is the id of the job's batch, for an item of a batch or one of
	// its follow-ups (0: none). Client.BatchByID reads it.
	Batch int64
	// Item is the job's item key in its batch ("": not a batch item).
	Item string
	Args T

	stamp *stamp // set when the handler is called (a rate-limited start; limits.go)
}

// Workers maps job kinds to handlers. Register handlers with Handle,
// HandleTx and HandleTxBatch before processing starts, one per kind: a
// second handler for a kind is an error of NewProcessor (and worker.New)
// wrapping ErrDuplicateHandler, not a silent replacement.
type Workers struct {
	handlers map[string]handler
	// dups counts the handlers registered for a kind beyond the first.
	dups map[string]int
	// use is the middleware of every handler (see Use).
	use []Middleware
	// maxPolicies: a handler's policy sets MaxAttempts, so fetched jobs
	// are looked up (see Processor.fetch); else none is.
	maxPolicies bool
}

// NewWorkers returns an empty set of handlers.
func NewWorkers() *Workers { return &Workers{handlers: make(map[string]handler)} }

// Handles reports whether a handler is registered for kind. A job of a
// kind without one is kept pending (see ProcessorConfig.UnknownKindDelay).
func (ws *Workers) Handles(kind string) bool {
	_, ok := ws.handlers[kind]
	return ok
}

// register registers h for kind, recording a second registration.
func (ws *Workers) register(kind string, h handler) {
	if ws.handlers == nil {
		ws.handlers = make(map[string]handler)
	}
	if _, ok := ws.handlers[kind]; ok {
		if ws.dups == nil {
			ws.dups = make(map[string]int)
		}
		ws.dups[kind]++
		return // the first handler stays
	}
	h.kind = kind
	ws.handlers[kind] = ws.wrap(h)
	if h.opts.policy.MaxAttempts > 0 {
		ws.maxPolicies = true
	}
}

// maxAttempts is the attempt limit of a job of kind stored with limit max:
// max if the enqueuer set it (set), else the kind's Policy.MaxAttempts if
// it has one, else max (the client's default). Processor.fetch and the
// inline runs of package leaseholdtest both apply it.
func (ws *Workers) maxAttempts(kind string, max int, set bool) int {
	if set || !ws.maxPolicies {
		return max
	}
	if m := ws.handlers[kind].opts.policy.MaxAttempts; m > 0 {
		return m // enqueued without a limit: the kind's policy sets it
	}
	return max
}

// check returns an error wrapping ErrDuplicateHandler that names the kinds
// registered more than once, nil if none was.
func (ws *Workers) check() error {
	for _, k := range slices.Sorted(maps.Keys(ws.handlers)) {
		if err := ws.handlers[k].opts.policy.check(); err != nil {
			return fmt.Errorf("the policy of kind %q: %w", k, err)
		}
	}
	if len(ws.dups) == 0 {
		return nil
	}
	kinds := slices.Sorted(maps.Keys(ws.dups))
	for i, k := range kinds {
		kinds[i] = fmt.Sprintf("%q (%d handlers)", k, ws.dups[k]+1)
	}
	return fmt.Errorf("%w: %s", ErrDuplicateHandler, strings.Join(kinds, ", "))
}

// Option configures the handler it is registered with (Handle, HandleTx,
// HandleTxBatch): for example its kind's policy or its middleware.
type Option func(*handlerOptions)

// handlerOptions holds what a handler's Options set.
type handlerOptions struct {
	middleware []Middleware // see WithMiddleware
	policy     Policy
	// timeoutCause is the cause of a context timed out by policy.Timeout.
	timeoutCause error
}

// options applies opts.
func options(opts []Option) handlerOptions {
	var o handlerOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	o.timeoutCause = o.policy.timeoutCause()
	return o
}

// handler runs one job, plain (tx nil) or transactional, or, for a batch
// handler, many jobs in one transaction.
type handler struct {
	kind     string
	opts     handlerOptions
	chain    HandlerFunc // the middleware around run or runBatch; nil: none (see Workers.wrap)
	tx       bool
	run      func(ctx context.Context, tx pgx.Tx, w *Work[rawArgs]) error
	runBatch func(ctx context.Context, tx pgx.Tx, ws []*Work[rawArgs]) error
	decodes  func(w *Work[rawArgs]) error // for batch handlers: checked before the batch
}

// rawArgs carries undecoded args until the typed handler decodes them.
type rawArgs struct{ b []byte }

func (rawArgs) Kind() string { return "" }

// errDecode marks args that cannot be decoded: retrying cannot help.
type errDecode struct{ err error }

func (e errDecode) Error() string { return "args do not decode: " + e.err.Error() }

func typed[T Args](w *Work[rawArgs]) (*Work[T], error) {
	var args T
	if err := json.Unmarshal(w.Args.b, &args); err != nil {
		return nil, errDecode{err}
	}
	return &Work[T]{ID: w.ID, Group: w.Group, Partition: w.Partition, Key: w.Key, Attempt: w.Attempt,
		MaxAttempts: w.MaxAttempts, CreatedAt: w.CreatedAt, Token: w.Token, Batch: w.Batch, Item: w.Item, Args: args, stamp: w.stamp}, nil
}

// kindOf returns the kind of T; for a pointer type, of a new value, since
// Kind may not accept a nil receiver.
func kindOf[T Args]() string {
	var zero T
	if t := reflect.TypeOf(zero); t != nil && t.Kind() == reflect.Pointer {
		return reflect.New(t.Elem()).Interface().(Args).Kind()
	}
	return zero.Kind()
}

// Handle registers a plain handler for the kind of T. Its job is completed
// with one fenced write, batched with other jobs, after it returns: a stale
// owner's completion is refused. Effects outside the queue's database are
// the handler's business: carry w.Token, or use an idempotency key.
func Handle[T Args](ws *Workers, fn func(ctx context.Context, w *Work[T]) error, opts ...Option) {
	ws.register(kindOf[T](), handler{opts: options(opts), run: func(ctx context.Context, _ pgx.Tx, w *Work[rawArgs]) error {
		t, err := typed[T](w)
		if err != nil {
			return err
		}
		w.stamp.set()
		return fn(ctx, t)
	}})
}

// HandleTx registers a transactional handler for the kind of T: it runs in
// a transaction in which its effects, the job's completion and the fence
// check commit together, so its effects in this database happen exactly
// once, even across pauses and takeovers.
func HandleTx[T Args](ws *Workers, fn func(ctx context.Context, tx pgx.Tx, w *Work[T]) error, opts ...Option) {
	ws.register(kindOf[T](), handler{opts: options(opts), tx: true, run: func(ctx context.Context, tx pgx.Tx, w *Work[rawArgs]) error {
		t, err := typed[T](w)
		if err != nil {
			return err
		}
		w.stamp.set()
		return fn(ctx, tx, t)
	}})
}

// HandleTxBatch registers a batch transactional handler for the kind of T:
// the due jobs of that kind in one fetch (at most one per key, so order is
// kept) run in one transaction, in which the handler's effects, all their
// completions and one fence check commit together. If the handler returns
// an error, the whole batch rolls back and every job in it is retried (use
// HandleTx where jobs must fail one by one). Jobs whose args do not decode
// are discarded one by one before the batch runs.
func HandleTxBatch[T Args](ws *Workers, fn func(ctx context.Context, tx pgx.Tx, ws []*Work[T]) error, opts ...Option) {
	ws.register(kindOf[T](), handler{
		opts: options(opts),
		tx:   true,
		decodes: func(w *Work[rawArgs]) error {
			_, err := typed[T](w)
			return err
		},
		runBatch: func(ctx context.Context, tx pgx.Tx, raws []*Work[rawArgs]) error {
			works := make([]*Work[T], len(raws))
			for i, r := range raws {
				t, err := typed[T](r)
				if err != nil {
					return err
				}
				works[i] = t
			}
			for _, r := range raws {
				r.stamp.set()
			}
			return fn(ctx, tx, works)
		},
	})
}

// snoozeError asks for the job to run again later without spending an
// attempt.
type snoozeError struct{ d time.Duration }

func (e snoozeError) Error() string { return fmt.Sprintf("queue: snoozed for %v", e.d) }

// Snooze returns an error that, returned by a handler, runs the job again
// after d without spending an attempt.
func Snooze(d time.Duration) error { return snoozeError{d} }

// cancelError asks for the job to be cancelled.
type cancelError struct{ err error }

func (e cancelError) Error() string { return "queue: cancelled: " + e.err.Error() }
func (e cancelError) Unwrap() error { return e.err }

// Cancel returns an error that, returned by a handler, cancels the job: it
// is not retried, and err is recorded.
func Cancel(err error) error {
	if err == nil {
		err = errors.New("cancelled by the handler")
	}
	return cancelError{err}
}

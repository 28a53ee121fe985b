package queue

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence"
)

// ErrNextTwice is the error of a run whose middleware called its next
// HandlerFunc more than once: the handler runs at most once per run.
var ErrNextTwice = errors.New("queue: middleware called next more than once")

// HandlerFunc runs one unit of work: one job of a plain or transactional
// handler, or a batch handler's batch. It is what a Middleware wraps.
type HandlerFunc func(ctx context.Context, run *Run) error

// Middleware wraps the runs of handlers, as net/http middleware wraps a
// handler: it gets the next HandlerFunc (another middleware, or at the end
// the handler) and returns the one to call instead. It may act before and
// after next, change the context next gets, or return without calling
// next: the run then succeeds or fails as it returns, without the handler.
// It must call next at most once (a second call returns ErrNextTwice).
//
// Its error is the run's error, as if the handler had returned it: the
// same retry, discard, Snooze and Cancel rules apply (found with
// errors.As, so they may be wrapped). A panic in a middleware is recovered
// like a handler's, and fails the run.
//
// Register middleware for every handler with Workers.Use, or for one with
// the WithMiddleware registration option; see docs/middleware.md.
type Middleware func(next HandlerFunc) HandlerFunc

// Run describes one unit of work to a Middleware: one job for a plain or
// transactional handler, the jobs of one batch for a batch handler.
// Middleware reads it; changing its fields changes nothing the handler
// gets (only the context passed to next does).
type Run struct {
	// Kind is the jobs' kind.
	Kind string
	// Group and Partition are the jobs' group and partition.
	Group     string
	Partition int
	// Token is the partition's fencing token for this run.
	Token fence.Token
	// Jobs are the jobs of the run: one for a plain or transactional
	// handler, the batch for a batch handler (HandleTxBatch).
	Jobs []RunJob
	// Tx is the transaction of a transactional or batch handler, in which
	// the jobs complete (nil for a plain handler). A middleware may write
	// in it: its effects commit with the jobs' completion, or roll back.
	Tx pgx.Tx

	tx     pgx.Tx // as the handler gets it (Tx is the caller's to change)
	works  []*Work[rawArgs]
	called bool
}

// RunJob is one job of a Run.
type RunJob struct {
	ID          int64
	Key         string
	Attempt     int // 1 on the first run
	MaxAttempts int
	CreatedAt   time.Time
	// Batch is the id of the job's batch (0: none); Item its item key in
	// it ("": not an item).
	Batch int64
	Item  string
	// Args are the job's args as stored, undecoded (JSON).
	Args json.RawMessage
}

// WithMiddleware is a registration option (Handle, HandleTx,
// HandleTxBatch) that wraps the handler in mw, the first outermost. The
// middleware of Workers.Use wraps it in turn.
func WithMiddleware(mw ...Middleware) Option {
	return func(o *handlerOptions) { o.middleware = append(o.middleware, mw...) }
}

// Use wraps every handler of ws, registered before or after, in mw: the
// first outermost, and outside the handler's own middleware
// (WithMiddleware). Middleware of a later Use is inside that of an earlier
// one. Like the handlers, call it before the Processor is made.
func (ws *Workers) Use(mw ...Middleware) {
	ws.use = append(ws.use, mw...)
	for kind, h := range ws.handlers {
		ws.handlers[kind] = ws.wrap(h)
	}
}

// wrap builds h's chain: Workers.Use middleware, then the handler's own,
// around the handler. With no middleware the chain is nil, and a run calls
// the handler directly, building no Run.
func (ws *Workers) wrap(h handler) handler {
	mws := slices.Concat(ws.use, h.opts.middleware)
	mws = slices.DeleteFunc(mws, func(m Middleware) bool { return m == nil })
	if len(mws) == 0 {
		h.chain = nil
		return h
	}
	next := HandlerFunc(func(ctx context.Context, r *Run) error {
		if r.called {
			return ErrNextTwice
		}
		r.called = true
		if h.runBatch != nil {
			return h.runBatch(ctx, r.tx, r.works)
		}
		return h.run(ctx, r.tx, r.works[0])
	})
	for _, mw := range slices.Backward(mws) {
		next = mw(next)
	}
	h.chain = next
	return h
}

// newRun describes ws, run in tx, to middleware.
func newRun(kind string, tx pgx.Tx, ws []*Work[rawArgs]) *Run {
	w0 := ws[0]
	r := &Run{Kind: kind, Group: w0.Group, Partition: w0.Partition, Token: w0.Token, Tx: tx, tx: tx, works: ws,
		Jobs: make([]RunJob, len(ws))}
	for i, w := range ws {
		r.Jobs[i] = RunJob{ID: w.ID, Key: w.Key, Attempt: w.Attempt, MaxAttempts: w.MaxAttempts, CreatedAt: w.CreatedAt,
			Batch: w.Batch, Item: w.Item, Args: json.RawMessage(w.Args.b)}
	}
	return r
}

package queue

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/outboxtx"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// handlerError marks an error returned by a handler: only those spend an
// attempt. (The processor's own failures, a lock timeout at the fence check,
// a lost connection at commit, leave the job pending for the next fetch.)
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }
func (e handlerError) Unwrap() error { return e.err }

// errFinished means a transactional job turned out to be finished already.
var errFinished = errors.New("queue: job already finished")

// runTx runs a transactional handler for one job; see runTxBatch.
func (p *Processor) runTx(ctx context.Context, o partition.Ownership, f fetched, h handler, w *Work[rawArgs]) error {
	return p.inTx(ctx, o, []fetched{f}, func(ctx context.Context, tx pgx.Tx) error { return call(ctx, h, tx, w) })
}

// runTxBatch runs a batch transactional handler for several jobs.
func (p *Processor) runTxBatch(ctx context.Context, o partition.Ownership, fs []fetched, h handler, ws []*Work[rawArgs]) error {
	return p.inTx(ctx, o, fs, callBatch(h, ws))
}

// callBatch returns the run of a batch handler in a transaction, turning a
// panic into an error with the stack.
func callBatch(h handler, ws []*Work[rawArgs]) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("handler panicked: %v\n%s", r, debug.Stack())
			}
		}()
		if h.chain != nil {
			return h.chain(ctx, newRun(h.kind, tx, ws))
		}
		return h.runBatch(ctx, tx, ws)
	}
}

// inTx runs a transactional handler: its effects, the jobs' completion
// and the fence check commit together. The fence is checked after the
// handler, in the completing statement, so the lease row is locked (against
// takeovers and renewals) only for the completion and the commit, not for
// the handler's whole run. A
// handler error rolls everything back and is returned, to be recorded as
// the job's outcome.
func (p *Processor) inTx(ctx context.Context, o partition.Ownership, fs []fetched, run func(context.Context, pgx.Tx) error) error {
	tx, err := p.fence.Begin(ctx) // timeouts set from the start: a stalled handler is cut off
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		tx.Rollback(rctx) // after a commit: a no-op
	}()
	return p.runIn(ctx, tx, o, fs, run, true)
}

// runIn is inTx on tx: the handler, then the seal of the records it
// appended to the outbox, the fence check and the jobs' completion, the
// batches that finishes, and, if commit, the commit. The inline runs of the
// test helpers (inline.go) run it without the commit in a savepoint of the
// test's transaction.
func (p *Processor) runIn(ctx context.Context, tx pgx.Tx, o partition.Ownership, fs []fetched, run func(context.Context, pgx.Tx) error, commit bool) error {
	ids := make([]int64, len(fs))
	for i, f := range fs {
		ids[i] = f.id
	}
	box := outboxtx.New(p.place, p.st, o.Group, o.Partition, o.Token, tx)
	herr := run(outboxtx.With(ctx, box), &jobTx{Tx: lease.Managed(tx), running: ids})
	box.Close()
	if tx.Conn().PgConn().TxStatus() == 'I' {
		// The handler ended the transaction itself, with a raw COMMIT or
		// ROLLBACK through Exec (Commit and Rollback refuse): its effects
		// may have committed without the fence check and the job's
		// completion, which must not now run in autocommit. Nothing more is
		// done on this connection; the attempt is spent (recorded by the
		// completer, fenced), so that the handler bug cannot apply its
		// effects again and again without end.
		err := fmt.Errorf("%w (jobs %v)", lease.ErrTxEnded, ids)
		if herr != nil { // it also failed: both are recorded
			err = fmt.Errorf("%w (jobs %v); the handler's error: %w", lease.ErrTxEnded, ids, herr)
		}
		p.log.Error("queue: a transactional handler ended its transaction itself; its effects may have committed unfenced, without the job's completion",
			"group", o.Group, "partition", o.Partition, "jobs", ids, "kind", fs[0].kind, "err", err)
		return handlerError{err}
	}
	if herr != nil {
		return handlerError{timedOut(ctx, herr)}
	}
	// The handler succeeded. Commit even if its context was cancelled
	// meanwhile (a handoff began, the job timed out): the fence decides, and
	// while the lease is still this grant's, the work is not lost.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	done := make([]outcome, len(fs))
	for i, f := range fs {
		done[i] = outcome{id: f.id, state: "completed", spent: f.spend(1), item: f.item != ""}
	}
	// The fence check and the completion, in one statement: the lease row
	// is locked FOR KEY SHARE until the commit (no takeover commits before).
	// Before it, in the same round trip, the records the handler appended
	// to the outbox become one segment, numbered under the partition's
	// head row, locked until the commit.
	complete := on(tx)
	if box.Added() > 0 {
		complete = after(tx, func(b *pgx.Batch) {
			// The appending transactions of a partition commit one after
			// the other (the head row): the seal may wait for several
			// commits, up to the statement timeout rather than the lock
			// timeout meant for the lease row.
			fc := p.fence.Config()
			b.Queue("SET LOCAL lock_timeout = " + ms(fc.StatementTimeout))
			box.QueueSeal(b)
			b.Queue("SET LOCAL lock_timeout = " + ms(fc.LockTimeout))
		})
	}
	n, drained, err := p.completeFencedOn(ctx, complete, o, done)
	if err != nil {
		return broken(err)
	}
	if n < len(fs) {
		return errFinished // rolled back: effects must not apply twice
	}
	// The jobs finished the last items of their batches' partitions: the
	// batches may be finished, their follow-ups enqueued by this commit.
	if err := p.batches.finish(ctx, tx, drained, p.log); err != nil || !commit {
		return err
	}
	err = store.Commit(ctx, tx, "queue: commit", o.Lease.Name())
	box.Committed(p.log) // the relay reads what committed: a wake-up after a failed commit finds nothing new
	if err != nil {
		return commitFailed(store.ClassifyCommit("queue", fmt.Sprintf("commit %d job(s) from %d", len(fs), fs[0].id), o.Lease.Name(), err))
	}
	return nil
}

// ms renders d for a SET of a timeout in milliseconds (at least 1).
func ms(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }

// jobTx is the transaction a transactional handler gets: managed (its
// Commit and Rollback refuse), and knowing the jobs it runs, so that
// Client.EnqueueTx on it can pass a running job's unique key to its
// successor (see releaseUnique).
type jobTx struct {
	pgx.Tx
	running []int64
}

// Begin starts a savepoint that still knows the running jobs.
func (t *jobTx) Begin(ctx context.Context) (pgx.Tx, error) {
	sp, err := t.Tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &jobTx{Tx: sp, running: t.running}, nil
}

// commitFailed sorts the error of a transactional run's COMMIT, classified
// by store.ClassifyCommit. The handler returned nil and the completion was
// written, so only a COMMIT the server refused with an ERROR answer (a
// deferred constraint or trigger of the handler's effects) is the
// handler's failure, and spends an attempt. A COMMIT whose outcome is
// unknown (a lost or stalled connection, a FATAL answer such as the
// idle-in-transaction timeout the stall ran into) is the processor's: the
// job is not charged and runs again under the fence, unless the COMMIT did
// go through and finished it.
func commitFailed(err error) error {
	var pe *pgconn.PgError
	if !fence.IsIndeterminate(err) && errors.As(err, &pe) { // an ERROR answer: see ClassifyCommit
		return handlerError{fmt.Errorf("queue: the handler's effects did not commit: %w", err)}
	}
	return err
}

// broken makes err, from a statement after a handler that returned nil, the
// handler's error when the handler broke its transaction: it ignored an
// error that aborted it, ended it itself, or left it idle past the fence's
// idle-in-transaction timeout. The attempt is then spent; otherwise the job
// would run again at once, forever, without spending one.
func broken(err error) error {
	var pe *pgconn.PgError
	if errors.Is(err, pgx.ErrTxClosed) || errors.Is(err, pgx.ErrTxCommitRollback) ||
		errors.As(err, &pe) && (pe.Code == "25P02" || pe.Code == "25P03") {
		return handlerError{fmt.Errorf("queue: the handler returned nil but broke its transaction: %w", err)}
	}
	return err
}

// call runs a handler, through its middleware if it has any, turning a
// panic (of the handler or a middleware) into an error with the stack.
func call(ctx context.Context, h handler, tx pgx.Tx, w *Work[rawArgs]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", r, debug.Stack())
		}
	}()
	if h.chain != nil {
		return h.chain(ctx, newRun(h.kind, tx, []*Work[rawArgs]{w}))
	}
	return h.run(ctx, tx, w)
}

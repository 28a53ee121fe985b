package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/backoff"
	"github.com/leasehold/leasehold/partition"
)

// ProcessorConfig configures a Processor.
type ProcessorConfig struct {
	// Schema is the schema holding leasehold's tables. Defaults to
	// "leasehold".
	Schema string
	// Workers holds the handlers. Required.
	Workers *Workers
	// BatchSize is how many due jobs one fetch returns. Defaults to 100.
	BatchSize int
	// PollInterval is how long an idle partition waits before fetching
	// again. Defaults to 500ms.
	PollInterval time.Duration
	// MinRetry and MaxRetry bound the delay before a failed job runs again:
	// full jitter over min(MaxRetry, MinRetry × 2^(attempt-1)). Default to
	// 1s and 1h.
	MinRetry, MaxRetry time.Duration
	// UnknownKindDelay is how long a job whose kind has no handler waits
	// before it is looked at again; it is kept pending, spends no attempt,
	// and the problem is recorded on the job and logged. Defaults to 1m.
	UnknownKindDelay time.Duration
	// Retention is how long finished (completed, discarded, cancelled) jobs
	// are kept; each partition's owner deletes older ones when idle.
	// Defaults to 24h.
	Retention time.Duration
	// Fence sets the timeouts of the fenced transactions. Its Schema is
	// ignored (Schema above applies).
	Fence fence.PostgresConfig
	// Rand is the source of retry jitter. Defaults to a random seed.
	Rand *rand.Rand
	// Logger receives job failures and fencing refusals. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Processor runs the jobs of the partitions a member owns. Pass its Run as
// partition.Config.Run.
type Processor struct {
	pool  *pgxpool.Pool
	cfg   ProcessorConfig
	q     queries
	fence *fence.Postgres
	retry *backoff.Backoff
	log   *slog.Logger
}

// NewProcessor returns a Processor on pool. It validates cfg and does no I/O.
func NewProcessor(pool *pgxpool.Pool, cfg ProcessorConfig) (*Processor, error) {
	switch {
	case pool == nil:
		return nil, fmt.Errorf("%w: nil pool", ErrInvalidConfig)
	case cfg.Workers == nil:
		return nil, fmt.Errorf("%w: Workers required", ErrInvalidConfig)
	case cfg.BatchSize < 0 || cfg.PollInterval < 0 || cfg.MinRetry < 0 || cfg.MaxRetry < 0 ||
		cfg.UnknownKindDelay < 0 || cfg.Retention < 0:
		return nil, fmt.Errorf("%w: negative value", ErrInvalidConfig)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 100
	}
	def(&cfg.PollInterval, 500*time.Millisecond)
	def(&cfg.MinRetry, time.Second)
	def(&cfg.MaxRetry, time.Hour)
	def(&cfg.UnknownKindDelay, time.Minute)
	def(&cfg.Retention, 24*time.Hour)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	q, err := render(cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	fc := cfg.Fence
	fc.Schema = cfg.Schema
	f, err := fence.NewPostgres(fc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return &Processor{pool: pool, cfg: cfg, q: q, fence: f,
		retry: backoff.New(cfg.MinRetry, cfg.MaxRetry, cfg.Rand), log: cfg.Logger}, nil
}

// Run processes the due jobs of o's partition, in batches, until ctx is
// cancelled (handoff, lost lease, Stop): then it takes no new job, records
// the outcomes of the jobs it ran, and returns. It returns at once when a
// fenced write is refused: a newer owner has the partition.
func (p *Processor) Run(ctx context.Context, o partition.Ownership) {
	log := p.log.With("group", o.Group, "partition", o.Partition, "token", int64(o.Token))
	var retained time.Time
	for ctx.Err() == nil {
		n, err := p.batch(ctx, o, log)
		switch {
		case errors.Is(err, fence.ErrFenced):
			log.Warn("queue: fenced: a newer owner has the partition", "err", err)
			return
		case err != nil && ctx.Err() == nil:
			log.Warn("queue: batch failed", "err", err)
		}
		if n > 0 && err == nil {
			continue
		}
		if time.Since(retained) > time.Minute {
			retained = time.Now()
			if _, err := p.pool.Exec(ctx, p.q.retain, o.Group, o.Partition, p.cfg.Retention.Microseconds()); err != nil && ctx.Err() == nil {
				log.Warn("queue: deleting old finished jobs failed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(p.cfg.PollInterval):
		}
	}
}

// fetched is a due job as read by the owner.
type fetched struct {
	id           int64
	key, kind    string
	args         []byte
	attempt, max int
	created      time.Time
}

// outcome is what becomes of one run of a job.
type outcome struct {
	id    int64
	state string // pending (retry or snooze), completed, discarded, cancelled
	spent int32  // attempts spent: 1, or 0 for a snooze
	delay *int64 // microseconds from now until the job is due again
	err   *string
}

// batch runs one batch of due jobs and returns how many it fetched.
func (p *Processor) batch(ctx context.Context, o partition.Ownership, log *slog.Logger) (int, error) {
	rows, err := p.pool.Query(ctx, p.q.fetch, o.Group, o.Partition, p.cfg.BatchSize)
	if err != nil {
		return 0, err
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fetched, error) {
		var f fetched
		err := r.Scan(&f.id, &f.key, &f.kind, &f.args, &f.attempt, &f.max, &f.created)
		return f, err
	})
	if err != nil || len(jobs) == 0 {
		return 0, err
	}
	outs := make([]outcome, 0, len(jobs))
	type pending struct {
		fs    []fetched
		works []*Work[rawArgs]
	}
	batches := make(map[string]*pending) // by kind, for batch handlers
	for _, f := range jobs {
		if ctx.Err() != nil {
			break // handing off or lost: take no new job
		}
		w := &Work[rawArgs]{ID: f.id, Group: o.Group, Partition: o.Partition, Key: f.key, Attempt: f.attempt + 1,
			MaxAttempts: f.max, CreatedAt: f.created, Token: o.Token, Args: rawArgs{f.args}}
		h, ok := p.cfg.Workers.handlers[f.kind]
		if !ok {
			log.Warn("queue: no handler for the job's kind; kept pending", "job", f.id, "kind", f.kind)
			outs = append(outs, p.later(f.id, p.cfg.UnknownKindDelay, fmt.Sprintf("no handler for kind %q", f.kind)))
			continue
		}
		if h.runBatch != nil {
			if err := h.decodes(w); err != nil {
				outs = append(outs, p.outcome(f, err, log))
				continue
			}
			b := batches[f.kind]
			if b == nil {
				b = &pending{}
				batches[f.kind] = b
			}
			b.fs, b.works = append(b.fs, f), append(b.works, w)
			continue
		}
		if !h.tx {
			if err := call(ctx, h, nil, w); !interrupted(ctx, err) {
				outs = append(outs, p.outcome(f, err, log))
			}
			continue
		}
		err := p.runTx(ctx, o, f, h, w)
		rec, fenced := p.txOutcome(ctx, f, err, log)
		if fenced {
			return len(jobs), err
		}
		if rec != nil {
			outs = append(outs, *rec)
		}
	}
	for kind, b := range batches {
		if ctx.Err() != nil {
			break
		}
		err := p.runTxBatch(ctx, o, b.fs, p.cfg.Workers.handlers[kind], b.works)
		for _, f := range b.fs {
			rec, fenced := p.txOutcome(ctx, f, err, log)
			if fenced {
				return len(jobs), err
			}
			if rec != nil {
				outs = append(outs, *rec)
			}
		}
	}
	if len(outs) == 0 {
		return len(jobs), nil
	}
	// Record the outcomes even when ctx was just cancelled: the lease is
	// held until Run returns, and the fence refuses a stale owner.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return len(jobs), p.fence.Tx(cctx, p.pool, o.Lease.Name(), o.Token, func(tx pgx.Tx) error {
		_, err := p.complete(cctx, tx, o.Token, outs)
		return err
	})
}

// interrupted reports whether a handler failed because its partition is
// being handed off or lost: the job then stays pending, without spending an
// attempt, for the next owner.
func interrupted(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil
}

// handlerError marks an error returned by a handler: only those spend an
// attempt. (The processor's own failures, a lock timeout at the fence check,
// a lost connection at commit, leave the job pending for the next fetch.)
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }
func (e handlerError) Unwrap() error { return e.err }

// txOutcome sorts the result of a transactional run: done (nothing to
// record), fenced (the partition has a newer owner), or an outcome to record.
func (p *Processor) txOutcome(ctx context.Context, f fetched, err error, log *slog.Logger) (rec *outcome, fenced bool) {
	var he handlerError
	switch {
	case err == nil, errors.Is(err, errFinished), interrupted(ctx, err):
		return nil, false
	case errors.As(err, &he):
		o := p.outcome(f, he.err, log)
		return &o, false
	case errors.Is(err, fence.ErrFenced):
		return nil, true
	}
	log.Warn("queue: job not recorded; it runs again", "job", f.id, "kind", f.kind, "err", err)
	return nil, false
}

// errFinished means a transactional job turned out to be finished already.
var errFinished = errors.New("queue: job already finished")

// runTx runs a transactional handler for one job; see runTxBatch.
func (p *Processor) runTx(ctx context.Context, o partition.Ownership, f fetched, h handler, w *Work[rawArgs]) error {
	return p.inTx(ctx, o, []fetched{f}, func(tx pgx.Tx) error { return call(ctx, h, tx, w) })
}

// runTxBatch runs a batch transactional handler for several jobs.
func (p *Processor) runTxBatch(ctx context.Context, o partition.Ownership, fs []fetched, h handler, ws []*Work[rawArgs]) error {
	return p.inTx(ctx, o, fs, func(tx pgx.Tx) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("handler panicked: %v\n%s", r, debug.Stack())
			}
		}()
		return h.runBatch(ctx, tx, ws)
	})
}

// inTx runs a transactional handler: its effects, the jobs' completion
// and the fence check commit together. The fence is checked after the
// handler, so the lease row is locked (against takeovers and renewals) only
// for the completion and the commit, not for the handler's whole run. A
// handler error rolls everything back and is returned, to be recorded as
// the job's outcome.
func (p *Processor) inTx(ctx context.Context, o partition.Ownership, fs []fetched, run func(pgx.Tx) error) error {
	tx, err := p.fence.Begin(ctx, p.pool) // timeouts set from the start: a stalled handler is cut off
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		tx.Rollback(rctx) // after a commit: a no-op
	}()
	if err := run(tx); err != nil {
		return handlerError{err}
	}
	if err := p.fence.Check(ctx, tx, o.Lease.Name(), o.Token); err != nil {
		return err
	}
	done := make([]outcome, len(fs))
	for i, f := range fs {
		done[i] = outcome{id: f.id, state: "completed", spent: 1}
	}
	n, err := p.complete(ctx, tx, o.Token, done)
	if err != nil {
		return err
	}
	if n < len(fs) {
		return errFinished // rolled back: effects must not apply twice
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("queue: commit %d job(s) from %d: %w", len(fs), fs[0].id, err)
	}
	return nil
}

// call runs a handler, turning a panic into an error with the stack.
func call(ctx context.Context, h handler, tx pgx.Tx, w *Work[rawArgs]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return h.run(ctx, tx, w)
}

// outcome maps a handler's result to what becomes of the job.
func (p *Processor) outcome(f fetched, err error, log *slog.Logger) outcome {
	var snooze snoozeError
	var cancel cancelError
	var decode errDecode
	switch {
	case err == nil:
		return outcome{id: f.id, state: "completed", spent: 1}
	case errors.As(err, &snooze):
		return p.later(f.id, snooze.d, "")
	case errors.As(err, &cancel):
		return failed(f.id, "cancelled", err)
	case errors.As(err, &decode):
		log.Warn("queue: job discarded: its args do not decode", "job", f.id, "kind", f.kind, "err", err)
		return failed(f.id, "discarded", err)
	case f.attempt+1 >= f.max:
		log.Warn("queue: job discarded after its last attempt", "job", f.id, "kind", f.kind, "attempt", f.attempt+1, "err", err)
		return failed(f.id, "discarded", err)
	}
	log.Warn("queue: job failed; will retry", "job", f.id, "kind", f.kind, "attempt", f.attempt+1, "err", err)
	o := failed(f.id, "pending", err)
	d := p.retry.Delay(f.attempt).Microseconds()
	o.delay = &d
	return o
}

func failed(id int64, state string, err error) outcome {
	msg := storable(err.Error())
	return outcome{id: id, state: state, spent: 1, err: &msg}
}

// storable makes msg storable as PostgreSQL text: valid UTF-8 without NUL.
// An unstorable message would fail the whole batch's completion.
func storable(msg string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(msg, "\uFFFD"), "\x00", "\uFFFD")
}

// later keeps a job pending for d without spending an attempt, recording
// msg if not empty.
func (p *Processor) later(id int64, d time.Duration, msg string) outcome {
	us := d.Microseconds()
	o := outcome{id: id, state: "pending", delay: &us}
	if msg != "" {
		msg = storable(msg)
		o.err = &msg
	}
	return o
}

// complete records outcomes in one statement and returns how many jobs it
// changed (finished jobs are left alone).
func (p *Processor) complete(ctx context.Context, tx pgx.Tx, token fence.Token, outs []outcome) (int, error) {
	n := len(outs)
	ids, states, spent := make([]int64, n), make([]string, n), make([]int32, n)
	delays, errs := make([]*int64, n), make([]*string, n)
	for i, o := range outs {
		ids[i], states[i], spent[i], delays[i], errs[i] = o.id, o.state, o.spent, o.delay, o.err
	}
	tag, err := tx.Exec(ctx, p.q.complete, ids, states, spent, delays, errs, int64(token))
	return int(tag.RowsAffected()), err
}

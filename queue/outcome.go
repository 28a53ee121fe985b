package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// outcome is what becomes of one run of a job.
type outcome struct {
	id    int64
	state string // pending (retry or snooze), completed, discarded, cancelled
	spent int32  // attempts spent: 1, or 0 for a snooze
	delay *int64 // microseconds from now until the job is due again
	err   *string
	// charged: the run's attempt was spent before it (recovery), so spent
	// is one less than the outcome spends.
	charged bool
	// item: the job is a batch item, whose finish may finish its batch
	// (see Processor.record).
	item bool
	// holds, if not nil, is the job's new holds (a retry under a policy's
	// FailureHold): whether it holds its key's later jobs from now on.
	holds *bool
}

// outcome maps a handler's result to what becomes of the job.
func (p *Processor) outcome(f fetched, err error, log *slog.Logger) outcome {
	o := p.outcomeOf(f, err, log)
	o.spent, o.charged, o.item = f.spend(o.spent), f.charged, f.item != ""
	return o
}

func (p *Processor) outcomeOf(f fetched, err error, log *slog.Logger) outcome {
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
	pol := p.cfg.Workers.handlers[f.kind].opts.policy
	d := p.backoff(f, pol, log).Microseconds()
	o.delay = &d
	switch {
	case f.key == "":
	case pol.FailureHold == HoldKey && !f.holds:
		o.holds = &holdTrue
	case pol.FailureHold == ReleaseKey && f.holds:
		o.holds = &holdFalse
	case pol.FailureHold == HoldAsEnqueued && f.holds && p.keyLimit(f) > 1:
		// A key whose jobs run several at once keeps no order: a failed
		// job does not hold the others (Policy.KeyConcurrency).
		o.holds = &holdFalse
	}
	return o
}

var holdTrue, holdFalse = true, false

// backoff is the delay before failed job f runs again: its policy's
// Backoff, else the Processor's. A Backoff that panics does not take the
// worker down: the Processor's delay is used, and the panic logged at
// ERROR.
func (p *Processor) backoff(f fetched, pol Policy, log *slog.Logger) (d time.Duration) {
	if pol.Backoff == nil {
		return p.retry.Delay(f.attempt)
	}
	defer func() {
		if v := recover(); v != nil {
			log.Error("queue: the policy's Backoff panicked; using the Processor's backoff", "job", f.id,
				"kind", f.kind, "attempt", f.attempt+1, "panic", v, "stack", string(debug.Stack()))
			d = p.retry.Delay(f.attempt)
		}
	}()
	return max(pol.Backoff(f.attempt+1), 0)
}

func failed(id int64, state string, err error) outcome {
	msg := storable(err.Error())
	return outcome{id: id, state: state, spent: 1, err: &msg}
}

// maxErrorBytes bounds an error text as stored with a job (see storable):
// 4 KiB, documented in docs/queue.md.
const maxErrorBytes = 4096

// storable makes msg storable as PostgreSQL text: valid UTF-8 without NUL,
// at most maxErrorBytes of the message (cut on a character boundary) and a
// marker saying how much was cut. An unstorable message would fail the
// whole batch's completion, and a huge one would be appended to the job's
// errors on every attempt.
func storable(msg string) string {
	msg = strings.ReplaceAll(strings.ToValidUTF8(msg, "\uFFFD"), "\x00", "\uFFFD")
	if len(msg) <= maxErrorBytes {
		return msg
	}
	cut := maxErrorBytes
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… [truncated %d bytes]", msg[:cut], len(msg)-cut)
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

// result is the Outcome an outcome records.
func (o outcome) result() Outcome {
	spent := o.spent
	if o.charged {
		spent++ // the attempt spent before the run is the run's
	}
	switch {
	case o.state == "pending" && spent == 0:
		return OutcomeSnoozed
	case o.state == "pending":
		return OutcomeRetried
	}
	return Outcome(o.state) // completed, discarded, cancelled
}

// grantOutcomes are outcomes of jobs run under one grant.
type grantOutcomes struct {
	o    partition.Ownership
	outs []outcome
}

// completeFenced records the outcomes of one grant, fenced: completeGrants
// for one grant, its refusal as the error.
func (p *Processor) completeFenced(ctx context.Context, db fence.Querier, o partition.Ownership, outs []outcome) (changed int, drained []int64, err error) {
	return p.completeFencedOn(ctx, on(db), o, outs)
}

// completeFencedOn is completeFenced with its statement run by run.
func (p *Processor) completeFencedOn(ctx context.Context, run runner, o partition.Ownership, outs []outcome) (changed int, drained []int64, err error) {
	refused := make([]error, 1)
	changed, drained, err = p.completeGrants(ctx, run, []grantOutcomes{{o, outs}}, refused)
	if err == nil {
		err = refused[0]
	}
	return changed, drained, err
}

// completeGrants records outcomes of any number of grants in one fenced
// statement (see queueCompleteFenced in internal/store) run by run: in a
// transaction of its own (standalone) or in a transactional handler's
// (on). Each grant's outcomes are applied only while its lease
// carries its token and is live: refused[i] is set to a *fence.FencedError
// for grant gs[i] if they were not, nil if they were (refused must be as
// long as gs). It returns how many jobs changed in all (finished ones are
// left alone), and err if the statement failed (no outcome recorded).
//
// Outcomes among which is a batch item take the statement that counts
// items (CompleteItems), which also returns the batches of which it
// finished a partition's last item (drained): run on the pool, the caller
// must then finish them in the same transaction (see record). The rows are
// changed (and locked) in id order, as every statement that changes many
// batch items does, so that two of them never wait for each other in a
// cycle.
func (p *Processor) completeGrants(ctx context.Context, run runner, gs []grantOutcomes, refused []error) (changed int, drained []int64, err error) {
	if p.trace.tracer != nil {
		var span trace.Span
		ctx, span = p.trace.startComplete(ctx, gs)
		defer func() { end(span, err, "") }()
	}
	type row struct {
		outcome
		token int64
		lease string
	}
	var rs []row
	item := false
	for _, g := range gs {
		name := g.o.Lease.Name()
		for _, o := range g.outs {
			rs = append(rs, row{o, int64(g.o.Token), name})
			item = item || o.item
		}
	}
	stmt := p.q.CompleteFenced
	if item {
		stmt = p.q.CompleteItems
	}
	slices.SortStableFunc(rs, func(a, b row) int { return cmp.Compare(a.id, b.id) })
	n := len(rs)
	ids, states, spent := make([]int64, n), make([]string, n), make([]int32, n)
	delays, errs, tokens, leases := make([]*int64, n), make([]*string, n), make([]int64, n), make([]string, n)
	var holds []*bool // nil (no change of holds) unless a policy changes one
	for i, o := range rs {
		ids[i], states[i], spent[i], delays[i], errs[i], tokens[i], leases[i] = o.id, o.state, o.spent, o.delay, o.err, o.token, o.lease
		if o.holds != nil {
			if holds == nil {
				holds = make([]*bool, n)
			}
			holds[i] = o.holds
		}
	}
	type found struct {
		token fence.Token
		live  bool
	}
	leased := make(map[string]found, len(gs))
	var unapplied []int64
	err = run(ctx, stmt, []any{ids, states, spent, delays, errs, tokens, leases,
		strconv.FormatInt(max(p.fence.Config().LockTimeout.Milliseconds(), 1), 10), holds}, func(rows pgx.Rows) error {
		var name string
		var f found
		var current int64
		_, err := pgx.ForEachRow(rows, []any{&name, &current, &f.live, &changed, &drained, &unapplied}, func() error {
			f.token = fence.Token(current)
			leased[name] = f
			return nil
		})
		return err
	})
	if err != nil {
		return 0, nil, fmt.Errorf("queue: record %d outcome(s): %w", n, err)
	}
	for i, g := range gs {
		name := g.o.Lease.Name()
		f, ok := leased[name]
		switch {
		case !ok:
			refused[i] = &fence.FencedError{Resource: name, Held: g.o.Token, Reason: "no such lease", Check: fence.CheckLocking}
		case f.token != g.o.Token:
			refused[i] = &fence.FencedError{Resource: name, Held: g.o.Token, Current: f.token, Reason: "the lease was granted anew", Check: fence.CheckLocking}
		case !f.live:
			refused[i] = &fence.FencedError{Resource: name, Held: g.o.Token, Current: f.token, Reason: "the lease expired", Check: fence.CheckLocking}
		default:
			refused[i] = nil
		}
	}
	if len(unapplied) > 0 {
		// A batch item's outcome without its item flag: a bug, never a
		// silent no-op (the item would stay pending and be fetched again
		// at once).
		p.unapplied.Add(int64(len(unapplied)))
		p.log.Error("queue: batch item outcomes handed to the statement that cannot apply them (a bug): not applied",
			"jobs", unapplied)
		return changed, drained, &unappliedError{ids: unapplied}
	}
	return changed, drained, nil
}

// errUnapplied is wrapped by an *unappliedError.
var errUnapplied = errors.New("queue: outcomes of batch items not applied")

// unappliedError reports outcomes of batch items that completeGrants
// handed, without their item flag, to the statement that changes no batch
// item (queueCompleteFenced in internal/store), which left them pending
// and reported them. Outside a transaction the rest committed, and record
// applies these as items; in one, the caller rolls back.
type unappliedError struct{ ids []int64 }

func (e *unappliedError) Error() string {
	return fmt.Sprintf("%v: jobs %v (an outcome without its item flag)", errUnapplied, e.ids)
}

func (e *unappliedError) Unwrap() error { return errUnapplied }

// runner runs a statement that returns rows, and hands them to scan.
type runner func(ctx context.Context, stmt string, args []any, scan func(pgx.Rows) error) error

// on runs statements on db: in its transaction, or each in its own.
func on(db fence.Querier) runner {
	return func(ctx context.Context, stmt string, args []any, scan func(pgx.Rows) error) error {
		rows, err := db.Query(ctx, stmt, args...)
		if err != nil {
			return err
		}
		return scan(rows) // pgx.ForEachRow closes rows
	}
}

// after runs statements in tx, each after the statements queue adds (in
// one round trip with them: a pipeline).
func after(tx pgx.Tx, queue func(*pgx.Batch)) runner {
	return func(ctx context.Context, stmt string, args []any, scan func(pgx.Rows) error) error {
		b := &pgx.Batch{}
		queue(b)
		b.Queue(stmt, args...).Query(scan)
		return tx.SendBatch(ctx, b).Close()
	}
}

// standalone runs a statement in a transaction of its own on conn, on its
// prepared statement's generic plan (store.CompleteSettings), pipelined
// with its BEGIN, SET and COMMIT in one round trip. A completion statement
// planned at every call cost more to plan than to run under load (bench
// fleet at 64 x 1024: 1.3 ms of planning per call); every step of it is a
// lookup by key, so its generic plan is its custom one. An error from the
// COMMIT is returned as the statement's would be: either may mean the
// outcome of the commit is unknown, and the caller treats both alike.
func standalone(conn *pgxpool.Conn) runner {
	return func(ctx context.Context, stmt string, args []any, scan func(pgx.Rows) error) error {
		b := &pgx.Batch{}
		inTx(b, false, store.CompleteSettings, func() { b.Queue(stmt, args...).Query(scan) })
		return conn.SendBatch(ctx, b).Close()
	}
}

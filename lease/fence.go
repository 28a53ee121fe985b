package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/store"
)

// FenceConfig configures a Fence. The zero value of every field means its
// default.
type FenceConfig struct {
	// LockTimeout is the effect transaction's lock_timeout: it bounds the
	// wait for the lease row's lock (a takeover holds it for the length of
	// one statement) and every other lock wait of the transaction, since a
	// transaction holding the lease row must not wait indefinitely either.
	// Defaults to 1s.
	LockTimeout time.Duration
	// IdleTimeout is the effect transaction's
	// idle_in_transaction_session_timeout: a holder that stalls between
	// statements of an effect transaction (a GC pause, a stuck handler) is
	// cut off after it, so it cannot hold back a takeover. Keep it below the
	// lease TTL. Defaults to 5s.
	IdleTimeout time.Duration
	// StatementTimeout is the effect transaction's statement_timeout: it
	// bounds each statement, so a stuck statement cannot hold back a
	// takeover either. (A transaction of many short statements can still
	// last long: keep effect transactions short.) Defaults to IdleTimeout.
	StatementTimeout time.Duration
}

// Fence fences effects that live in the same PostgreSQL database as the
// leases: an effect transaction commits only if the lease still carries the
// effect's token and has not expired.
//
// The check locks the lease row FOR KEY SHARE until the transaction ends.
// That closes the READ COMMITTED hole of a plain check (a takeover
// committing between the check and the commit): a takeover changes the
// row's token, which is part of a key (the index leases_name_token,
// migration 15), so PostgreSQL makes it take FOR UPDATE, and it waits until
// the effect transaction has committed or rolled back; a check that runs
// after a takeover committed sees the new token and is refused. A renewal
// or a release changes no key column: it takes FOR NO KEY UPDATE, which
// does not wait for the check, so a held check no longer holds off its
// lease's renewals. (Before migration 15, a takeover updated no key column
// and FOR KEY SHARE would not have fenced it: the check names the index,
// and fails with ErrNotMigrated on such a schema.) Tx checks last, just
// before its COMMIT, so that the row is locked only for the commit.
type Fence struct {
	cfg         FenceConfig
	pool        *pgxpool.Pool
	check, peek string
}

// NewFence returns a Fence for the leases of db, whose effect transactions
// run on db's pool. It does no I/O.
func NewFence(db *leasehold.DB, cfg FenceConfig) (*Fence, error) {
	if db.Pool() == nil {
		return nil, &ConfigError{Field: "db", Reason: "nil or zero *leasehold.DB (use leasehold.Open)"}
	}
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, &ConfigError{Field: "db", Reason: err.Error()}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"LockTimeout", cfg.LockTimeout}, {"IdleTimeout", cfg.IdleTimeout}, {"StatementTimeout", cfg.StatementTimeout}} {
		if f.d < 0 {
			return nil, &ConfigError{Field: f.name, Reason: fmt.Sprintf("negative duration %v", f.d)}
		}
	}
	if cfg.LockTimeout == 0 {
		cfg.LockTimeout = time.Second
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 5 * time.Second
	}
	if cfg.StatementTimeout == 0 {
		cfg.StatementTimeout = cfg.IdleTimeout
	}
	return &Fence{cfg: cfg, pool: db.Pool(), check: st.Lease.Check, peek: st.Lease.Peek}, nil
}

// Check verifies, inside tx, that the lease named lease still carries token
// and has not expired, and locks the lease row until tx ends, so no takeover
// can commit before tx does. It also sets the transaction's lock, idle and
// statement timeouts (see FenceConfig). It returns a *FencedError (wrapping
// ErrFenced) when the lease has moved on; then roll tx back. Call it in a
// transaction of READ COMMITTED or stronger isolation, after the effects
// and just before COMMIT (as Tx does): effects written before a refused
// check are rolled back with tx, and the lease row stays locked only for
// the commit. A Check before the effects is just as safe, but locks the row
// for the whole transaction, and the lease cannot be renewed meanwhile: a
// transaction that outlasts the lease's local deadline costs the holder
// the lease (its other leases are not held up).
func (f *Fence) Check(ctx context.Context, tx pgx.Tx, lease string, token fence.Token) error {
	return f.verify(ctx, tx, f.check, fence.CheckLocking, lease, token, nil, ms(f.cfg.LockTimeout), ms(f.cfg.IdleTimeout), ms(f.cfg.StatementTimeout))
}

// verify runs the check statement q (the locking check, or the unlocked
// peek, which also reads into readCommitted whether the transaction is
// READ COMMITTED) for lease and token; a refusal names stage as its Check.
func (f *Fence) verify(ctx context.Context, tx pgx.Tx, q string, stage fence.Check, lease string, token fence.Token, readCommitted *bool, args ...any) error {
	if !token.Valid() {
		return &fence.FencedError{Resource: lease, Held: token, Reason: "not a granted token"}
	}
	var current int64
	var live bool
	dest := []any{&current, &live}
	if readCommitted != nil {
		dest = append(dest, readCommitted)
	}
	err := tx.QueryRow(ctx, q, append([]any{lease}, args...)...).Scan(dest...)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return &fence.FencedError{Resource: lease, Held: token, Reason: "no such lease", Check: stage}
	case err != nil:
		return store.ClassifyRead("lease", "fence check", lease, err)
	case fence.Token(current) != token:
		return &fence.FencedError{Resource: lease, Held: token, Current: fence.Token(current), Reason: "the lease was granted anew", Check: stage}
	case !live:
		return &fence.FencedError{Resource: lease, Held: token, Current: fence.Token(current), Reason: "the lease expired", Check: stage}
	}
	return nil
}

// Config returns the fence's configuration, with defaults filled in.
func (f *Fence) Config() FenceConfig { return f.cfg }

// Begin starts a transaction on the DB's pool whose lock, idle-in-transaction and
// statement timeouts are set from the start (in the BEGIN's round trip), so
// that a holder stalled anywhere in the transaction, before its Check too,
// is cut off and cannot hold back a takeover for longer.
func (f *Fence) Begin(ctx context.Context) (pgx.Tx, error) {
	return f.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: fmt.Sprintf(
		"BEGIN; SET LOCAL lock_timeout = %s; SET LOCAL idle_in_transaction_session_timeout = %s; SET LOCAL statement_timeout = %s",
		ms(f.cfg.LockTimeout), ms(f.cfg.IdleTimeout), ms(f.cfg.StatementTimeout))})
}

// Tx runs fn in a transaction that commits only while the lease named lease
// carries token: it begins a transaction on the DB's pool, reads the lease
// row without locking it (if the lease has already moved on, fn is not
// called), runs fn, then runs Check, which locks the lease row until the
// transaction ends, and commits. So the row is locked only for the check
// and the COMMIT, not while fn runs: a slow fn neither delays the lease's
// renewals nor a takeover. (Above READ COMMITTED, where the peek takes
// the transaction's snapshot and a check after fn would fail to serialize
// on a renewal committed meanwhile, Tx runs Check before fn instead, and
// the row stays locked for the whole transaction.) fn gets a managed
// transaction (Managed): its Commit and Rollback refuse, since Tx commits;
// a fn that ends the transaction itself with a raw COMMIT or ROLLBACK
// through Exec gets an error wrapping ErrTxEnded (its effects may have
// committed without the check: a bug in fn). If either check refuses,
// the error wraps ErrFenced and fn's effects, if it ran, are rolled back.
// An error from fn rolls back and is returned as is. A COMMIT whose outcome
// is unknown gives an error that fence.IsIndeterminate recognises; so does
// a COMMIT the server answered with success but that the synchronous
// standby did not confirm (it wraps leasehold.ErrNotReplicated; detected
// when the pool's configuration went through leasehold.InstallNoticeHook).
// An error from BEGIN, from fn or from a check means nothing was applied.
func (f *Fence) Tx(ctx context.Context, lease string, token fence.Token, fn func(pgx.Tx) error) error {
	tx, err := f.Begin(ctx)
	if err != nil {
		return store.ClassifyRead("lease", "fenced begin", lease, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.IdleTimeout)
		defer cancel()
		tx.Rollback(rctx) // after a commit: a no-op
	}()
	// The early refusal: without a lock, so fn runs without holding the row.
	var readCommitted bool
	if err := f.verify(ctx, tx, f.peek, fence.CheckEarly, lease, token, &readCommitted); err != nil {
		return err
	}
	if !readCommitted {
		// REPEATABLE READ or SERIALIZABLE: the peek took the snapshot, and
		// a locking check after fn would fail (could not serialize) on any
		// renewal of the lease committed while fn ran. Lock first, as
		// before fn: the row stays locked, and the lease unrenewed, for
		// the whole transaction.
		if err := f.Check(ctx, tx, lease, token); err != nil {
			return err
		}
	}
	ferr := fn(Managed(tx))
	if tx.Conn().PgConn().TxStatus() == 'I' {
		// fn ended the transaction itself (a raw COMMIT or ROLLBACK through
		// Exec; Commit and Rollback refuse): its effects may have committed
		// without the check. Nothing more runs on this connection.
		if ferr != nil {
			return fmt.Errorf("lease: fenced transaction on %q: %w; fn's error: %w", lease, ErrTxEnded, ferr)
		}
		return fmt.Errorf("lease: fenced transaction on %q: %w", lease, ErrTxEnded)
	}
	if ferr != nil {
		return ferr
	}
	if readCommitted {
		// The check that counts: it locks the row until the COMMIT, and a
		// refusal rolls fn's effects back.
		if err := f.Check(ctx, tx, lease, token); err != nil {
			return err
		}
	}
	return store.ClassifyCommit("lease", "fenced commit", lease, store.Commit(ctx, tx, "lease: fenced commit", lease))
}

func ms(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }

// ErrTxManaged is returned by Commit and Rollback of a managed transaction
// (Managed): the queue's transactional handlers and Kafka handlers get one.
var ErrTxManaged = errors.New("lease: the transaction is committed or rolled back by its runner, not by the handler")

// ErrTxEnded is wrapped by the error a runner reports when a handler given
// a managed transaction (Managed) ended it itself, with a raw COMMIT or
// ROLLBACK through Exec: its effects may have committed without the fence
// check and without the record of their completion. It is a handler bug.
var ErrTxEnded = errors.New("lease: the handler ended its managed transaction itself (COMMIT or ROLLBACK through Exec): its effects may have committed without the fence check and the record of their completion")

// Managed wraps tx, a fenced transaction that its runner commits, for a
// handler: its Commit and Rollback refuse with ErrTxManaged, since a handler
// committing its effects by itself would commit them without the fence
// check and the record of their completion (a job's outcome, a Kafka
// offset), and they would be applied again. Savepoints (Begin) work.
func Managed(tx pgx.Tx) pgx.Tx { return managedTx{tx} }

type managedTx struct{ pgx.Tx }

func (managedTx) Commit(context.Context) error   { return ErrTxManaged }
func (managedTx) Rollback(context.Context) error { return ErrTxManaged }

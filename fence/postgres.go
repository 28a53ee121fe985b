package fence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/fencesql"
	"github.com/leasehold/leasehold/internal/migrations"
)

// PostgresConfig configures a Postgres fence.
type PostgresConfig struct {
	// Schema is the schema holding leasehold's lease table. Defaults to
	// "leasehold".
	Schema string
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

// Postgres fences effects that live in the same PostgreSQL database as the
// leases: an effect transaction commits only if the lease still carries the
// effect's token and has not expired.
//
// The check locks the lease row FOR SHARE until the transaction ends. That
// closes the READ COMMITTED hole of a plain check (a takeover committing
// between the check and the commit): a takeover must update the row, so it
// waits until the effect transaction has committed or rolled back, and an
// effect transaction that starts after a takeover sees the new token and is
// refused. FOR KEY SHARE would not do: a takeover updates no key column and
// does not wait for it. The lock also delays renewals of the lease for the
// length of the transaction: keep effect transactions short.
type Postgres struct {
	cfg   PostgresConfig
	check string
}

// NewPostgres returns a Postgres fence. It does no I/O.
func NewPostgres(cfg PostgresConfig) (*Postgres, error) {
	q, err := migrations.Schema(cfg.Schema)
	if err != nil {
		return nil, err
	}
	if cfg.LockTimeout < 0 || cfg.IdleTimeout < 0 || cfg.StatementTimeout < 0 {
		return nil, fmt.Errorf("fence: invalid config: negative timeout")
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
	return &Postgres{cfg: cfg, check: migrations.Render(fencesql.Check, q)}, nil
}

// Check verifies, inside tx, that the lease named lease still carries token
// and has not expired, and locks the lease row until tx ends, so no takeover
// can commit before tx does. It also sets the transaction's lock, idle and
// statement timeouts (see PostgresConfig). It returns a *FencedError (wrapping ErrFenced)
// when the lease has moved on. Call it before the effects, in a transaction
// of READ COMMITTED or stronger isolation, and commit soon after.
func (p *Postgres) Check(ctx context.Context, tx pgx.Tx, lease string, token Token) error {
	if !token.Valid() {
		return &FencedError{Resource: lease, Held: token, Reason: "not a granted token"}
	}
	var current int64
	var live bool
	err := tx.QueryRow(ctx, p.check, lease, ms(p.cfg.LockTimeout), ms(p.cfg.IdleTimeout), ms(p.cfg.StatementTimeout)).
		Scan(&current, &live)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return &FencedError{Resource: lease, Held: token, Reason: "no such lease"}
	case err != nil:
		return fmt.Errorf("fence: %s: %w", lease, err)
	case Token(current) != token:
		return &FencedError{Resource: lease, Held: token, Current: Token(current), Reason: "the lease was granted anew"}
	case !live:
		return &FencedError{Resource: lease, Held: token, Current: Token(current), Reason: "the lease expired"}
	}
	return nil
}

// Config returns the fence's configuration, with defaults filled in.
func (p *Postgres) Config() PostgresConfig { return p.cfg }

// TxBeginner starts transactions with options: a *pgxpool.Pool or *pgx.Conn.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Begin starts a transaction on db whose lock, idle-in-transaction and
// statement timeouts are set from the start (in the BEGIN's round trip), so
// that a holder stalled anywhere in the transaction, before its Check too,
// is cut off and cannot hold back a takeover for longer.
func (p *Postgres) Begin(ctx context.Context, db TxBeginner) (pgx.Tx, error) {
	return db.BeginTx(ctx, pgx.TxOptions{BeginQuery: fmt.Sprintf(
		"BEGIN; SET LOCAL lock_timeout = %s; SET LOCAL idle_in_transaction_session_timeout = %s; SET LOCAL statement_timeout = %s",
		ms(p.cfg.LockTimeout), ms(p.cfg.IdleTimeout), ms(p.cfg.StatementTimeout))})
}

// Tx runs fn in a transaction that commits only while the lease named lease
// carries token: it begins a transaction on db, runs Check, then fn, then
// commits. If Check refuses, fn is not called and the error wraps ErrFenced.
// An error from fn rolls back and is returned as is. A COMMIT whose outcome
// is unknown gives an error that IsIndeterminate recognises.
func (p *Postgres) Tx(ctx context.Context, db TxBeginner, lease string, token Token, fn func(pgx.Tx) error) error {
	tx, err := p.Begin(ctx, db)
	if err != nil {
		return fmt.Errorf("fence: %s: begin: %w", lease, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.IdleTimeout)
		defer cancel()
		tx.Rollback(rctx) // after a commit: a no-op
	}()
	if err := p.Check(ctx, tx, lease, token); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return commitErr(tx.Commit(ctx))
}

func ms(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }

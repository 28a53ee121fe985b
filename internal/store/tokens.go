package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// The token regression guard. The token sequence must stay ahead of every
// token already stored: queue_runs and kafka_offsets keep the highest token
// that wrote them and refuse lower ones, and a lease row's next grant must
// carry a token above its last. A sequence behind the stored tokens (the
// schema dropped and migrated again while other tables survived, a restored
// backup, logical replication, which does not carry sequence values) would
// hand out tokens that those tables refuse forever, and that user tables
// fenced with fence.Table would take for newer than they are.

// tokensCheck returns the highest token stored in leasehold's tables (or
// $1, if higher) and the highest token the sequence has handed out, so that
// the next is issued + 1. The jobs scan (finished_token, unindexed) runs
// only with $2: the max of queue_runs bounds every finished_token a queue
// run wrote, since a run records its token there before completing
// anything; jobs are scanned at migration, for a jobs table that outlived
// its queue_runs.
const tokensCheck = `
SELECT greatest(
           (SELECT coalesce(max(token), 0) FROM {{schema}}.leases),
           (SELECT coalesce(max(token), 0) FROM {{schema}}.queue_runs),
           (SELECT coalesce(max(token), 0) FROM {{schema}}.kafka_offsets),
           (SELECT coalesce(max(finished_token), 0) FROM {{schema}}.jobs WHERE $2::boolean),
           $1::bigint),
       CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END
FROM {{schema}}.lease_token_seq AS s`

// tokensRaise moves the sequence to $1 (the next token is $1 + 1). Run it
// after leaseLockTable, in the transaction that re-ran tokensCheck, so that
// no acquire draws a token between the check and the move.
const tokensRaise = `SELECT setval('{{schema}}.lease_token_seq', $1::bigint, true)`

// TxQuerier runs a statement and begins a transaction: a *pgxpool.Pool or
// *pgx.Conn.
type TxQuerier interface {
	Beginner
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TokenRaise reports a token sequence the guard moved forward.
type TokenRaise struct {
	// Issued is the highest token the sequence had handed out; Stored the
	// highest token found stored (or asked for), which the sequence now
	// stands at: the next grant gets Stored + 1.
	Issued, Stored int64
}

// GuardTokens makes sure the next token the sequence hands out is above
// every token stored in leasehold's tables of st's schema, and above above:
// if it is behind, it locks the lease table (no acquire can draw a token
// meanwhile), checks again and moves the sequence forward. It never moves
// it back. With jobs, it also scans jobs.finished_token (a full scan). It
// returns the raise, nil when the sequence was ahead already.
func GuardTokens(ctx context.Context, db TxQuerier, st *Statements, above int64, jobs bool) (*TokenRaise, error) {
	var stored, issued int64
	// The usual case, one round trip: the sequence is ahead, no lock taken.
	if err := db.QueryRow(ctx, st.Tokens.Check, above, jobs).Scan(&stored, &issued); err != nil {
		return nil, ClassifyRead("leasehold", "token guard", "", err)
	}
	if issued >= stored {
		return nil, nil
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, ClassifyRead("leasehold", "token guard", "", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, st.Lease.LockTable); err != nil {
		return nil, ClassifyRead("leasehold", "token guard: lock", "", err)
	}
	if err := tx.QueryRow(ctx, st.Tokens.Check, above, jobs).Scan(&stored, &issued); err != nil {
		return nil, ClassifyRead("leasehold", "token guard", "", err)
	}
	if issued >= stored {
		return nil, nil // another process moved it meanwhile
	}
	if _, err := tx.Exec(ctx, st.Tokens.Raise, stored); err != nil {
		return nil, ClassifyRead("leasehold", "token guard: setval", "", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, ClassifyCommit("leasehold", "token guard", "", err)
	}
	return &TokenRaise{Issued: issued, Stored: stored}, nil
}

package fence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier runs statements: a *pgxpool.Pool, *pgx.Conn or pgx.Tx. It is
// the one database interface of leasehold's APIs.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Table is the conditional write on the target, for a table in any
// PostgreSQL database: each row records, in TokenColumn, the highest token
// that wrote it, and a write carrying a lower token is refused. This is
// fencing at the resource, and needs nothing from leasehold's schema.
//
// TokenColumn is a bigint NOT NULL column (DEFAULT 0 for rows no holder has
// written yet).
//
// Names are identifiers taken literally (quoted, case-sensitive), not SQL.
// A stale holder is refused only at rows a newer holder has already written:
// have a new holder write its token to the rows it takes over first.
type Table struct {
	Name        string // the table, or "schema.table"; neither part may contain a dot
	KeyColumn   string // the column identifying a row
	TokenColumn string // the bigint column holding the highest token written
}

// Update runs
//
//	UPDATE <Name> SET <set>, <TokenColumn> = $1
//	WHERE <KeyColumn> = $2 AND <TokenColumn> <= $1
//
// set is SQL you write (never user input), with your arguments as $3, $4 ...
// passed in args. It returns a *FencedError (wrapping ErrFenced) when the
// row carries a higher token, and an error wrapping pgx.ErrNoRows when there
// is no row with that key.
func (t Table) Update(ctx context.Context, db Querier, key any, token Token, set string, args ...any) error {
	name, keyCol, tokCol, err := t.idents()
	if err != nil {
		return err
	}
	if !token.Valid() {
		return &FencedError{Resource: t.Name, Held: token, Reason: "not a granted token"}
	}
	// set on its own line: a trailing "--" comment in it cannot swallow the guard.
	sql := fmt.Sprintf("UPDATE %s SET %s\n, %s = $1 WHERE %s = $2 AND %s <= $1", name, set, tokCol, keyCol, tokCol)
	tag, err := db.Exec(ctx, sql, append([]any{int64(token), key}, args...)...)
	if err != nil {
		return fmt.Errorf("fence: %s: %w", t.Name, err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	var current int64
	err = db.QueryRow(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1", tokCol, name, keyCol), key).Scan(&current)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("fence: %s: no row with key %v: %w", t.Name, key, pgx.ErrNoRows)
	}
	if err != nil {
		return fmt.Errorf("fence: %s: %w", t.Name, err)
	}
	if Token(current) <= token {
		return fmt.Errorf("fence: %s[%v]: no row updated although its token %d is not above %d "+
			"(a trigger, row security or a concurrent change skipped it)", t.Name, key, current, token)
	}
	return &FencedError{Resource: fmt.Sprintf("%s[%v]", t.Name, key), Held: token, Current: Token(current),
		Reason: "a higher token wrote the row"}
}

// MaxToken returns the highest token written to the table (0 for none):
//
//	SELECT coalesce(max(<TokenColumn>), 0) FROM <Name>
//
// After a restore or anything else that can leave the token sequence
// behind the tokens your tables hold, feed it to lease.Client.GuardTokens
// before the first grant, so that new holders' tokens are above every
// token your tables have seen (docs/fencing.md). It reads the whole table
// unless TokenColumn is indexed.
func (t Table) MaxToken(ctx context.Context, db Querier) (Token, error) {
	name, _, tokCol, err := t.idents()
	if err != nil {
		return 0, err
	}
	var m int64
	if err := db.QueryRow(ctx, fmt.Sprintf("SELECT coalesce(max(%s), 0) FROM %s", tokCol, name)).Scan(&m); err != nil {
		return 0, fmt.Errorf("fence: %s: max token: %w", t.Name, err)
	}
	return Token(m), nil
}

func (t Table) idents() (name, key, tok string, err error) {
	parts := strings.Split(t.Name, ".")
	if len(parts) > 2 || slices.Contains(parts, "") || t.KeyColumn == "" || t.TokenColumn == "" ||
		strings.ContainsRune(t.Name+t.KeyColumn+t.TokenColumn, 0) {
		return "", "", "", fmt.Errorf("fence: Table needs Name (\"table\" or \"schema.table\"), KeyColumn and TokenColumn, got %+v", t)
	}
	return pgx.Identifier(parts).Sanitize(), pgx.Identifier{t.KeyColumn}.Sanitize(), pgx.Identifier{t.TokenColumn}.Sanitize(), nil
}

package pgtest

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Statements counts the statements sent on a pool, and on the pools
// derived from it (they copy its tracer), by their text, alone or in a
// batch: a test counts the statements of one kind a piece of work sends.
type Statements struct {
	mu sync.Mutex
	n  map[string]int
	// args, when set, is called with each statement's text and arguments
	// (under the lock: keep it short).
	args func(sql string, args []any)
}

// TraceQueryStart counts a statement.
func (s *Statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = make(map[string]int)
	}
	s.n[d.SQL]++
	if s.args != nil {
		s.args(d.SQL, d.Args)
	}
	return ctx
}

// TraceQueryEnd does nothing.
func (s *Statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart does nothing: the batch's statements are counted one by
// one (TraceBatchQuery).
func (s *Statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery counts a statement sent in a batch (pipelined), as
// TraceQueryStart counts one sent alone.
func (s *Statements) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.TraceQueryStart(ctx, c, pgx.TraceQueryStartData{SQL: d.SQL, Args: d.Args})
}

// TraceBatchEnd does nothing.
func (s *Statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// Count returns how many of the statements sql were sent, in all.
func (s *Statements) Count(sql ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range sql {
		n += s.n[q]
	}
	return n
}

// Take is Count, and starts the counts of sql over.
func (s *Statements) Take(sql ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range sql {
		n += s.n[q]
		delete(s.n, q)
	}
	return n
}

// CountingPool is Pool with its statements counted; args, when not nil, is
// also called with each statement's text and arguments.
func CountingPool(t testing.TB, args func(sql string, args []any)) (*pgxpool.Pool, *Statements) {
	t.Helper()
	pc, err := pgxpool.ParseConfig(MigratedURL(t))
	Must(t, err)
	s := &Statements{args: args}
	pc.ConnConfig.Tracer = s
	p, err := pgxpool.NewWithConfig(Context(t), pc)
	Must(t, err)
	t.Cleanup(p.Close)
	return p, s
}

package queue

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
)

// A run record that cannot be written (the database went away) is an
// error of the grant's open, never taken for a newer grant's record (a
// fenced open would give the partition up); a close that cannot be
// written is an error too. Control: on a live pool the open records the
// run and the close succeeds.
func TestRunRecordsOnADeadDatabaseAreErrors(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	for _, dead := range []bool{false, true} {
		pool, err := pgxpool.New(ctx, pgtest.MigratedURL(t))
		pgtest.Must(t, err)
		p, err := NewProcessor(pgtest.Open(t, pool, leasehold.Config{}), ProcessorConfig{Workers: NewWorkers()})
		pgtest.Must(t, err)
		if dead {
			pool.Close()
		} else {
			t.Cleanup(pool.Close)
		}
		o := partition.Ownership{Group: "g", Partition: 3, Token: 7}
		_, oerr := p.openRun(ctx, o, &rates{})
		_, cerr := ask(ctx, p.closer, o, nil)
		switch {
		case dead && (oerr == nil || errors.Is(oerr, fence.ErrFenced) || cerr == nil):
			t.Fatalf("dead database: open = %v, close = %v; want errors, the open's not ErrFenced", oerr, cerr)
		case !dead && (oerr != nil || cerr != nil):
			t.Fatalf("control, live database: open = %v, close = %v; want no error", oerr, cerr)
		}
	}
}

package queue

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// flushCounter counts the completion statements a pool sends.
type flushCounter struct{ n atomic.Int64 }

func (f *flushCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "FOR KEY SHARE OF l") {
		f.n.Add(1)
	}
	return ctx
}

func (f *flushCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The completion statement on its own is sent in a batch (with its BEGIN,
// SET and COMMIT).
func (f *flushCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		if strings.Contains(q.SQL, "FOR KEY SHARE OF l") {
			f.n.Add(1)
		}
	}
	return ctx
}

func (f *flushCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (f *flushCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// While the database fails every completion, the completer tries again
// after a backoff (50ms, doubling), however often pipelines hurry it or add
// records: a starved backlog hurries it at every event, and each hurry
// used to cut the backoff short, a statement per hurry against a failing
// server. Here a hurry every millisecond for 600ms gets a statement per
// backoff. The control: the completer does try again (more than once), so
// the count is of retries, not of a completer that gave up.
func TestCompleterBacksOffWhateverHurriesIt(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	direct := pgtest.PoolURL(t, url)
	var count flushCounter
	traced, _ := pgtest.ProxiedPool(t, url, func(c *pgxpool.Config) { c.ConnConfig.Tracer = &count })
	lc, err := lease.New(pgtest.DBOn(t, direct), lease.Config{Owner: "w", TTL: time.Minute})
	pgtest.Must(t, err)
	t.Cleanup(func() { lc.Close(context.Background()) })
	l, err := lc.TryAcquire(ctx, partition.LeaseName("g", 0))
	pgtest.Must(t, err)
	o := partition.Ownership{Group: "g", Partition: 0, Token: l.Token(), Lease: l}
	p, err := NewProcessor(pgtest.Open(t, traced, leasehold.Config{}), ProcessorConfig{Workers: NewWorkers(), CompleteInterval: time.Millisecond})
	pgtest.Must(t, err)
	// Every completion fails from now on: its statement names a table
	// that is gone.
	_, err = direct.Exec(ctx, `ALTER TABLE leasehold.leases RENAME TO leases_gone`)
	pgtest.Must(t, err)

	in := newInbox(o)
	p.completer.add(record{rec: outcome{id: 1, state: "completed", spent: 1}, to: in})
	for start := time.Now(); time.Since(start) < 600*time.Millisecond; time.Sleep(time.Millisecond) {
		p.completer.hurry()
		p.completer.add(record{rec: outcome{id: 2, state: "completed", spent: 1}, to: in})
	}
	tries := count.n.Load()
	p.completer.close(in) // flushed once more, not retried: the loop ends
	t.Logf("%d completion statements in 600ms of hurries against a failing server", tries)
	// Backoffs of 50, 100, 200 and 400ms: 4 or 5 statements.
	if tries > 8 {
		t.Errorf("%d completion statements in 600ms: the hurries cut the backoff short", tries)
	}
	if tries < 2 {
		t.Errorf("control: %d completion statements; want the completer to try again after its backoff", tries)
	}
}

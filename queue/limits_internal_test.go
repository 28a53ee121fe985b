package queue

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
)

// A key's rate window counts the starts of the last period, whatever the
// order their handlers were called in, and a start whose handler is not
// called yet counts as now.
func TestRateWaitCountsTheWindow(t *testing.T) {
	t0 := time.Now()
	r := Rate{Starts: 2, Per: 100 * time.Millisecond}
	f := fetched{key: "k", kind: "x"}
	at := func(d time.Duration) *stamp {
		s := &stamp{}
		s.store(t0.Add(d))
		return s
	}
	for _, c := range []struct {
		name   string
		starts []*stamp
		now    time.Duration
		want   time.Duration // the wait, to the microsecond added
	}{
		{"under the limit", []*stamp{at(0)}, 10 * time.Millisecond, 0},
		{"full", []*stamp{at(0), at(20 * time.Millisecond)}, 30 * time.Millisecond, 70 * time.Millisecond},
		{"the oldest left", []*stamp{at(0), at(20 * time.Millisecond)}, 101 * time.Millisecond, 0},
		// Handlers called out of order: the one started first was
		// stamped last. The next start waits until two of the three have
		// left (at 40ms + 100ms), not until the second stamped has.
		{"out of order", []*stamp{at(50 * time.Millisecond), at(30 * time.Millisecond), at(40 * time.Millisecond)}, 60 * time.Millisecond, 80 * time.Millisecond},
		{"not yet called counts as now", []*stamp{at(0), {}}, 50 * time.Millisecond, 50 * time.Millisecond},
	} {
		rs := &rates{starts: map[rateKey][]*stamp{{"k", "x"}: c.starts}}
		got := rs.wait(f, r, t0.Add(c.now))
		if want := c.want; want > 0 {
			want += time.Microsecond
			if got != want {
				t.Errorf("%s: wait %v; want %v", c.name, got, want)
			}
		} else if got != 0 {
			t.Errorf("%s: wait %v; want none", c.name, got)
		}
	}
	// After an abrupt end, a period from the grant whatever the starts.
	rs := &rates{abrupt: t0}
	if got := rs.wait(f, r, t0.Add(30*time.Millisecond)); got != 70*time.Millisecond {
		t.Errorf("after an abrupt end: wait %v; want 70ms", got)
	}
}

// Starts handed over that do not decode make the next owner wait a
// period, as after a crash, without taking the run for one that ended
// abruptly (its jobs are not recovered one at a time).
func TestUndecodableRateHandoverWaitsAPeriod(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, err := pgxpool.New(ctx, pgtest.MigratedURL(t))
	pgtest.Must(t, err)
	t.Cleanup(pool.Close)
	p, err := NewProcessor(pgtest.Open(t, pool, leasehold.Config{}), ProcessorConfig{Workers: NewWorkers()})
	pgtest.Must(t, err)
	o := partition.Ownership{Group: "g", Partition: 1, Token: 1}
	_, err = p.openRun(ctx, o, &rates{})
	pgtest.Must(t, err)
	_, err = pool.Exec(ctx, `UPDATE leasehold.queue_runs SET open = false, rate = '{"not": "a list"}', closed_at = now()`)
	pgtest.Must(t, err)
	rs := &rates{}
	abrupt, err := p.openRun(ctx, partition.Ownership{Group: "g", Partition: 1, Token: 2}, rs)
	pgtest.Must(t, err)
	if abrupt || rs.abrupt.IsZero() {
		t.Fatalf("abrupt end reported %v, rate hold set %v; want no abrupt end and a hold", abrupt, !rs.abrupt.IsZero())
	}
}

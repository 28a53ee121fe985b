package periodic_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/periodic"
)

// TestMissedPolicies runs a leader on a fake clock, stops it, lets ten
// slots pass with no leader, and starts another: the run-once schedule
// enqueues the latest missed slot once (counting the nine before it), the
// skip schedule records it skipped and enqueues nothing until its next
// slot. (The gap is measured on the database's clock: the test moves the
// old leader's release back by it.) Before the gap, a brand-new schedule starts at the slot after the
// leader took over (no backfill).
func TestMissedPolicies(t *testing.T) {
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	ensureGroup(t, db, "g")
	start := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	clk := fakeclock.New(start)
	scheds := []periodic.Schedule{
		{Name: "once", Every: time.Minute, Job: tickJob("once")},
		{Name: "skip", Cron: "* * * * *", Missed: periodic.MissedSkip, Job: tickJob("skip")},
	}
	newScheduler := func(id string) *periodic.Scheduler {
		s, err := periodic.New(db, periodic.Config{Group: "g", Schedules: scheds, ID: id, Clock: clk, Grace: -1,
			Lease: lease.Config{TTL: time.Second, MaxBackoff: 50 * time.Millisecond}})
		pgtest.Must(t, err)
		t.Cleanup(func() { s.Stop(ctx) })
		return s
	}
	rows := func() []slotRow {
		r, err := readSlots(ctx, pool, "g")
		pgtest.Must(t, err)
		return r
	}
	// advanceTo moves the clock to at once the leader sleeps on it.
	advanceTo := func(at time.Time) {
		t.Helper()
		if !clk.WaitPending(1, 10*time.Second) {
			t.Fatal("the leader never waited for a slot")
		}
		clk.Advance(at.Sub(clk.Now()))
	}
	at := func(m, s int) time.Time { return time.Date(2026, 1, 1, 0, m, s, 0, time.UTC) }

	a := newScheduler("a")
	pgtest.Must(t, a.Start(ctx))
	advanceTo(at(1, 0))
	waitFor(t, 10*time.Second, "slot 00:01", func() bool { return len(rows()) == 2 })
	pgtest.Must(t, a.Stop(ctx))

	clk.Advance(at(11, 30).Sub(clk.Now())) // no leader: slots 00:02 to 00:11 pass
	// The gap a new leader counts is measured on the database's clock:
	// move a's release back by the gap.
	_, err := pool.Exec(ctx, `UPDATE leasehold.leases SET renewed_at = renewed_at - interval '10 min 30 s',
		expires_at = expires_at - interval '10 min 30 s' WHERE name = 'periodic/g'`)
	pgtest.Must(t, err)
	b := newScheduler("b")
	pgtest.Must(t, b.Start(ctx))
	waitFor(t, 10*time.Second, "the catch-up", func() bool { return len(rows()) == 4 })
	advanceTo(at(12, 0))
	waitFor(t, 10*time.Second, "slot 00:12", func() bool { return len(rows()) == 6 })
	pgtest.Must(t, b.Stop(ctx))

	got := rows()
	jobs, err := readJobs(ctx, pool, "g")
	pgtest.Must(t, err)
	if err := checkRecords(scheds, got, jobs); err != nil {
		t.Fatal(err)
	}
	infos, err := periodic.List(ctx, db, "g")
	pgtest.Must(t, err)
	for _, in := range infos {
		if in.MissedTotal != 9 {
			t.Errorf("%s: List's MissedTotal %d; want 9", in.Name, in.MissedTotal)
		}
	}
	for _, c := range []struct {
		name           string
		slots, enqueue []time.Time
		missed         []int
	}{
		{"once", []time.Time{at(1, 0), at(11, 0), at(12, 0)}, []time.Time{at(1, 0), at(11, 0), at(12, 0)}, []int{0, 9, 0}},
		{"skip", []time.Time{at(1, 0), at(11, 0), at(12, 0)}, []time.Time{at(1, 0), at(12, 0)}, []int{0, 9, 0}},
	} {
		var missed []int
		for _, r := range got {
			if r.Schedule == c.name {
				missed = append(missed, r.Missed)
			}
		}
		if s, e := slotTimes(got, c.name, false), slotTimes(got, c.name, true); !equalTimes(s, c.slots) ||
			!equalTimes(e, c.enqueue) || len(missed) != 3 || missed[1] != c.missed[1] || missed[0]+missed[2] != 0 {
			t.Errorf("%s: slots %v, enqueued %v, missed %v; want %v, %v, %v", c.name, s, e, missed, c.slots, c.enqueue, c.missed)
		}
	}
}

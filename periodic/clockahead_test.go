package periodic_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/periodic"
)

// A new leader whose clock runs an hour ahead of the database's, taking
// over after ten minutes with no leader, counts missed only the slots that
// came due (on the database's clock) more than Grace before its grant: the
// hour of slots its own clock has reached but the database's has not are
// each enqueued (early, as any slot by a clock ahead), none collapsed or
// skipped. The catch-up itself still happens (a non-zero missed count),
// and so do the early slots (about 60 of them): the check is not vacuous.
func TestLeaderClockAheadMissesNoSlotNotYetDue(t *testing.T) {
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	ensureGroup(t, db, "g")
	dbNow := func() time.Time {
		var now time.Time
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now))
		return now.UTC()
	}
	const grace = 5 * time.Second
	scheds := []periodic.Schedule{
		{Name: "once", Every: time.Minute, Job: tickJob("once")},
		{Name: "skip", Every: time.Minute, Missed: periodic.MissedSkip, Job: tickJob("skip")},
	}
	newScheduler := func(id string, clk lease.Clock) *periodic.Scheduler {
		s, err := periodic.New(db, periodic.Config{Group: "g", Schedules: scheds, ID: id, Clock: clk, Grace: grace,
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

	// a leads ten minutes ago (its clock agrees with the database's then)
	// and records one slot; it stops, and its release is moved back ten
	// minutes: no leader ran since, on the database's clock.
	base := dbNow().Truncate(time.Minute).Add(-10 * time.Minute)
	clkA := fakeclock.New(base.Add(10 * time.Second))
	a := newScheduler("a", clkA)
	pgtest.Must(t, a.Start(ctx))
	if !clkA.WaitPending(1, 10*time.Second) {
		t.Fatal("a never waited for a slot")
	}
	clkA.Advance(base.Add(time.Minute).Sub(clkA.Now()))
	waitFor(t, 10*time.Second, "a's slot", func() bool { return len(rows()) == 2 })
	pgtest.Must(t, a.Stop(ctx))
	_, err := pool.Exec(ctx, `UPDATE leasehold.leases SET renewed_at = renewed_at - interval '10 min',
		expires_at = expires_at - interval '10 min' WHERE name = 'periodic/g'`)
	pgtest.Must(t, err)

	// b takes over with its clock an hour ahead of the database's.
	clkB := fakeclock.New(dbNow().Add(time.Hour))
	b := newScheduler("b", clkB)
	pgtest.Must(t, b.Start(ctx))
	var granted time.Time
	waitFor(t, 10*time.Second, "b's grant", func() bool {
		return pool.QueryRow(ctx, `SELECT acquired_at FROM leasehold.leases WHERE name = 'periodic/g' AND owner = 'b'`).
			Scan(&granted) == nil
	})
	granted = granted.UTC()
	latestMissed := granted.Add(-grace).Truncate(time.Minute) // the latest slot that came due more than grace before
	early := int(clkB.Now().Truncate(time.Minute).Sub(latestMissed) / time.Minute)
	// Each schedule: a's slot, the catch-up, then every slot up to b's clock.
	want := 2 + early
	last := clkB.Now().Truncate(time.Minute)
	waitFor(t, 20*time.Second, "b's slots up to its clock", func() bool {
		r := rows() // both schedules' slots commit together
		return len(r) > 0 && r[len(r)-1].Slot.Equal(last)
	})
	pgtest.Must(t, b.Stop(ctx))

	got := rows()
	jobs, err := readJobs(ctx, pool, "g")
	pgtest.Must(t, err)
	if err := checkRecords(scheds, got, jobs); err != nil {
		t.Fatal(err)
	}
	for _, sc := range scheds {
		var mine []slotRow
		for _, r := range got {
			if r.Schedule == sc.Name {
				mine = append(mine, r)
			}
		}
		if len(mine) != want {
			t.Fatalf("%s: %d slots recorded, want %d: %+v", sc.Name, len(mine), want, mine)
		}
		catchUp := mine[1]
		if !catchUp.Slot.Equal(latestMissed) || catchUp.Missed == 0 {
			t.Errorf("%s: catch-up %+v; want the slot %v counting the slots before it missed (granted %v)",
				sc.Name, catchUp, latestMissed, granted)
		}
		if early < 50 {
			t.Fatalf("only %d slots between the grant and b's clock", early)
		}
		for _, r := range mine[2:] {
			if r.Missed != 0 || r.JobID == 0 {
				t.Errorf("%s: slot %v (not due on the database's clock at the grant %v) recorded missed %d, job %d",
					sc.Name, r.Slot, granted, r.Missed, r.JobID)
			}
		}
	}
}

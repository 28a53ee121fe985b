package periodic_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/periodic"
	"github.com/leasehold/leasehold/queue"
)

// One bad schedule does not stop the others of its group: next to a good
// schedule, one whose Job panics, one whose Job gives a job EnqueueTx
// refuses before sending it (priority 9), and one whose args the database
// refuses (a NUL in JSON: the statement fails and aborts its transaction).
// The good schedule keeps every slot; the bad ones record none and are
// reported, each by name, with a *ScheduleError or the refusal.
func TestBadScheduleDoesNotStopOthers(t *testing.T) {
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	ensureGroup(t, db, "g")
	clk := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC))
	scheds := []periodic.Schedule{
		{Name: "good", Every: time.Minute, Job: tickJob("good")},
		{Name: "panics", Every: time.Minute, Job: func(time.Time) queue.Job { panic("no args") }},
		{Name: "priority", Every: time.Minute, Job: func(slot time.Time) queue.Job {
			return queue.Job{Args: tick{Schedule: "priority", Slot: slot}, Priority: 9}
		}},
		{Name: "nul", Every: time.Minute, Job: func(slot time.Time) queue.Job {
			return queue.Job{Args: tick{Schedule: "nul\x00", Slot: slot}}
		}},
	}
	s, err := periodic.New(db, periodic.Config{Group: "g", Clock: clk, Grace: -1, Schedules: scheds,
		Lease: lease.Config{TTL: time.Second}})
	pgtest.Must(t, err)
	var mu sync.Mutex
	failed := make(map[string]error)
	goodDone := 0 // attempts with a slot of "good" that returned success
	periodic.SetAttempt(s, func(_ fence.Token, slots []periodic.Slot, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && len(slots) > 0 && (len(slots) == 1 || slots[0].Schedule == slots[len(slots)-1].Schedule) {
			failed[slots[0].Schedule] = err
		}
		if err == nil && slices.ContainsFunc(slots, func(sl periodic.Slot) bool { return sl.Schedule == "good" }) {
			goodDone++
		}
	})
	pgtest.Must(t, s.Start(ctx))
	defer s.Stop(ctx)
	at := func(m int) time.Time { return time.Date(2026, 1, 1, 0, m, 0, 0, time.UTC) }
	var want []time.Time
	for m := 1; m <= 3; m++ {
		if !clk.WaitPending(1, 10*time.Second) {
			t.Fatal("the leader never waited")
		}
		clk.Advance(at(m).Sub(clk.Now()))
		want = append(want, at(m))
		// Its row, and its attempt's result: a Stop between the commit and
		// its acknowledgement would make that attempt's outcome unknown
		// (as it must), which is not the failure this test looks for.
		waitFor(t, 10*time.Second, "the good schedule's slot", func() bool {
			r, err := readSlots(ctx, pool, "g")
			pgtest.Must(t, err)
			mu.Lock()
			defer mu.Unlock()
			return len(slotTimes(r, "good", true)) == m && goodDone >= m
		})
	}
	pgtest.Must(t, s.Stop(ctx))
	rows, err := readSlots(ctx, pool, "g")
	pgtest.Must(t, err)
	for _, r := range rows {
		if r.Schedule != "good" {
			t.Errorf("bad schedule recorded %+v", r)
		}
	}
	if got := slotTimes(rows, "good", true); !equalTimes(got, want) {
		t.Errorf("good schedule enqueued %v, want %v", got, want)
	}
	jobs, err := readJobs(ctx, pool, "g")
	pgtest.Must(t, err)
	if err := checkRecords(scheds[:1], rows, jobs); err != nil {
		t.Error(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"panics", "priority", "nul"} {
		if failed[name] == nil {
			t.Errorf("schedule %q: no failure reported (%v)", name, failed)
		}
	}
	if failed["good"] != nil {
		t.Errorf("the good schedule failed alone: %v", failed["good"])
	}
}

// A graceful hand-over keeps every slot whatever the new leader's clock
// says: the time no leader ran is measured on the database's clock, not by
// comparing the leaders' clocks. Grace is 30s, so that the real hand-over
// (b's New and Start, seconds on a loaded machine: with the default 2s it
// ran past Grace under CI's load, and the slot was rightly counted missed)
// stays well within it, while the new leader's fake clock runs further
// ahead than Grace.
func TestGracefulTakeoverKeepsSlots(t *testing.T) {
	for _, c := range []struct {
		name string
		// ahead is how far b's clock is ahead of a's at the takeover.
		ahead time.Duration
	}{
		// slot 00:02 came due 1s (within Grace) before the takeover by
		// b's clock
		{"slot within Grace", 6 * time.Second},
		// slot 00:02 came due 35s (more than Grace) before the takeover by
		// b's clock
		{"slot beyond Grace", 40 * time.Second},
		// b's clock is 5 minutes ahead: slots up to then are due by it
		{"new leader's clock ahead", 5 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := pgtest.Context(t)
			pool := pgtest.Pool(t)
			db := pgtest.DBOn(t, pool)
			ensureGroup(t, db, "g")
			at := func(m, s int) time.Time { return time.Date(2026, 1, 1, 0, m, s, 0, time.UTC) }
			clkA := fakeclock.New(at(0, 10))
			scheds := []periodic.Schedule{
				{Name: "once", Every: time.Minute, Job: tickJob("once")},
				{Name: "skip", Every: time.Minute, Missed: periodic.MissedSkip, Job: tickJob("skip")},
			}
			newScheduler := func(id string, clk lease.Clock) *periodic.Scheduler {
				s, err := periodic.New(db, periodic.Config{Group: "g", Schedules: scheds, ID: id, Clock: clk,
					Grace: 30 * time.Second, Lease: lease.Config{TTL: time.Second, MaxBackoff: 50 * time.Millisecond}})
				pgtest.Must(t, err)
				t.Cleanup(func() { s.Stop(ctx) })
				return s
			}
			a := newScheduler("a", clkA)
			pgtest.Must(t, a.Start(ctx))
			if !clkA.WaitPending(1, 10*time.Second) {
				t.Fatal("a never waited for a slot")
			}
			clkA.Advance(at(1, 0).Sub(clkA.Now()))
			rows := func() []slotRow {
				r, err := readSlots(ctx, pool, "g")
				pgtest.Must(t, err)
				return r
			}
			waitFor(t, 10*time.Second, "slot 00:01", func() bool { return len(rows()) == 2 })
			clkA.Advance(at(1, 55).Sub(clkA.Now()))
			pgtest.Must(t, a.Stop(ctx)) // graceful: releases the lease

			clkB := fakeclock.New(at(1, 55).Add(c.ahead))
			b := newScheduler("b", clkB)
			pgtest.Must(t, b.Start(ctx))
			last, _, err := periodic.Prev(scheds[0], clkB.Now())
			pgtest.Must(t, err)
			n := int(last.Sub(at(1, 0)) / time.Minute)
			waitFor(t, 10*time.Second, "b's catch-up", func() bool { return len(rows()) == 2*(n+1) })
			pgtest.Must(t, b.Stop(ctx))

			got := rows()
			jobs, err := readJobs(ctx, pool, "g")
			pgtest.Must(t, err)
			if err := checkRecords(scheds, got, jobs); err != nil {
				t.Fatal(err)
			}
			var want []time.Time
			for m := 1; m <= n+1; m++ {
				want = append(want, at(m, 0))
			}
			for _, sc := range scheds {
				if e := slotTimes(got, sc.Name, true); !equalTimes(e, want) {
					t.Errorf("%s: enqueued %v, want %v", sc.Name, e, want)
				}
			}
			for _, r := range got {
				if r.Missed != 0 {
					t.Errorf("%s: slot %v counts %d missed", r.Schedule, r.Slot, r.Missed)
				}
			}
		})
	}
}

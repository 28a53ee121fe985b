package periodic_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/periodic"
)

// The OnSlot hook sees a slot enqueued, then one fenced: during the second
// slot's transaction another holder takes the leader lease over (it
// expires, and another lease client acquires it), so the commit is
// refused. The fenced slot is not recorded.
func TestSlotHookSeesEnqueuedAndFenced(t *testing.T) {
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	ensureGroup(t, db, "g")
	at := func(m int) time.Time { return time.Date(2026, 1, 1, 0, m, 0, 0, time.UTC) }
	clk := fakeclock.New(at(0).Add(10 * time.Second))
	var mu sync.Mutex
	var events []periodic.SlotEvent
	s, err := periodic.New(db, periodic.Config{Group: "g", ID: "a", Clock: clk, Grace: -1,
		Schedules: []periodic.Schedule{{Name: "tick", Every: time.Minute, Job: tickJob("tick")}},
		Lease:     lease.Config{TTL: time.Second, MaxBackoff: 50 * time.Millisecond},
		Hooks: periodic.Hooks{OnSlot: func(ev periodic.SlotEvent) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}}})
	pgtest.Must(t, err)
	other, err := lease.New(db, lease.Config{Owner: "b", TTL: time.Minute})
	pgtest.Must(t, err)
	defer other.Close(ctx)
	var tookOver atomic.Bool
	periodic.SetBeforeCommit(s, func(_ context.Context, _ fence.Token, slots []periodic.Slot) {
		if !slots[0].At.Equal(at(2)) || tookOver.Load() {
			return
		}
		for range 100 { // a's renewal may slip in between
			_, err := pool.Exec(ctx, `UPDATE leasehold.leases SET expires_at = clock_timestamp() - interval '1 s'
				WHERE name = 'periodic/g'`)
			pgtest.Must(t, err)
			if _, err := other.TryAcquire(ctx, "periodic/g"); err == nil {
				tookOver.Store(true)
				return
			}
		}
	})
	pgtest.Must(t, s.Start(ctx))
	defer s.Stop(ctx)
	find := func(o periodic.SlotOutcome) *periodic.SlotEvent {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			if ev.Outcome == o {
				return &ev
			}
		}
		return nil
	}
	for m := 1; m <= 2; m++ {
		if !clk.WaitPending(1, 10*time.Second) {
			t.Fatal("the leader never waited for a slot")
		}
		clk.Advance(at(m).Sub(clk.Now()))
		want := []periodic.SlotOutcome{periodic.SlotEnqueued, periodic.SlotFenced}[m-1]
		waitFor(t, 10*time.Second, string(want)+" event", func() bool { return find(want) != nil })
	}
	if !tookOver.Load() {
		t.Fatal("the lease was not taken over")
	}
	enq, fenced := find(periodic.SlotEnqueued), find(periodic.SlotFenced)
	if enq.Group != "g" || enq.Schedule != "tick" || !enq.At.Equal(at(1)) || enq.JobID == 0 || enq.Token == 0 || enq.Err != nil {
		t.Errorf("enqueued event %+v", enq)
	}
	if !fenced.At.Equal(at(2)) || fenced.Token != enq.Token || fenced.JobID != 0 || !errors.Is(fenced.Err, fence.ErrFenced) {
		t.Errorf("fenced event %+v", fenced)
	}
	rows, err := readSlots(ctx, pool, "g")
	pgtest.Must(t, err)
	if got := slotTimes(rows, "tick", false); !equalTimes(got, []time.Time{at(1)}) {
		t.Errorf("recorded %v; want the enqueued slot only", got)
	}
}

// List reports each schedule's RecentSlots latest slots, newest first,
// the first one being the LastSlot; 12 slots are recorded, so the bound
// shows.
func TestListShowsRecentSlots(t *testing.T) {
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	ensureGroup(t, db, "g")
	at := func(m int) time.Time { return time.Date(2026, 1, 1, 0, m, 0, 0, time.UTC) }
	clk := fakeclock.New(at(0).Add(10 * time.Second))
	scheds := []periodic.Schedule{
		{Name: "a", Every: time.Minute, Job: tickJob("a")},
		{Name: "b", Every: 2 * time.Minute, Job: tickJob("b")},
	}
	s, err := periodic.New(db, periodic.Config{Group: "g", Clock: clk, Grace: -1, Schedules: scheds,
		Lease: lease.Config{TTL: time.Second}})
	pgtest.Must(t, err)
	pgtest.Must(t, s.Start(ctx))
	defer s.Stop(ctx)
	const n = 12
	for m := 1; m <= n; m++ {
		if !clk.WaitPending(1, 10*time.Second) {
			t.Fatal("the leader never waited for a slot")
		}
		clk.Advance(at(m).Sub(clk.Now()))
		waitFor(t, 10*time.Second, "the slot", func() bool {
			r, err := readSlots(ctx, pool, "g")
			pgtest.Must(t, err)
			return len(slotTimes(r, "a", true)) == m && len(slotTimes(r, "b", true)) == m/2
		})
	}
	infos, err := periodic.List(ctx, db, "g")
	pgtest.Must(t, err)
	if len(infos) != 2 {
		t.Fatalf("List: %+v", infos)
	}
	for _, c := range []struct {
		in   periodic.Info
		want []time.Time
	}{
		{infos[0], []time.Time{at(12), at(11), at(10), at(9), at(8), at(7), at(6), at(5), at(4), at(3)}},
		{infos[1], []time.Time{at(12), at(10), at(8), at(6), at(4), at(2)}},
	} {
		var got []time.Time
		for _, r := range c.in.Recent {
			got = append(got, r.At)
			if r.JobID == 0 || r.Token == 0 || r.Skipped || r.Missed != 0 || r.RecordedAt.IsZero() {
				t.Errorf("%s: slot %+v", c.in.Name, r)
			}
		}
		if !equalTimes(got, c.want) {
			t.Errorf("%s: recent slots %v; want %v", c.in.Name, got, c.want)
		}
		if len(c.in.Recent) > 0 && (!c.in.LastSlot.Equal(c.in.Recent[0].At) || c.in.LastJobID != c.in.Recent[0].JobID) {
			t.Errorf("%s: last slot %v (job %d), recent[0] %+v", c.in.Name, c.in.LastSlot, c.in.LastJobID, c.in.Recent[0])
		}
	}
	if periodic.RecentSlots != 10 {
		t.Errorf("RecentSlots %d; the test expects 10", periodic.RecentSlots)
	}
}

package periodic_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/periodic"
	"github.com/leasehold/leasehold/queue"
)

// A schedule whose Job blocks forever, and one whose Job panics, do not
// stop another schedule's slots from being enqueued on time (the slot
// clock never moves past the slot): the blocked Job fails its slot with
// ErrJobTimeout after Config.JobTimeout (real time here: it runs on
// Lease.Clock), and while it is still running the next pass leaves its
// schedule out at once, without calling it again; the panic is an error of
// its slot only. The hook reports each failure.
func TestBlockingJobDoesNotStopOthers(t *testing.T) {
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	ensureGroup(t, db, "g")
	at := func(m int) time.Time { return time.Date(2026, 1, 1, 0, m, 0, 0, time.UTC) }
	clk := fakeclock.New(at(0).Add(10 * time.Second))
	release := make(chan struct{})
	var mu sync.Mutex
	calls := 0 // of the blocking Job
	failed := make(map[string][]error)
	scheds := []periodic.Schedule{
		{Name: "blocks", Every: time.Minute, Job: func(time.Time) queue.Job {
			mu.Lock()
			calls++
			mu.Unlock()
			<-release
			return queue.Job{Args: tick{Schedule: "blocks"}}
		}},
		{Name: "good", Every: time.Minute, Job: tickJob("good")},
		{Name: "panics", Every: time.Minute, Job: func(time.Time) queue.Job { panic("no args") }},
	}
	s, err := periodic.New(db, periodic.Config{Group: "g", Clock: clk, Grace: -1, Schedules: scheds,
		JobTimeout: 200 * time.Millisecond, Lease: lease.Config{TTL: time.Second},
		Hooks: periodic.Hooks{OnSlot: func(ev periodic.SlotEvent) {
			if ev.Outcome == periodic.SlotFailed {
				mu.Lock()
				failed[ev.Schedule] = append(failed[ev.Schedule], ev.Err)
				mu.Unlock()
			}
		}}})
	pgtest.Must(t, err)
	pgtest.Must(t, s.Start(ctx))
	defer s.Stop(ctx)
	defer close(release) // before Stop: the blocked call returns (late) and is ignored
	for m := 1; m <= 2; m++ {
		if !clk.WaitPending(1, 10*time.Second) {
			t.Fatal("the leader never waited for a slot")
		}
		clk.Advance(at(m).Sub(clk.Now()))
		waitFor(t, 10*time.Second, "the good schedule's slot", func() bool {
			r, err := readSlots(ctx, pool, "g")
			pgtest.Must(t, err)
			return len(slotTimes(r, "good", true)) == m
		})
		if now := clk.Now(); !now.Equal(at(m)) {
			t.Fatalf("slot %v enqueued with the clock at %v", at(m), now)
		}
	}
	rows, err := readSlots(ctx, pool, "g")
	pgtest.Must(t, err)
	if got := slotTimes(rows, "good", true); !equalTimes(got, []time.Time{at(1), at(2)}) || len(rows) != 2 {
		t.Fatalf("recorded %+v; want the good schedule's slots only", rows)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Errorf("the blocking Job was called %d times; want once (never again while it runs)", calls)
	}
	// One event per slot of each pass: the first pass's times out, the
	// later ones' (slot 00:01 retried, and 00:02) find the call running.
	b := failed["blocks"]
	if len(b) < 2 || !errors.Is(b[0], periodic.ErrJobTimeout) || !strings.Contains(b[0].Error(), "did not return within 200ms") {
		t.Errorf("the blocking schedule's failures: %v; want a timeout first", b)
	}
	for _, err := range b[1:] {
		if !errors.Is(err, periodic.ErrJobTimeout) || !strings.Contains(err.Error(), "still running") {
			t.Errorf("the blocking schedule's later failure: %v; want still running", err)
		}
	}
	p := failed["panics"]
	if len(p) < 2 {
		t.Errorf("the panicking schedule's failures: %v", p)
	}
	for _, err := range p {
		if !strings.Contains(err.Error(), "panicked") {
			t.Errorf("the panicking schedule's failure: %v", err)
		}
	}
	if g := failed["good"]; g != nil {
		t.Errorf("the good schedule failed: %v", g)
	}
}

// A slot whose Job is still running when the leader stops is reported with
// that cause, not as a timeout: the JobTimeout of a minute never passed.
func TestJobCutShortByStopIsNotATimeout(t *testing.T) {
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	ensureGroup(t, db, "g")
	at := func(m int) time.Time { return time.Date(2026, 1, 1, 0, m, 0, 0, time.UTC) }
	clk := fakeclock.New(at(0).Add(10 * time.Second))
	called, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	var once sync.Once
	events := make(chan periodic.SlotEvent, 10)
	s, err := periodic.New(db, periodic.Config{Group: "g", Clock: clk, Grace: -1,
		Schedules: []periodic.Schedule{{Name: "blocks", Every: time.Minute, Job: func(time.Time) queue.Job {
			once.Do(func() { close(called) })
			<-release
			return queue.Job{Args: tick{Schedule: "blocks"}}
		}}},
		JobTimeout: time.Minute, Lease: lease.Config{TTL: time.Second},
		Hooks: periodic.Hooks{OnSlot: func(ev periodic.SlotEvent) { events <- ev }}})
	pgtest.Must(t, err)
	pgtest.Must(t, s.Start(ctx))
	if !clk.WaitPending(1, 10*time.Second) {
		t.Fatal("the leader never waited for a slot")
	}
	clk.Advance(at(1).Sub(clk.Now()))
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("the Job was not called")
	}
	pgtest.Must(t, s.Stop(ctx))
	select {
	case ev := <-events:
		if ev.Outcome != periodic.SlotFailed || errors.Is(ev.Err, periodic.ErrJobTimeout) ||
			!strings.Contains(fmt.Sprint(ev.Err), "leadership ended") {
			t.Errorf("the slot cut short by Stop: %v %v; want failed with the leadership's end as cause", ev.Outcome, ev.Err)
		}
	case <-time.After(10 * time.Second):
		t.Error("no slot event after Stop cut the Job's wait short")
	}
}

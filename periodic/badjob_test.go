package periodic_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/periodic"
	"github.com/leasehold/leasehold/queue"
)

// A Job that returns another group, or panics, fails its schedule's pass
// with a *ScheduleError naming the schedule (Job runs before the slot
// transaction): nothing is recorded, so the slot stays due (the leader
// retries the schedule after RetryDelay), and the process does not crash.
func TestBadJobFailsTheSlotTransaction(t *testing.T) {
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	ensureGroup(t, db, "g")
	clk := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC))
	errs := make(chan error, 16)
	s, err := periodic.New(db, periodic.Config{Group: "g", Clock: clk, Lease: lease.Config{TTL: time.Second},
		RetryDelay: time.Hour, // one attempt each: the fake clock never gets there
		Schedules: []periodic.Schedule{
			{Name: "elsewhere", Every: time.Minute, Job: func(time.Time) queue.Job {
				return queue.Job{Group: "other", Args: tick{}}
			}},
		}})
	pgtest.Must(t, err)
	periodic.SetAttempt(s, func(_ fence.Token, _ []periodic.Slot, err error) { errs <- err })
	pgtest.Must(t, s.Start(ctx))
	defer s.Stop(ctx)
	if !clk.WaitPending(1, 10*time.Second) {
		t.Fatal("the leader never waited for a slot")
	}
	clk.Advance(time.Minute)
	err = <-errs
	var se *periodic.ScheduleError
	if !errors.As(err, &se) || se.Name != "elsewhere" || !strings.Contains(err.Error(), `returned the group "other"`) {
		t.Fatalf("slot transaction of a Job in another group: %v", err)
	}
	rows, err := readSlots(ctx, pool, "g")
	pgtest.Must(t, err)
	if len(rows) != 0 {
		t.Fatalf("a failed slot transaction recorded %+v", rows)
	}
}

func TestPanickingJobIsAnError(t *testing.T) {
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	ensureGroup(t, db, "g")
	clk := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC))
	errs := make(chan error, 16)
	s, err := periodic.New(db, periodic.Config{Group: "g", Clock: clk, Lease: lease.Config{TTL: time.Second},
		RetryDelay: time.Hour,
		Schedules:  []periodic.Schedule{{Name: "boom", Every: time.Minute, Job: func(time.Time) queue.Job { panic("no args") }}}})
	pgtest.Must(t, err)
	periodic.SetAttempt(s, func(_ fence.Token, _ []periodic.Slot, err error) { errs <- err })
	pgtest.Must(t, s.Start(ctx))
	defer s.Stop(ctx)
	if !clk.WaitPending(1, 10*time.Second) {
		t.Fatal("the leader never waited for a slot")
	}
	clk.Advance(time.Minute)
	if err := <-errs; !errors.Is(err, periodic.ErrInvalidSchedule) || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("slot transaction of a panicking Job: %v", err)
	}
}

// A database that went away (here: a closed pool) gives List an error
// wrapping leasehold.ErrClosed, not a bare driver error.
func TestListOnAClosedPoolReportsErrClosed(t *testing.T) {
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	closed, err := pgxpool.New(ctx, pool.Config().ConnString())
	pgtest.Must(t, err)
	closed.Close()
	if _, err := periodic.List(ctx, pgtest.DBOn(t, closed), "g"); !errors.Is(err, leasehold.ErrClosed) {
		t.Fatalf("List on a closed pool: %v; want an error wrapping leasehold.ErrClosed", err)
	}
}

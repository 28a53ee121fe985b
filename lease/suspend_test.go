package lease_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

// suspendRig is a Client on a fake clock (TTL 2s: SafetyMargin 200ms, so a
// jump of more than 100ms counts as a suspend; RenewInterval ~667ms; local
// deadline 1.8s after a renewal is sent) holding leases a and b, whose
// renewal loop the test drives one wake at a time. The database's TTL is
// real time; the tests take a fraction of it.
type suspendRig struct {
	t      *testing.T
	clk    *fakeclock.Clock
	c      *lease.Client
	ls     []*lease.Lease
	sleeps chan time.Duration
	wait   time.Duration // the renewal loop's current sleep

	mu     sync.Mutex
	renews []lease.RenewEvent
}

const suspendLimit = 100 * time.Millisecond // SafetyMargin/2

func newSuspendRig(t *testing.T) *suspendRig {
	t.Helper()
	r := &suspendRig{t: t, clk: fakeclock.New(time.Now()), sleeps: make(chan time.Duration, 64)}
	r.c = newClient(t, pgtest.Pool(t), lease.Config{Owner: "s", TTL: 2 * time.Second, Clock: r.clk,
		Hooks: lease.Hooks{OnRenew: func(e lease.RenewEvent) { r.mu.Lock(); r.renews = append(r.renews, e); r.mu.Unlock() }}})
	lease.SetLoopHook(r.c, func(d time.Duration) { r.sleeps <- d })
	ls, err := r.c.TryAcquireMany(pgtest.Context(t), "a", "b")
	pgtest.Must(t, err)
	r.ls = ls
	r.wait = r.nextSleep()
	return r
}

func (r *suspendRig) nextSleep() time.Duration {
	r.t.Helper()
	select {
	case d := <-r.sleeps:
		return d
	case <-time.After(time.Minute):
		r.t.Fatal("the renewal loop did not go back to sleep within a minute")
		return 0
	}
}

// wake advances the clock by the loop's current sleep and waits until the
// loop sleeps again (or exits); it reports whether it still runs.
func (r *suspendRig) wake() bool {
	r.clk.Advance(r.wait)
	r.wait = r.nextSleep()
	return r.wait >= 0
}

// renewed returns how many leases renewal statements have renewed so far.
func (r *suspendRig) renewed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.renews {
		n += e.Renewed
	}
	return n
}

// expiresAt returns the database's expires_at of a and b. A renewal moves
// it later; the release after a loss moves it to the release's time.
func (r *suspendRig) expiresAt() [2]time.Time {
	infos, err := r.c.InspectMany(pgtest.Context(r.t), "a", "b")
	pgtest.Must(r.t, err)
	return [2]time.Time{infos[0].ExpiresAt, infos[1].ExpiresAt}
}

func isSuspended(err error, jump time.Duration) bool {
	var se *lease.SuspendError
	return errors.Is(err, lease.ErrLost) && errors.Is(err, lease.ErrSuspended) &&
		errors.As(err, &se) && se.Jump == jump && se.Limit == suspendLimit
}

// A suspend longer than the TTL (the wall clock runs on 3s, the monotonic
// clock stands still): the first look at the clock ends every lease at once,
// with a *SuspendError, although the local deadlines, counted on the
// monotonic clock, still lie ahead; the rows are released.
func TestSuspendEndsEveryLeaseAtOnce(t *testing.T) {
	t.Parallel()
	r := newSuspendRig(t)
	a, b := r.ls[0], r.ls[1]
	r.clk.StepWall(3 * time.Second)
	if err := a.Err(); !isSuspended(err, 3*time.Second) {
		t.Fatalf("a after a 3s suspend: Err = %v; want a *SuspendError (ErrLost, ErrSuspended) of 3s", err)
	}
	select {
	case <-b.Done(): // closed by a's Err, before anything else ran
	default:
		t.Fatal("b's Done still open after a's Err found the suspend")
	}
	if err := b.Err(); !isSuspended(err, 3*time.Second) {
		t.Fatalf("b: Err = %v; want a *SuspendError of 3s", err)
	}
	if len(r.c.Held()) != 0 {
		t.Fatalf("Held = %v after the suspend; want none", r.c.Held())
	}
	// The token-checked releases, in the background, free the rows.
	ctx := pgtest.Context(t)
	for {
		infos, err := r.c.InspectMany(ctx, "a", "b")
		pgtest.Must(t, err)
		if !infos[0].Held() && !infos[1].Held() {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the rows were not released after the suspend")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Nobody calls Err after the resume, and the renewal loop's timer fires
// late (as timers do after a resume: they count on the monotonic clock):
// the loop ends the leases and sends no renewal for them. The
// loop looks at the clock at least every SafetyMargin/2, so Done closes soon
// after a resume even when no renewal is due.
func TestSuspendIsFoundByTheRenewalLoopWhichDoesNotRenew(t *testing.T) {
	t.Parallel()
	r := newSuspendRig(t)
	if r.wait > suspendLimit {
		t.Fatalf("the renewal loop sleeps %v; want at most SafetyMargin/2 (%v) between looks at the clock", r.wait, suspendLimit)
	}
	before := r.expiresAt()
	r.clk.StepWall(3 * time.Second)
	// The timer fires late: the renewal of all is due by now.
	r.clk.Advance(r.c.Config().RenewInterval)
	r.nextSleep() // the loop has finished its wake
	for _, l := range r.ls {
		select {
		case <-l.Done():
		default:
			t.Fatalf("%s: Done still open after the renewal loop woke", l.Name())
		}
		if !isSuspended(l.Err(), 3*time.Second) {
			t.Fatalf("%s: Err = %v; want a *SuspendError of 3s", l.Name(), l.Err())
		}
	}
	if n := r.renewed(); n != 0 {
		t.Fatalf("%d leases renewed after the resume; want none", n)
	}
	if after := r.expiresAt(); after[0].After(before[0]) || after[1].After(before[1]) {
		t.Fatalf("expires_at moved from %v to %v: a lease was renewed after the suspend", before, after)
	}
}

// The negative controls: wall-clock movements that are not a suspend.
//   - A backward step of the same 3s (an NTP step back): a suspend only
//     ever puts the wall clock ahead, and the deadlines count on the
//     monotonic clock, so it is ignored and the leases are renewed.
//   - A forward step of exactly the limit is tolerated; one just beyond it
//     is a suspend. (A forward NTP step beyond the limit looks exactly like
//     a suspend and ends the leases too: a false loss, the safe direction.)
//   - Both clocks running on by 3s together (a long pause, no suspend): the
//     leases are lost by their local deadlines, not as suspended.
func TestWallStepsThatAreNotSuspends(t *testing.T) {
	t.Parallel()
	t.Run("backward step", func(t *testing.T) {
		t.Parallel()
		r := newSuspendRig(t)
		r.clk.StepWall(-3 * time.Second)
		for _, l := range r.ls {
			if l.Err() != nil {
				t.Fatalf("%s after a 3s backward step: Err = %v; want held", l.Name(), l.Err())
			}
		}
		for r.renewed() < 2 {
			if !r.wake() {
				t.Fatal("the renewal loop exited")
			}
		}
		for _, l := range r.ls {
			if l.Err() != nil {
				t.Fatalf("%s: Err = %v; want held and renewed", l.Name(), l.Err())
			}
		}
	})
	t.Run("forward step at the limit", func(t *testing.T) {
		t.Parallel()
		r := newSuspendRig(t)
		r.clk.StepWall(suspendLimit)
		for _, l := range r.ls {
			if l.Err() != nil {
				t.Fatalf("%s after a step of %v: Err = %v; want held", l.Name(), suspendLimit, l.Err())
			}
		}
		r.clk.StepWall(time.Millisecond)
		if err := r.ls[0].Err(); !isSuspended(err, suspendLimit+time.Millisecond) {
			t.Fatalf("after a step of %v: Err = %v; want a *SuspendError", suspendLimit+time.Millisecond, err)
		}
	})
	t.Run("both clocks run on", func(t *testing.T) {
		t.Parallel()
		r := newSuspendRig(t)
		r.clk.Advance(3 * time.Second) // fires the deadline timers, and the loop's
		for _, l := range r.ls {
			err := l.Err()
			if !errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrSuspended) || !strings.Contains(err.Error(), "local deadline") {
				t.Fatalf("%s after 3s on both clocks: Err = %v; want ErrLost by the local deadline, not suspended (deadline %v, now %v, renews %+v)", l.Name(), err, l.Deadline(), r.clk.Now(), r.renews)
			}
		}
	})
}

// A renewal loop whose timer fires late, past a lease's local deadline (the
// process was starved or stopped: both clocks ran on), before the deadline
// timer has run: the lease is lost by its deadline and no renewal is sent
// for it. The step clock fires only the loop's timer.
func TestLateRenewalTimerDoesNotRenewAPassedLease(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &stepClock{now: t0}
	var mu sync.Mutex
	var renews []lease.RenewEvent
	c := newClient(t, pgtest.Pool(t), lease.Config{Owner: "late", TTL: 3 * time.Second, Clock: clk,
		Hooks: lease.Hooks{OnRenew: func(e lease.RenewEvent) { mu.Lock(); renews = append(renews, e); mu.Unlock() }}})
	sleeps := make(chan time.Duration, 8)
	lease.SetLoopHook(c, func(d time.Duration) { sleeps <- d })
	l, err := c.TryAcquire(pgtest.Context(t), "job")
	pgtest.Must(t, err)
	before, err := c.Inspect(pgtest.Context(t), "job")
	pgtest.Must(t, err)
	wait := <-sleeps // the loop's timer, set at t0

	clk.Set(l.Deadline().Add(time.Second))
	if n := clk.Fire(t, t0.Add(wait)); n != 1 {
		t.Fatalf("%d timers at the loop's wake; want 1", n)
	}
	select {
	case <-sleeps: // the loop has finished its wake
	case <-time.After(time.Minute):
		t.Fatal("the renewal loop did not finish its wake")
	}
	if err := l.Err(); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "local deadline") {
		t.Fatalf("Err = %v; want ErrLost by the local deadline", err)
	}
	after, err := c.Inspect(pgtest.Context(t), "job")
	pgtest.Must(t, err)
	mu.Lock()
	defer mu.Unlock()
	if len(renews) != 0 || after.ExpiresAt.After(before.ExpiresAt) {
		t.Fatalf("renewals %+v, expires_at %v → %v: a lease past its deadline was renewed", renews, before.ExpiresAt, after.ExpiresAt)
	}
}

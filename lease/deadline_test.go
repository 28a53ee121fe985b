package lease_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

// stepClock is a lease.Clock under full test control: Set moves time without
// firing anything, and Fire runs, synchronously, the timers due at exactly
// one instant. The renewal loop's sleep is never fired unless asked for, so
// the only renewals are the test's own Lease.Renew calls.
type stepClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*stepTimer
	replyAt time.Time // if set, the next renewal's reply "arrives" then
}

type stepTimer struct {
	c    *stepClock
	at   time.Time
	f    func()
	dead bool
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) AfterFunc(d time.Duration, f func()) lease.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &stepTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *stepTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.dead
	t.dead = true
	return was
}

func (c *stepClock) Set(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
}

// Fire runs the live timers due at exactly at (the clock must have reached
// it) and returns how many ran.
func (c *stepClock) Fire(t *testing.T, at time.Time) int {
	t.Helper()
	c.mu.Lock()
	if c.now.Before(at) {
		c.mu.Unlock()
		t.Fatalf("test bug: firing timers at %v before the clock reached it", at)
	}
	var due []*stepTimer
	for _, tm := range c.timers {
		if !tm.dead && tm.at.Equal(at) {
			tm.dead = true
			due = append(due, tm)
		}
	}
	c.mu.Unlock()
	for _, tm := range due {
		tm.f()
	}
	return len(due)
}

// onRenew is the OnRenew hook: it runs after the renewal statement returned
// and before the Client acts on the reply, so moving the clock here sets when
// the reply "arrived".
func (c *stepClock) onRenew(lease.RenewEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.replyAt.IsZero() {
		c.now, c.replyAt = c.replyAt, time.Time{}
	}
}

func (c *stepClock) replyArrivesAt(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replyAt = at
}

// stepClient returns a Client (TTL 3s: SafetyMargin 300ms, RenewInterval 1s)
// on a stepClock reading t0, and a lease on "job" acquired at t0.
func stepClient(t *testing.T) (clk *stepClock, l *lease.Lease, t0 time.Time) {
	t.Helper()
	t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk = &stepClock{now: t0}
	c := newClient(t, pgtest.Pool(t), lease.Config{Owner: "stepper", TTL: 3 * time.Second, Clock: clk,
		Hooks: lease.Hooks{OnRenew: clk.onRenew}})
	l, err := c.TryAcquire(pgtest.Context(t), "job")
	pgtest.Must(t, err)
	return clk, l, t0
}

const stepTrust = 3*time.Second - 300*time.Millisecond // TTL - SafetyMargin

// The local deadline is counted from when the request was sent, ends
// SafetyMargin before the TTL, moves with each confirmed renewal (counted from
// when that renewal was sent, not when its reply came), and the deadline timer
// follows it.
func TestLocalDeadlineCountsFromSendMinusMarginAndFollowsRenewals(t *testing.T) {
	t.Parallel()
	clk, l, t0 := stepClient(t)
	if want := t0.Add(stepTrust); !l.Deadline().Equal(want) {
		t.Fatalf("deadline after acquire = t0%+v; want t0%+v (sent + TTL - SafetyMargin)", l.Deadline().Sub(t0), want.Sub(t0))
	}

	// A renewal sent at t0+0.5s whose reply arrives 400ms later.
	sent := t0.Add(500 * time.Millisecond)
	clk.Set(sent)
	clk.replyArrivesAt(sent.Add(400 * time.Millisecond))
	pgtest.Must(t, l.Renew(pgtest.Context(t)))
	if want := sent.Add(stepTrust); !l.Deadline().Equal(want) {
		t.Fatalf("deadline after renewal = t0%+v; want t0%+v (renewal sent + TTL - SafetyMargin)", l.Deadline().Sub(t0), want.Sub(t0))
	}

	// The timer armed at acquire fires at the old deadline: the lease is
	// still good and the timer must be re-armed for the new deadline.
	clk.Set(t0.Add(stepTrust))
	if n := clk.Fire(t, t0.Add(stepTrust)); n != 1 {
		t.Fatalf("%d timers at the first deadline; want 1", n)
	}
	if l.Err() != nil {
		t.Fatalf("lost at the old deadline although a renewal moved it: %v", l.Err())
	}
	clk.Set(l.Deadline())
	if n := clk.Fire(t, l.Deadline()); n != 1 {
		t.Fatalf("%d timers at the renewed deadline; want 1 (deadline timer not re-armed)", n)
	}
	if !closedWithin(l.Done(), time.Second) || !errors.Is(l.Err(), lease.ErrLost) || !strings.Contains(l.Err().Error(), "deadline") {
		t.Fatalf("at the renewed deadline: Err = %v; want ErrLost by local deadline", l.Err())
	}
}

// A renewal whose reply arrives after the local deadline has passed (but
// before the deadline timer ran) must not move the deadline: the lease stays
// lost.
func TestRenewalReplyAfterDeadlineDoesNotRevive(t *testing.T) {
	t.Parallel()
	clk, l, t0 := stepClient(t)
	deadline := l.Deadline()
	clk.Set(t0.Add(2 * time.Second))                         // sent before the deadline ...
	clk.replyArrivesAt(deadline.Add(100 * time.Millisecond)) // ... answered after it
	if err := l.Renew(pgtest.Context(t)); err != nil && !errors.Is(err, lease.ErrLost) {
		t.Fatalf("late renewal = %v; want nil or ErrLost", err)
	}
	if !l.Deadline().Equal(deadline) {
		t.Fatalf("a reply after the deadline moved it by %v", l.Deadline().Sub(deadline))
	}
	clk.Fire(t, deadline)
	if !closedWithin(l.Done(), time.Second) || !errors.Is(l.Err(), lease.ErrLost) {
		t.Fatalf("Err = %v; want ErrLost: a late reply must not revive the lease", l.Err())
	}
}

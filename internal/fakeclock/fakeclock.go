package fakeclock

import (
	"sort"
	"sync"
	"time"

	"github.com/leasehold/leasehold/lease"
)

// Clock is a fake clock. Time moves only when Advance is called; timers
// whose time has come then fire, each in its own goroutine, in time order.
// It also has a wall clock (lease.WallClock), which Advance moves along
// and StepWall moves on its own.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	wall   time.Duration // the wall clock's offset from now
	timers []*timer
	added  chan struct{}
}

var _ lease.WallClock = (*Clock)(nil)

type timer struct {
	c    *Clock
	at   time.Time
	f    func()
	dead bool
}

// New returns a fake clock reading start.
func New(start time.Time) *Clock {
	return &Clock{now: start, added: make(chan struct{}, 1)}
}

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Wall returns the fake wall-clock time: Now plus every StepWall so far,
// without a monotonic component.
func (c *Clock) Wall() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Add(c.wall).Round(0)
}

// StepWall moves the wall clock by d (negative: back) and leaves Now and the
// timers alone. A forward step is what a suspend of the host looks like to
// a process: the monotonic clock, on which Now and the timers count, stood
// still while the wall clock went on. It is also what a forward NTP step
// looks like: the two cannot be told apart.
func (c *Clock) StepWall(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall += d
}

// AfterFunc schedules f to run once the fake time reaches Now()+d.
func (c *Clock) AfterFunc(d time.Duration, f func()) lease.Timer {
	c.mu.Lock()
	t := &timer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	select {
	case c.added <- struct{}{}:
	default:
	}
	if d <= 0 {
		c.Advance(0)
	}
	return t
}

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.dead {
		return false
	}
	t.dead = true
	return true
}

// Advance moves the clock forward by d and fires every timer now due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due, rest []*timer
	for _, t := range c.timers {
		switch {
		case t.dead:
		case !t.at.After(c.now):
			t.dead = true
			due = append(due, t)
		default:
			rest = append(rest, t)
		}
	}
	c.timers = rest
	c.mu.Unlock()
	sort.SliceStable(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		go t.f()
	}
}

// Pending returns the number of timers that have not fired or been stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.dead {
			n++
		}
	}
	return n
}

// WaitPending blocks until at least n timers are pending or the timeout
// passes, and reports whether they were.
func (c *Clock) WaitPending(n int, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for c.Pending() < n {
		select {
		case <-c.added:
		case <-deadline:
			return false
		case <-time.After(time.Millisecond):
		}
	}
	return true
}

package lease

import "time"

// Clock is the local clock a Client uses for its own "still mine" deadline,
// renewal schedule and backoff. It never decides when a lease expires in the
// database: that is always the database's now(). Inject a fake to make
// failure tests deterministic.
type Clock interface {
	// Now returns the current time. The system clock's readings carry a
	// monotonic component, so differences are immune to wall-clock steps.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// WallClock is a Clock that also reads a separate wall clock. A Client
// compares how far the wall clock and Now advanced to detect that the host
// was suspended (see ErrSuspended): the monotonic clock stops while a host
// or VM is suspended, the wall clock (and the database's) does not. A Clock
// that does not implement WallClock has its wall readings taken from Now
// with the monotonic component stripped (t.Round(0)); for SystemClock that
// is the system's wall clock, for a fake whose readings carry no monotonic
// component it is Now itself, and no suspend is ever detected.
type WallClock interface {
	Clock
	// Wall returns the current wall-clock time, without a monotonic
	// component.
	Wall() time.Time
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not run yet and reports whether it
	// did so.
	Stop() bool
}

// SystemClock is the real clock. It is the default Clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// reading is one reading of the Client's clock: mono (Now, on which
// deadlines and timers count) and wall (the clock that keeps counting while
// the host is suspended).
type reading struct{ mono, wall time.Time }

// read reads clk.
func read(clk Clock) reading {
	now := clk.Now()
	if w, ok := clk.(WallClock); ok {
		return reading{mono: now, wall: w.Wall()}
	}
	return reading{mono: now, wall: now.Round(0)}
}

// jump returns how much further the wall clock advanced than the monotonic
// clock from r to now: about the time the host was suspended in between
// (or a forward step of the wall clock). It is negative after a backward
// step of the wall clock.
func (r reading) jump(now reading) time.Duration {
	return now.wall.Sub(r.wall) - now.mono.Sub(r.mono)
}

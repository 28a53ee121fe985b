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

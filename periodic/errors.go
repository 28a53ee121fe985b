package periodic

import (
	"errors"

	"github.com/leasehold/leasehold/internal/lifecycle"
)

var (
	// ErrInvalidSchedule is wrapped by the *ScheduleError of a schedule
	// that New refuses.
	ErrInvalidSchedule = errors.New("periodic: invalid schedule")
	// ErrInvalidConfig is wrapped by every other configuration error of
	// New.
	ErrInvalidConfig = errors.New("periodic: invalid config")
	// ErrJobTimeout is wrapped by the *ScheduleError of a slot whose
	// schedule's Job did not return within Config.JobTimeout, or was still
	// running for an earlier slot.
	ErrJobTimeout = errors.New("periodic: Job did not return in time")
	// ErrStarted is returned by a second Start. It wraps
	// leasehold.ErrStarted.
	ErrStarted = lifecycle.Started("periodic: already started")
	// ErrStopped is returned by Start on a stopped Scheduler. It wraps
	// leasehold.ErrStopped.
	ErrStopped = lifecycle.Stopped("periodic: stopped")
)

// ScheduleError reports a schedule that New refuses, or whose slot failed
// before its transaction (its Job panicked, timed out or returned another
// group): which one and why.
type ScheduleError struct {
	// Index is the schedule's index in Config.Schedules.
	Index int
	// Name is the schedule's name (may be the offending value).
	Name string
	// Reason says what is wrong.
	Reason string
	// Err is the underlying error (a cron parse error, ErrJobTimeout), if
	// any.
	Err error
}

// Error returns the error message.
func (e *ScheduleError) Error() string {
	msg := "periodic: invalid schedule " + quote(e.Name) + ": " + e.Reason
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrInvalidSchedule and Err.
func (e *ScheduleError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidSchedule}
	}
	return []error{ErrInvalidSchedule, e.Err}
}

func quote(s string) string {
	if len(s) > 110 {
		s = s[:100] + "..."
	}
	return `"` + s + `"`
}

package periodic

import (
	"errors"
	"time"

	"github.com/leasehold/leasehold/fence"
)

// Hooks observe a Scheduler, for metrics. Each field may be nil. Hooks are
// called synchronously from the leader's goroutine and must not block.
type Hooks struct {
	// OnSlot is called for each slot of each attempt to record it, once the
	// attempt's outcome is known: a slot retried is reported again.
	OnSlot func(SlotEvent)
}

// SlotOutcome is what became of one attempt to record a slot.
type SlotOutcome string

// The outcomes of a slot.
const (
	// SlotEnqueued: the slot was recorded and its job enqueued (JobID; 0
	// if the job was a duplicate of a pending job with the same UniqueKey).
	SlotEnqueued SlotOutcome = "enqueued"
	// SlotSkipped: the slot was recorded as skipped (MissedSkip): no job.
	SlotSkipped SlotOutcome = "skipped"
	// SlotRecorded: an earlier transaction (one whose outcome was unknown)
	// had recorded the slot already: nothing was enqueued now.
	SlotRecorded SlotOutcome = "recorded"
	// SlotFenced: the transaction was refused by the fence: this scheduler
	// no longer leads, and the new leader handles the slot.
	SlotFenced SlotOutcome = "fenced"
	// SlotIndeterminate: the commit's outcome is unknown (the connection
	// failed during COMMIT): the slot may be recorded. The leader reads the
	// records again and carries on; either way the slot is enqueued once.
	SlotIndeterminate SlotOutcome = "indeterminate"
	// SlotFailed: the slot was not recorded (the transaction failed, or the
	// schedule's Job panicked, timed out or returned another group); it is
	// retried after Config.RetryDelay.
	SlotFailed SlotOutcome = "failed"
)

// SlotEvent describes one attempt to record one slot.
type SlotEvent struct {
	Group    string      // the scheduler's group
	Schedule string      // the schedule's name
	At       time.Time   // the slot, in UTC
	Token    fence.Token // the leader's token
	Outcome  SlotOutcome // what became of the slot in this attempt
	JobID    int64       // the job enqueued (SlotEnqueued), else 0
	Missed   int         // the earlier slots this one accounts for (see Slot)
	Err      error       // why the slot was not recorded; nil when it was
}

// outcome returns the outcome of a slot of an attempt that ended with err;
// fresh tells whether the attempt's transaction inserted the slot's record.
func outcome(sl Slot, fresh bool, err error) SlotOutcome {
	switch {
	case err == nil && !fresh:
		return SlotRecorded
	case err == nil && sl.Skip:
		return SlotSkipped
	case err == nil:
		return SlotEnqueued
	case errors.Is(err, fence.ErrFenced):
		return SlotFenced
	case fence.IsIndeterminate(err):
		return SlotIndeterminate
	}
	return SlotFailed
}

// report calls the OnSlot hook for each slot of an attempt that ended with
// err; fresh (nil when err is not) tells which slots it inserted.
func (s *Scheduler) report(token fence.Token, slots []Slot, fresh []bool, err error) {
	f := s.cfg.Hooks.OnSlot
	if f == nil {
		return
	}
	for i, sl := range slots {
		ev := SlotEvent{Group: s.cfg.Group, Schedule: sl.Schedule, At: sl.At, Token: token,
			Outcome: outcome(sl, i < len(fresh) && fresh[i], err), Missed: sl.Missed, Err: err}
		if ev.Outcome == SlotEnqueued {
			ev.JobID = sl.JobID
		}
		f(ev)
	}
}

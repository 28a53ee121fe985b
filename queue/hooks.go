package queue

import (
	"time"

	"github.com/leasehold/leasehold/fence"
)

// Hooks observe a Processor, for metrics. Each field may be nil. Hooks are
// called synchronously from the Processor's goroutines and must not block.
type Hooks struct {
	// OnJob is called once for each run of a job, when its outcome is
	// known: recorded, refused by the fence, or left for the next fetch.
	OnJob func(JobEvent)
}

// Outcome is what became of one run of a job.
type Outcome string

// The outcomes of a run.
const (
	// OutcomeCompleted: the handler succeeded and the job is completed.
	OutcomeCompleted Outcome = "completed"
	// OutcomeRetried: the handler failed; the job runs again later.
	OutcomeRetried Outcome = "retried"
	// OutcomeDiscarded: the handler failed its last attempt, or the args
	// did not decode.
	OutcomeDiscarded Outcome = "discarded"
	// OutcomeCancelled: the handler returned Cancel, or the job was
	// cancelled while it ran (Client.Cancel; the event's Err wraps
	// ErrJobCancelled): it is not retried.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeSnoozed: the handler returned Snooze, or the job's kind has no
	// handler; it runs again later without spending an attempt.
	OutcomeSnoozed Outcome = "snoozed"
	// OutcomeFenced: the outcome was refused because a newer owner has the
	// partition; the newer owner runs the job.
	OutcomeFenced Outcome = "fenced"
	// OutcomeInterrupted: the partition was handed off or lost while the
	// job ran; it stays pending, without spending an attempt.
	OutcomeInterrupted Outcome = "interrupted"
	// OutcomeUnrecorded: the outcome could not be recorded (a database
	// error); the job stays pending and runs again.
	OutcomeUnrecorded Outcome = "unrecorded"
	// OutcomeSkipped: the job was found finished already (for example
	// cancelled by an operator) when its transactional run tried to
	// complete it, or another job of its batch was cancelled while the
	// batch ran; its effects were rolled back, and a job not finished
	// runs again without spending an attempt.
	OutcomeSkipped Outcome = "skipped"
)

// JobEvent describes one run of a job.
type JobEvent struct {
	Group     string
	Partition int
	ID        int64
	Kind      string
	Attempt   int // 1 on the first run
	// Token is the fencing token of the grant the run was under: two runs
	// of one job in one process (a stalled run of an earlier grant, and
	// the next grant's) tell apart by it.
	Token   fence.Token
	Outcome Outcome
	// Duration is how long the handler ran (for a batch handler, the whole
	// batch's run).
	Duration time.Duration
	// Err is the handler's error, or the error that kept the outcome from
	// being recorded; nil on success.
	Err error
}

package queue

import (
	"fmt"
	"time"
)

// Policy is how the jobs of one kind are run, declared with the kind's
// handler (WithPolicy), as River's worker methods declare them. Each zero
// field means the Processor's default.
type Policy struct {
	// MaxAttempts replaces the client's default attempt limit
	// (Config.MaxAttempts) for the jobs of the kind enqueued without one
	// (Job.MaxAttempts 0): the enqueuer may not know the kind's policy, so
	// an explicit Job.MaxAttempts always wins. Jobs enqueued before
	// migration 0010 count as explicit. Defaults to 0: the stored limit.
	MaxAttempts int
	// Timeout replaces ProcessorConfig.JobTimeout for the kind: each run's
	// (for a batch handler, each batch's) context deadline. A run that
	// times out is a failed attempt whose context's cause wraps
	// ErrJobTimeout. Defaults to 0: JobTimeout; negative means no timeout.
	Timeout time.Duration
	// Backoff replaces the Processor's jittered backoff (MinRetry,
	// MaxRetry) for the kind: the delay before the job runs again after
	// failed attempt number attempt (1 for the first), added to the
	// database's clock. Add your own jitter, from your own seeded source,
	// if you want it. A negative delay counts as 0. If it panics, the
	// Processor's backoff is used and the panic logged at ERROR. Defaults
	// to nil: the Processor's backoff.
	Backoff func(attempt int) time.Duration
	// FailureHold says whether a keyed job of the kind that failed and
	// waits for its retry holds its key's later jobs, overriding the
	// job's own Ordering from that failure on. Defaults to HoldAsEnqueued:
	// the job's Ordering decides.
	FailureHold FailureHold
}

// FailureHold says whether a keyed job that failed and waits for its retry
// holds its key's later jobs (see Policy.FailureHold).
type FailureHold int

const (
	// HoldAsEnqueued leaves it to the job's own Ordering (OrderStrict
	// holds, OrderNonBlocking does not).
	HoldAsEnqueued FailureHold = iota
	// HoldKey keeps the key's later jobs waiting behind the failed job
	// until it is finished, as OrderStrict does.
	HoldKey
	// ReleaseKey steps the failed job out of line until its retry is
	// due, as OrderNonBlocking does: the key's later jobs run meanwhile.
	ReleaseKey
)

// WithPolicy declares the policy of the handler's kind (see Policy). A
// policy with a negative MaxAttempts, one above the largest (MaxAttempts)
// or an unknown FailureHold is an error of NewProcessor wrapping
// ErrInvalidConfig.
func WithPolicy(p Policy) Option {
	return func(o *handlerOptions) { o.policy = p }
}

// check validates the policy.
func (p Policy) check() error {
	switch {
	case p.MaxAttempts < 0 || p.MaxAttempts > MaxAttempts:
		return fmt.Errorf("MaxAttempts %d is not in 0..%d", p.MaxAttempts, MaxAttempts)
	case p.FailureHold < HoldAsEnqueued || p.FailureHold > ReleaseKey:
		return fmt.Errorf("unknown FailureHold %d", int(p.FailureHold))
	}
	return nil
}

// timeoutCause is the cause of a context timed out by the policy's
// Timeout (nil: the policy sets none).
func (p Policy) timeoutCause() error {
	if p.Timeout <= 0 {
		return nil
	}
	return fmt.Errorf("%w after %v", ErrJobTimeout, p.Timeout)
}

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
	// KeyConcurrency is how many jobs of one key may run at once when the
	// next of them is of this kind (a job's own Job.KeyConcurrency wins).
	// 1 keeps a key's jobs one at a time, in id order; above 1, up to that
	// many of the key's due jobs run at once, started in id order, with
	// no order between them: a job of the key that fails waits for its
	// retry without holding the others (as ReleaseKey, unless FailureHold
	// says otherwise). The owner of the key's partition counts them, so
	// the limit holds fleet-wide with no statement of its own (see
	// docs/control.md). Defaults to 0: 1. At most MaxKeyConcurrency.
	KeyConcurrency int
	// KeyRate limits how often the kind's jobs of one key start: at most
	// KeyRate.Starts in any KeyRate.Per. Defaults to the zero Rate: no
	// limit.
	KeyRate Rate
	// GroupConcurrency is how many of the kind's jobs may run at once in
	// the whole group, across all its members: the kind's slots, each a
	// lease held by one member (see docs/control.md). Defaults to 0: no
	// limit.
	GroupConcurrency int
}

// MaxKeyConcurrency is the largest Policy.KeyConcurrency and
// Job.KeyConcurrency.
const MaxKeyConcurrency = 10000

// MaxGroupConcurrency is the largest Policy.GroupConcurrency.
const MaxGroupConcurrency = 1024

// Rate is a rate limit: at most Starts starts in any window of Per. The
// zero Rate is no limit.
type Rate struct {
	// Starts is how many starts a window of Per may hold. At least 1
	// when Per is set.
	Starts int
	// Per is the window's length, from 1ms to 24h.
	Per time.Duration
}

// limited reports whether r limits anything.
func (r Rate) limited() bool { return r.Per > 0 }

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
	case p.KeyConcurrency < 0 || p.KeyConcurrency > MaxKeyConcurrency:
		return fmt.Errorf("KeyConcurrency %d is not in 0..%d", p.KeyConcurrency, MaxKeyConcurrency)
	case p.GroupConcurrency < 0 || p.GroupConcurrency > MaxGroupConcurrency:
		return fmt.Errorf("GroupConcurrency %d is not in 0..%d", p.GroupConcurrency, MaxGroupConcurrency)
	case p.KeyRate != (Rate{}) && (p.KeyRate.Starts < 1 || p.KeyRate.Per < time.Millisecond || p.KeyRate.Per > 24*time.Hour):
		return fmt.Errorf("KeyRate %d per %v: Starts must be at least 1 and Per from 1ms to 24h", p.KeyRate.Starts, p.KeyRate.Per)
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

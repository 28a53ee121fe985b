package periodic

import (
	"fmt"
	"time"

	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/queue"
)

// MaxGroupLen is the longest group name, in bytes (as for partition groups).
const MaxGroupLen = 100

// LeasePrefix prefixes the group's name in the name of its leader lease.
const LeasePrefix = "periodic/"

// DefaultJobTimeout is Config.JobTimeout's default.
const DefaultJobTimeout = time.Second

// Config configures a Scheduler. The zero value of every optional field
// means its default.
type Config struct {
	// Group is the partition group whose jobs the schedules enqueue; it must
	// exist when a slot comes due (a worker of the group creates it).
	// Required; 1 to 100 bytes.
	Group string
	// Schedules are the group's schedules. Every scheduler of a group
	// should declare the same ones; the leader's are the ones that fire.
	// Required: at least one.
	Schedules []Schedule
	// ID identifies this scheduler as a holder of the leader lease; unique
	// among the group's schedulers. Defaults to lease.DefaultOwner().
	ID string
	// Lease configures the leader lease: TTL (defaults to 15s; a leader cut
	// off is replaced after at most about one TTL), RenewInterval,
	// SafetyMargin, backoff between acquire attempts (MaxBackoff, 1s by
	// default, is also how often a follower tries to take the lease). Its
	// Owner must be empty (ID applies).
	Lease lease.Config
	// Fence configures the leader's fenced transactions. Defaults as in
	// lease.FenceConfig.
	Fence lease.FenceConfig
	// Grace is how long no leader may run before a takeover (measured on
	// the database's clock, from the previous leader's release or last
	// renewal to the grant) with the slots that came due meanwhile still
	// enqueued as usual rather than handled as missed: it covers a graceful
	// hand-over (the old leader released the lease, a follower takes it at
	// its next poll, within Lease.MaxBackoff). Otherwise the slots that
	// came due more than Grace before the grant (by the database's clock,
	// or by Clock if it is behind) are missed. Defaults to 2s or twice
	// Lease.MaxBackoff, whichever is longer; negative means none.
	Grace time.Duration
	// Retention is how long slot records are kept (each schedule's latest
	// is always kept). Defaults to 24h.
	Retention time.Duration
	// RetryDelay is how long the leader waits after a failed transaction
	// before it tries again (the slot stays due). Defaults to 1s.
	RetryDelay time.Duration
	// Clock is the clock slots are computed by (when a slot is due) and
	// the leader's timers run on. The lease, and the follower's polls for
	// it, and JobTimeout, use Lease.Clock; the time no leader ran, and
	// which slots a takeover counts missed, are measured on the database's
	// clock (see Grace). Defaults to lease.SystemClock.
	Clock lease.Clock
	// JobTimeout bounds each call of a schedule's Job (measured on
	// Lease.Clock, as the lease's own timers): a Job that has not returned
	// by then fails its slot (an error wrapping ErrJobTimeout), and the
	// other schedules due with it go on. Until that call returns, its
	// schedule is left out at once (the call is not repeated). Defaults to
	// 1s.
	JobTimeout time.Duration
	// Hooks observe each slot's outcome, for metrics. Defaults to none.
	Hooks Hooks
	// Queue configures the client that enqueues the slots' jobs: set its
	// TracerProvider and Propagator for leasehold.enqueue spans (see
	// docs/tracing.md). Defaults as in queue.Config.
	Queue queue.Config
}

// withDefaults validates c and returns it with defaults filled in and its
// schedules compiled.
func (c Config) withDefaults() (Config, []*sched, error) {
	bad := func(field, reason string) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, reason)
	}
	switch {
	case c.Group == "" || len(c.Group) > MaxGroupLen:
		return c, nil, bad("Group", fmt.Sprintf("%d bytes, must be 1 to %d", len(c.Group), MaxGroupLen))
	case len(c.Schedules) == 0:
		return c, nil, bad("Schedules", "at least one is required")
	case c.Lease.Owner != "":
		return c, nil, bad("Lease.Owner", "must be empty: ID applies")
	case c.Retention < 0 || c.RetryDelay < 0 || c.JobTimeout < 0:
		return c, nil, bad("Retention/RetryDelay/JobTimeout", "negative duration")
	}
	scheds := make([]*sched, len(c.Schedules))
	seen := make(map[string]bool, len(c.Schedules))
	for i, s := range c.Schedules {
		cs, err := compile(i, s)
		if err != nil {
			return c, nil, err
		}
		if seen[s.Name] {
			return c, nil, &ScheduleError{Index: i, Name: s.Name, Reason: "Name: declared twice"}
		}
		seen[s.Name] = true
		scheds[i] = cs
	}
	if c.ID == "" {
		c.ID = lease.DefaultOwner()
	}
	switch {
	case c.Grace == 0:
		mb := c.Lease.MaxBackoff
		if mb <= 0 {
			mb = time.Second // lease.Config's default
		}
		c.Grace = max(2*time.Second, 2*mb)
	case c.Grace < 0:
		c.Grace = 0
	}
	if c.Retention == 0 {
		c.Retention = 24 * time.Hour
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = time.Second
	}
	if c.JobTimeout == 0 {
		c.JobTimeout = DefaultJobTimeout
	}
	if c.Clock == nil {
		c.Clock = lease.SystemClock{}
	}
	return c, scheds, nil
}

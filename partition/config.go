package partition

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/lease"
)

var (
	// ErrInvalidConfig is wrapped by every configuration error.
	ErrInvalidConfig = errors.New("partition: invalid config")
	// ErrPartitionCount is wrapped by *CountError.
	ErrPartitionCount = errors.New("partition: partition count differs from the group's")
	// ErrDuplicateMember means another live process uses this member id.
	ErrDuplicateMember = errors.New("partition: member id in use by another live process")
	// ErrHandoff is the cause of a Run context cancelled because the
	// partition is assigned to another member.
	ErrHandoff = errors.New("partition: handed off")
	// ErrStopped is the cause of a Run context cancelled by Stop, and the
	// error of a Start on a stopped Member (one that was stopped, or whose
	// Start failed). It wraps leasehold.ErrStopped.
	ErrStopped = lifecycle.Stopped("partition: member stopped")
	// ErrStarted is the error of a second Start on a started Member. It
	// wraps leasehold.ErrStarted.
	ErrStarted = lifecycle.Started("partition: member already started")
	// ErrGroupNotFound is returned by Inspect for an unknown group.
	ErrGroupNotFound = errors.New("partition: group not found")
)

// CountError reports a member (or a queue.Client.EnsureGroup) configured
// with a partition count that differs from the one recorded for its group.
type CountError struct {
	Group      string
	Configured int
	Stored     int
}

// Error returns the error message.
func (e *CountError) Error() string {
	return fmt.Sprintf("partition: group %q has %d partitions, not %d as configured: "+
		"the count is fixed when a group is created", e.Group, e.Stored, e.Configured)
}

// Unwrap returns ErrPartitionCount.
func (e *CountError) Unwrap() error { return ErrPartitionCount }

// MaxPartitions is the largest partition count of a group.
const MaxPartitions = 65536

// Config configures a Member. The zero value of every optional field means
// its default.
type Config struct {
	// Group names the group. Required; 1 to 100 bytes.
	Group string
	// Partitions is the group's partition count, 1 to MaxPartitions. It is
	// recorded when the group is created; a member with another count is
	// refused with a *CountError. Required.
	Partitions int
	// ID identifies the member, 1 to 200 bytes. It must be unique among
	// live members: a second live process with the same id is refused with
	// ErrDuplicateMember. The owner id of its leases is ID + "#" + a random
	// incarnation of this process, so a restarted process never takes over
	// its predecessor's leases before they expire. Defaults to
	// lease.DefaultOwner().
	ID string
	// Run is called in its own goroutine once per grant of a partition to
	// this member, and should work until its context is cancelled. The
	// cause says why: ErrHandoff, ErrStopped, an error wrapping
	// lease.ErrLost or lease.ErrReleased, ErrDuplicateMember or a
	// *CountError. The partition is released only after Run returns or
	// HandoffTimeout passes. A Run that returns (or panics) before its
	// context is cancelled gives the partition up: it is released and
	// claimed again after a backoff (PollInterval, doubling up to a minute
	// while Run keeps returning early). Required.
	Run func(ctx context.Context, o Ownership)
	// Lease configures the member's lease client (TTL, renew interval,
	// clock ...). Its TTL is also the membership TTL and its RenewInterval
	// the heartbeat interval. Lease.Owner must be empty: the owner id of
	// the member's leases is derived from ID. Defaults as in lease.Config.
	Lease lease.Config
	// PollInterval is how often a member re-reads the membership while it
	// cannot listen for notifications (its listening connection is down).
	// While it listens, it reads the membership when notified (a join, a
	// leave, a release), when another member's membership or a wanted
	// partition's lease expires, and otherwise at least every
	// max(PollInterval, Lease.TTL). Defaults to 1s.
	PollInterval time.Duration
	// HandoffTimeout bounds how long a handoff waits for Run to return
	// before releasing the partition anyway (writes of a Run that ignores
	// its context are still refused by the fence). Defaults to Lease.TTL.
	HandoffTimeout time.Duration
}

// Ownership is one grant of a partition to this member.
type Ownership struct {
	Group     string
	Partition int
	// Token is the partition's fencing token for this grant: carry it in
	// every effect.
	Token fence.Token
	// Lease is the partition's lease.
	Lease *lease.Lease
}

// LeaseName returns the name of the lease of partition p of group:
// "partition/<group>/<p>".
//
// The lease's owner is "<member id>#<incarnation>"; MemberOf recovers the
// member id.
func LeaseName(group string, p int) string { return "partition/" + group + "/" + strconv.Itoa(p) }

// MemberOf returns the member id in a partition lease's owner id.
func MemberOf(owner string) string {
	if i := strings.LastIndexByte(owner, '#'); i >= 0 {
		return owner[:i]
	}
	return owner
}

func (c Config) withDefaults() (Config, error) {
	bad := func(field, reason string) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, reason)
	}
	switch {
	case c.Group == "" || len(c.Group) > 100:
		return c, bad("Group", "must be 1 to 100 bytes")
	case c.Partitions < 1 || c.Partitions > MaxPartitions:
		return c, bad("Partitions", fmt.Sprintf("%d is not in 1..%d", c.Partitions, MaxPartitions))
	case c.Run == nil:
		return c, bad("Run", "required")
	case c.PollInterval < 0 || c.HandoffTimeout < 0:
		return c, bad("PollInterval/HandoffTimeout", "negative duration")
	}
	if c.Lease.Owner != "" {
		return c, bad("Lease.Owner", "must be empty: the member derives its lease owner id from ID")
	}
	if c.ID == "" {
		c.ID = lease.DefaultOwner()
	}
	if len(c.ID) > 200 || strings.ContainsRune(c.ID, 0) {
		return c, bad("ID", "must be 1 to 200 bytes without NUL")
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	return c, nil
}

package lease

import (
	"time"

	"github.com/leasehold/leasehold/fence"
)

// Hooks observe a Client, for metrics. Each field may be nil. Hooks are
// called synchronously from the Client's goroutines and must not block.
type Hooks struct {
	// OnAcquire is called after every acquisition attempt.
	OnAcquire func(AcquireEvent)
	// OnRenew is called after every renewal statement.
	OnRenew func(RenewEvent)
	// OnLoss is called once for each lease that is lost.
	OnLoss func(LossEvent)
	// OnRelease is called after every release.
	OnRelease func(ReleaseEvent)
}

// AcquireEvent describes one acquisition attempt of one or more names.
type AcquireEvent struct {
	Names   []string // the names asked for
	Owner   string
	Granted []string      // the names granted (all of Names, or with TryAcquireAny those free)
	Tokens  []fence.Token // the tokens of Granted
	Latency time.Duration // from sending the request to its reply
	Err     error         // nil, ErrHeld or the failure
}

// RenewEvent describes one renewal statement covering Count leases.
type RenewEvent struct {
	Owner   string
	Count   int // leases the statement tried to renew
	Renewed int // leases it renewed
	// Busy is the number of leases the statement skipped because another
	// transaction held their rows' locks in a conflicting mode (a fence
	// check of a version before schema 15, FOR SHARE; not one of this
	// version, FOR KEY SHARE):
	// neither renewed nor lost, they are retried soon on their own. Always
	// zero for Lease.Renew, which waits for the lock.
	Busy    int
	Latency time.Duration
	Err     error
}

// LossEvent describes a lost lease.
type LossEvent struct {
	Name  string
	Owner string
	Token fence.Token
	Held  time.Duration // local time from grant to loss
	Err   error         // wraps ErrLost, says why
}

// ReleaseEvent describes a release.
type ReleaseEvent struct {
	Name    string
	Owner   string
	Token   fence.Token
	Held    time.Duration
	Latency time.Duration
	Err     error
}

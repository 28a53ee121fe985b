package leasehold

import "github.com/leasehold/leasehold/internal/lifecycle"

// ErrStarted is wrapped by the error of a second Start on any started
// service (partition.Member, worker.Worker): Start runs once. Each
// component also exports its own ErrStarted, which matches this one under
// errors.Is.
var ErrStarted = lifecycle.ErrStarted

// ErrStopped is wrapped by the error of a Start on any stopped service
// (one that was stopped, or whose Start failed): a stopped service cannot
// be restarted. Each component also exports its own ErrStopped, which
// matches this one under errors.Is.
var ErrStopped = lifecycle.ErrStopped

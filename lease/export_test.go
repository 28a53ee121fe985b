package lease

import "time"

// SetLoopHook makes c's renewal loop call f each time it has set its timer
// (with the wait) and when it exits (with -1). Set it before the first
// acquire.
func SetLoopHook(c *Client, f func(wait time.Duration)) { c.loopSlept = f }

// UseWaitingRenewal makes c's renewal loop renew with the statement that
// waits for each row's lock, as it did before it skipped locked rows: the
// negative control of the starvation tests. Set it before the first acquire.
func UseWaitingRenewal(c *Client) { c.waitingRenew = true }

// NoWaitingRenewal turns off c's waiting renewal of busy leases near their
// deadlines: the control of TestBusyLeaseUnderSteadyFenceChecksStaysHeld.
func NoWaitingRenewal(c *Client) { c.noWaitingRenew = true }

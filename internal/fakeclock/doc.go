// Package fakeclock is a manually advanced clock for deterministic tests of
// code that takes a lease.Clock.
package fakeclock

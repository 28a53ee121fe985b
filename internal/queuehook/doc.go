// Package queuehook lets the test helpers (package leaseholdtest) reach
// into package queue without enlarging its public API: queue sets the
// function variables here in its init, and leaseholdtest calls them. Its
// types use no type of package queue (which imports this one), hence the
// values of type any, which are always of the queue types documented.
package queuehook

// Package dbpool derives the small connection pools leasehold's components
// run their own statements on, from the pool the user hands them.
package dbpool

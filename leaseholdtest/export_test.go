package leaseholdtest

// SetMaxJobs sets the most jobs of a kind an assertion reads, for a test,
// and returns a func restoring it.
func SetMaxJobs(n int) (restore func()) {
	old := maxJobs
	maxJobs = n
	return func() { maxJobs = old }
}

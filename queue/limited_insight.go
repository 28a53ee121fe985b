package queue

// What operators are shown of the limits (`leasehold status`, `leasehold
// jobs limited`, the web UI's group page; see docs/control.md): the keys
// held back, which each partition's owner publishes with its running jobs
// (limited.go, running.go), and the limits each kind declares, recorded
// with the kinds (RecordKinds).

// LimitedKeysPerPartition is how many keys held back one partition's
// owner publishes at most: those with the most jobs waiting. A partition
// that lists this many may hold back more.
const LimitedKeysPerPartition = maxLimitedKeys

// DeclaredLimits are the limits a kind's handler declares (its Policy), as
// RecordKinds records them in the group's kinds.
type DeclaredLimits struct {
	// KeyConcurrency is Policy.KeyConcurrency as it applies: 1 when the
	// policy leaves it 0. A job's own Job.KeyConcurrency wins over it.
	KeyConcurrency int `json:"key_concurrency"`
	// KeyRateStarts and KeyRatePerMS are Policy.KeyRate; 0 and 0: no rate.
	KeyRateStarts int   `json:"key_rate_starts"`
	KeyRatePerMS  int64 `json:"key_rate_per_ms"`
	// GroupConcurrency is Policy.GroupConcurrency; 0: no limit.
	GroupConcurrency int `json:"group_concurrency"`
}

// Limits reports whether d limits more than the default (one job of a key
// at a time).
func (d DeclaredLimits) Limits() bool {
	return d.KeyConcurrency > 1 || d.KeyRatePerMS > 0 || d.GroupConcurrency > 0
}

package partition

import "time"

// MembershipReads returns how many times m has read the membership.
func MembershipReads(m *Member) int64 { return m.reads.Load() }

// Listening reports whether m's listener listens.
func Listening(m *Member) bool { return m.listening.Load() }

// SetLateRelease sets the time after which m's releases notify; call it
// before Start.
func SetLateRelease(m *Member, d time.Duration) { m.lateRelease = d }

// HandoffPolls returns m's count of handoff polls in a row.
func HandoffPolls(m *Member) int64 { return m.handoffPolls.Load() }

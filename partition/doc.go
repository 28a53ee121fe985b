// Package partition gives each partition of a group exactly one owner among
// the group's live members.
//
// A group has a fixed number of partitions, recorded in the database when
// the group is created. Jobs map to partitions with [Of]. Members join the
// group and heartbeat on the database clock; every member computes the same
// desired owner for each partition from the live members with consistent
// hashing and bounded loads ([Assign]). A member claims the partitions
// assigned to it with one lease each (package lease): the lease's token is
// the partition's fencing token. It hands off partitions no longer assigned
// to it gracefully (stop, wait for in-flight work, release), so the next
// owner starts at once. A crashed member's partitions move when its leases
// expire. LISTEN/NOTIFY wakes members on joins, leaves and releases, with
// polling as the fallback.
//
// A [Member] calls Config.Run once per grant, with a context cancelled when
// the lease is lost or the partition must be handed off.
//
// See docs/partitions.md.
package partition

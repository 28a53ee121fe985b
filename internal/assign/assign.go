package assign

import (
	"fmt"
	"slices"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

type member string

func (m member) String() string { return string(m) }

// Owners returns the owner of each of n partitions among members, with
// replicationFactor ring points per member and the load bound load (> 1).
// It depends only on the set of members: order and duplicates do not matter.
// With no members every owner is "".
func Owners(members []string, n, replicationFactor int, load float64) (owners []string, err error) {
	if n < 1 || replicationFactor < 1 || load <= 1 {
		return nil, fmt.Errorf("assign: invalid parameters: %d partitions, replication %d, load %v", n, replicationFactor, load)
	}
	owners = make([]string, n)
	ids := slices.Clone(members)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return owners, nil
	}
	ms := make([]consistent.Member, len(ids))
	for i, id := range ids {
		ms[i] = member(id)
	}
	defer func() {
		// consistent panics when bounded loads leave no room, which load > 1
		// rules out; never let that take the process down.
		if r := recover(); r != nil {
			owners, err = nil, fmt.Errorf("assign: %d partitions to %d members: %v", n, len(ids), r)
		}
	}()
	ring := consistent.New(ms, consistent.Config{
		Hasher: hasher{}, PartitionCount: n, ReplicationFactor: replicationFactor, Load: load,
	})
	for p := range owners {
		owners[p] = ring.GetPartitionOwner(p).String()
	}
	return owners, nil
}

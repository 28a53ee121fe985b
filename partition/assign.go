package partition

import (
	"fmt"
	"slices"

	"github.com/buraksezer/consistent"
)

// The consistent-hashing parameters. Every member must use the same ones,
// so they are constants, not configuration; docs/partitions.md shows the
// measurements behind them.
const (
	// ReplicationFactor is the number of points each member has on the ring.
	ReplicationFactor = 160
	// Load bounds a member's partitions at ceil(Load * partitions/members).
	Load = 1.25
)

type member string

func (m member) String() string { return string(m) }

// Assign returns the desired owner of each of n partitions among members:
// consistent hashing with bounded loads (github.com/buraksezer/consistent
// v1.0.0, XXH64, ReplicationFactor, Load). It is a pure function of the set
// of member ids and n: the order of members does not matter. With more
// members than partitions some members get none. With no members every
// owner is "".
func Assign(members []string, n int) (owners []string, err error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: %d partitions", ErrInvalidConfig, n)
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
		// consistent panics when bounded loads leave no room, which the
		// constants above rule out; never let that take the process down.
		if r := recover(); r != nil {
			owners, err = nil, fmt.Errorf("partition: assign %d partitions to %d members: %v", n, len(ids), r)
		}
	}()
	ring := consistent.New(ms, consistent.Config{
		Hasher: hasher{}, PartitionCount: n, ReplicationFactor: ReplicationFactor, Load: Load,
	})
	for p := range owners {
		owners[p] = ring.GetPartitionOwner(p).String()
	}
	return owners, nil
}

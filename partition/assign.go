package partition

import (
	"fmt"

	"github.com/leasehold/leasehold/internal/assign"
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

// Assign returns the desired owner of each of n partitions among members:
// consistent hashing with bounded loads, the owners
// github.com/buraksezer/consistent v1.0.0 computes with XXH64,
// ReplicationFactor and Load, in O(m·log m) for m members (the library
// takes O(m²·log m)). It is a pure function of the set
// of member ids and n: the order of members does not matter. With more
// members than partitions some members get none. With no members every
// owner is "".
func Assign(members []string, n int) ([]string, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: %d partitions", ErrInvalidConfig, n)
	}
	return assign.Owners(members, n, ReplicationFactor, Load)
}
